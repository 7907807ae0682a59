package io.apnsmock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.apnsmock.junit5.ApnsMockExtension;
import java.net.http.HttpClient;
import java.net.http.HttpResponse;
import java.security.KeyPairGenerator;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.util.Base64;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The container configured with a team, key, apps, environment and admin token of the test's own. */
@Tag("container")
class OwnKeyTest {
    static final String KEY_PEM = newKey();

    @RegisterExtension
    static ApnsMockExtension apns = new ApnsMockExtension(new ApnsMockContainer()
            .withTeam("TEAMJAVA01").withKey("KEYJAVA001", KEY_PEM).withTopics("com.example.java")
            .withEnvironment("production").withAdminToken("s3cret"));

    static String newKey() {
        try {
            KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
            generator.initialize(new ECGenParameterSpec("secp256r1"));
            return "-----BEGIN PRIVATE KEY-----\n" + Base64.getMimeEncoder().encodeToString(generator.generateKeyPair().getPrivate().getEncoded())
                    + "\n-----END PRIVATE KEY-----\n";
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    @Test
    void ownTeamKeyAndAdminToken() throws Exception {
        HttpClient client = ContainerPushTest.http2Trusting(apns.caFile());
        String device = "d4".repeat(32);
        HttpResponse<String> answer = ContainerPushTest.push(client, apns.apnsUrl(), apns.providerToken(), device, "com.example.java", "{\"aps\":{\"alert\":\"own key\"}}");
        assertEquals(200, answer.statusCode(), answer.body());
        HttpResponse<String> other = ContainerPushTest.push(client, apns.apnsUrl(), apns.providerToken(), "d5".repeat(32), "com.example.app", "{\"aps\":{\"alert\":\"not ours\"}}");
        assertEquals(400, other.statusCode());
        assertEquals("TopicDisallowed", Json.parseObject(other.body()).get("reason"));

        Notification record = apns.admin().waitFor(Query.ofToken(device), 1, Duration.ofSeconds(5)).get(0);
        assertEquals("TEAMJAVA01", record.get("auth", "teamId"));
        assertEquals("KEYJAVA001", record.get("auth", "keyId"));
        assertEquals("production", record.environment());
        AdminException refused = assertThrows(AdminException.class,
                () -> new AdminClient(apns.container().adminUrl()).stats());
        assertEquals(401, refused.status());
    }
}
