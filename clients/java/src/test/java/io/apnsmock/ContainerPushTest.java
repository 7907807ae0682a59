package io.apnsmock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.apnsmock.junit5.ApnsMockExtension;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The extension starts apns-mock's image through the engine it finds; the tests push as a Java
 * provider does, over HTTP/2 with java.net.http.HttpClient trusting the container's CA, with the
 * provider token the extension signs, and assert through the admin client what arrived.
 */
@Tag("container")
class ContainerPushTest {
    @RegisterExtension
    static ApnsMockExtension apns = new ApnsMockExtension();

    /** An HTTP/2 client trusting only the CA in {@code caFile}. */
    static HttpClient http2Trusting(Path caFile) throws Exception {
        KeyStore trusted = KeyStore.getInstance(KeyStore.getDefaultType());
        trusted.load(null, null);
        try (InputStream pem = Files.newInputStream(caFile)) {
            trusted.setCertificateEntry("apns-mock-ca", CertificateFactory.getInstance("X.509").generateCertificate(pem));
        }
        TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        trust.init(trusted);
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(null, trust.getTrustManagers(), null);
        return HttpClient.newBuilder().version(HttpClient.Version.HTTP_2).sslContext(tls).connectTimeout(Duration.ofSeconds(10)).build();
    }

    static HttpResponse<String> push(HttpClient client, String apnsUrl, String token, String device, String topic, String payload) throws Exception {
        HttpRequest request = HttpRequest.newBuilder(URI.create(apnsUrl + "/3/device/" + device))
                .timeout(Duration.ofSeconds(20))
                .header("authorization", "bearer " + token)
                .header("apns-topic", topic)
                .header("apns-push-type", "alert")
                .POST(HttpRequest.BodyPublishers.ofString(payload))
                .build();
        return client.send(request, HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void pushOverHttp2AndAssertWhatArrived() throws Exception {
        HttpClient client = http2Trusting(apns.caFile());
        String device = "c0".repeat(32);
        HttpResponse<String> answer = push(client, apns.apnsUrl(), apns.providerToken(), device, apns.topic(),
                "{\"aps\":{\"alert\":{\"title\":\"Welcome\",\"body\":\"from Java\"}}}");
        assertEquals(200, answer.statusCode(), answer.body());
        assertEquals(HttpClient.Version.HTTP_2, answer.version());
        String apnsId = answer.headers().firstValue("apns-id").orElseThrow();

        Notification push = apns.admin().waitFor(Query.ofToken(device), 1, Duration.ofSeconds(5)).get(0);
        assertEquals("Welcome", push.get("payload", "aps", "alert", "title"));
        assertEquals(apnsId.toLowerCase(), push.apnsId().toLowerCase());
        assertEquals("alert", push.headers().get("apns-push-type"));
        assertEquals(200, push.status());
        assertEquals("DEMOTEAM01", push.get("auth", "teamId"));
        assertEquals("DEMOKEY001", push.get("auth", "keyId"));
        assertEquals("jose", push.get("auth", "signatureForm"));
        assertEquals(1, apns.admin().notifications(Query.any()).notifications.size());
    }

    @Test
    void errorPathsThroughTheAdminClient() throws Exception {
        HttpClient client = http2Trusting(apns.caFile());
        AdminClient admin = apns.admin();
        assertEquals(0, admin.notifications(Query.any().outcome("all")).notifications.size(), "reset before each test");

        // A fault rule: the next alert push answers 429 TooManyRequests.
        Map<String, Object> rule = admin.addFault(Map.of("match", Map.of("pushType", "alert"),
                "respond", Map.of("status", 429, "reason", "TooManyRequests"), "times", 1));
        assertNotNull(rule.get("id"));
        assertEquals(1, admin.faults().size());
        String device = "c1".repeat(32);
        HttpResponse<String> refused = push(client, apns.apnsUrl(), apns.providerToken(), device, apns.topic(), "{\"aps\":{\"alert\":\"one\"}}");
        assertEquals(429, refused.statusCode());
        assertTrue(refused.body().contains("TooManyRequests"), refused.body());
        assertEquals(200, push(client, apns.apnsUrl(), apns.providerToken(), device, apns.topic(), "{\"aps\":{\"alert\":\"two\"}}").statusCode());
        List<Notification> rejected = admin.notifications(Query.ofToken(device).outcome("rejected")).notifications;
        assertEquals("TooManyRequests", rejected.get(0).reason());
        Map<String, Object> stats = admin.stats();
        assertEquals(1L, Json.at(stats, "accepted"), Json.write(stats));
        assertEquals(1L, Json.at(stats, "byReason", "TooManyRequests"), Json.write(stats));

        // An unregistered device: 410 with a timestamp.
        String gone = "c2".repeat(32);
        admin.unregisterDevice(gone, null, null);
        HttpResponse<String> unregistered = push(client, apns.apnsUrl(), apns.providerToken(), gone, apns.topic(), "{\"aps\":{\"alert\":\"hi\"}}");
        assertEquals(410, unregistered.statusCode());
        assertTrue(unregistered.body().contains("timestamp"), unregistered.body());
        assertTrue(Json.write(admin.devices()).contains(gone));
        admin.removeDevice(gone);

        // The clock, channels, a bad request's message, a wait that times out.
        assertEquals(3600L, ((Number) admin.advanceClock(3600).get("offsetSeconds")).longValue());
        Map<String, Object> channel = admin.createChannel(apns.topic(), "sandbox", 1);
        String channelId = (String) channel.get("channelId");
        assertTrue(admin.channels(apns.topic(), null).stream().anyMatch(c -> channelId.equals(c.get("channelId"))));
        admin.deleteChannel(channelId);
        AdminException bad = assertThrows(AdminException.class, () -> admin.addFault(Map.of("respond", Map.of("status", "soon"))));
        assertEquals(400, bad.status());
        WaitTimeoutError timeout = assertThrows(WaitTimeoutError.class,
                () -> admin.waitFor(Query.ofToken(device), 3, Duration.ofSeconds(1)));
        assertEquals(1, timeout.matched());
        assertTrue(timeout.getMessage().startsWith("waited 1 s for 3 notification(s) matching token=" + device + ": 1 arrived"), timeout.getMessage());
        admin.reset();
        assertEquals(0L, ((Number) admin.clock().get("offsetSeconds")).longValue());
    }

    @Test
    void eventsStreamTheRecordsAsTheyArrive() throws Exception {
        HttpClient client = http2Trusting(apns.caFile());
        String device = "c3".repeat(32);
        try (AdminClient.EventStream events = apns.admin().events(Query.ofToken(device))) {
            assertEquals(200, push(client, apns.apnsUrl(), apns.providerToken(), device, apns.topic(), "{\"aps\":{\"alert\":\"live\"}}").statusCode());
            Notification record = CompletableFuture.supplyAsync(() -> {
                while (events.hasNext()) {
                    AdminClient.Event event = events.next();
                    if (event.notification() != null) {
                        return event.notification();
                    }
                }
                return null;
            }).get(10, TimeUnit.SECONDS);
            assertEquals("live", record.get("payload", "aps", "alert"));
        }
    }
}
