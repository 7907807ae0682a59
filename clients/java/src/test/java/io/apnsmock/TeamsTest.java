package io.apnsmock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.apnsmock.junit5.ApnsMockExtension;
import io.apnsmock.junit5.TeamApps;
import java.net.http.HttpClient;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Teams on apns-mock's container: two teams see only their own pushes and faults, a deleted
 * team's tokens are refused, and the extension's per-test team is made and deleted around a test.
 * Each team pushes over an HTTP/2 client of its own: a connection is bound to the key of its
 * first token.
 */
@Tag("container")
class TeamsTest {
    @RegisterExtension
    static ApnsMockExtension apns = new ApnsMockExtension();

    static final String ALERT = "{\"aps\":{\"alert\":\"team\"}}";

    @Test
    void twoTeamsOnOneMock() throws Exception {
        try (ApnsMockTeam a = apns.newTeam(); ApnsMockTeam b = apns.newTeam("com.example.java.teamb")) {
            assertTrue(a.teamId().matches("[A-Z0-9]{10}") && a.keyId().matches("[A-Z0-9]{10}"), a.toString());
            assertNotEquals(a.teamId(), b.teamId());
            assertEquals(a.teamId(), a.admin().team());
            assertEquals("com.example.t" + a.teamId().toLowerCase(), a.topic());
            assertEquals("api", a.view().get("source"));
            List<String> listed = apns.admin().teams().stream().map(t -> t.get("teamId") + ":" + t.get("source")).collect(Collectors.toList());
            assertEquals(ApnsMockContainer.DEMO_TEAM_ID + ":configuration", listed.get(0), listed.toString());
            assertTrue(listed.containsAll(List.of(a.teamId() + ":api", b.teamId() + ":api")), listed.toString());

            // B's fault takes every alert of B's, none of A's.
            b.admin().addFault(Map.of("match", Map.of("pushType", "alert"), "respond", Map.of("reason", "BadDeviceToken")));
            assertEquals(0, a.admin().faults().size());
            HttpClient clientA = ContainerPushTest.http2Trusting(apns.caFile());
            HttpClient clientB = ContainerPushTest.http2Trusting(apns.caFile());
            String device = "a1".repeat(32);
            HttpResponse<String> answerA = ContainerPushTest.push(clientA, apns.apnsUrl(), a.providerToken(), device, a.topic(), ALERT);
            assertEquals(200, answerA.statusCode(), answerA.body());
            HttpResponse<String> answerB = ContainerPushTest.push(clientB, apns.apnsUrl(), b.providerToken(), device, b.topic(), ALERT);
            assertEquals(400, answerB.statusCode(), answerB.body());
            assertEquals("BadDeviceToken", Json.parseObject(answerB.body()).get("reason"));

            Notification record = a.admin().waitFor(Query.ofToken(device), 1, Duration.ofSeconds(5)).get(0);
            assertEquals(a.teamId(), record.get("auth", "teamId"));
            assertEquals(a.keyId(), record.get("auth", "keyId"));
            assertEquals(1, a.admin().notifications(Query.any().outcome("all")).notifications.size());
            List<Notification> ofB = b.admin().notifications(Query.any().outcome("all")).notifications;
            assertEquals(1, ofB.size());
            assertEquals("BadDeviceToken", ofB.get(0).reason());
            assertEquals(b.teamId(), ofB.get(0).get("auth", "teamId"));
            assertEquals(2, apns.admin().notifications(Query.ofToken(device).outcome("all")).notifications.size(), "unscoped: both");
            Map<String, Object> stats = a.admin().stats();
            assertEquals(a.teamId(), stats.get("team"), Json.write(stats));
            assertEquals(1L, Json.at(stats, "accepted"), Json.write(stats));

            // Deleted: its token is refused on the connection it used, and its calls are 404s.
            a.close();
            HttpResponse<String> refused = ContainerPushTest.push(clientA, apns.apnsUrl(), a.providerToken(), device, a.topic(), ALERT);
            assertEquals(403, refused.statusCode(), refused.body());
            assertEquals("InvalidProviderToken", Json.parseObject(refused.body()).get("reason"));
            AdminException gone = assertThrows(AdminException.class, () -> a.admin().stats());
            assertEquals(404, gone.status());
            assertTrue(gone.serverMessage().startsWith("team: " + a.teamId() + " is not a team of this mock"), gone.serverMessage());
            a.close(); // once deleted, nothing more
            assertEquals(404, assertThrows(AdminException.class, () -> apns.admin().deleteTeam(a.teamId())).status());
        }
    }

    @Test
    void teamErrors() {
        AdminClient admin = apns.admin();
        assertEquals(404, assertThrows(AdminException.class, () -> admin.forTeam("XYZ0000001").notifications(Query.any())).status());
        assertEquals(400, assertThrows(AdminException.class, () -> admin.forTeam("lowercase1").stats()).status());
        AdminException noApps = assertThrows(AdminException.class, () -> admin.createTeam(ApnsMockTeam.randomId(), List.of(), null, null));
        assertEquals(400, noApps.status());
        assertTrue(noApps.serverMessage().startsWith("apps:"), noApps.serverMessage());
        AdminException taken = assertThrows(AdminException.class,
                () -> admin.createTeam(ApnsMockTeam.randomId(), List.of(ApnsMockContainer.DEMO_TOPIC), null, null));
        assertEquals(409, taken.status(), "an app of the configuration's team");
        assertEquals(409, assertThrows(AdminException.class, () -> admin.deleteTeam(ApnsMockContainer.DEMO_TEAM_ID)).status());
    }

    static String parameterTeam;

    @Test
    void aTeamOfItsOwnAsAParameter(@TeamApps("com.example.java.parameter") ApnsMockTeam team) throws Exception {
        parameterTeam = team.teamId();
        assertEquals(List.of("com.example.java.parameter"), team.apps());
        String device = "a2".repeat(32);
        HttpResponse<String> answer = ContainerPushTest.push(ContainerPushTest.http2Trusting(apns.caFile()), apns.apnsUrl(),
                team.providerToken(), device, team.topic(), ALERT);
        assertEquals(200, answer.statusCode(), answer.body());
        List<Notification> records = team.admin().waitFor(Query.any(), 1, Duration.ofSeconds(5));
        assertEquals(device, records.get(0).token());
        assertEquals(team.teamId(), records.get(0).get("auth", "teamId"));
    }

    @AfterAll
    static void everyTeamWasDeleted() {
        // The container is still running: the extension stops it after this.
        List<Object> teams = apns.admin().teams().stream().map(t -> t.get("teamId")).collect(Collectors.toList());
        assertEquals(List.of(ApnsMockContainer.DEMO_TEAM_ID), teams, "the parameter's team " + parameterTeam + " must be deleted");
    }
}
