package io.apnsmock;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.apnsmock.junit5.ApnsMockExtension;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;

/**
 * What teams are for: tests that run at the same time on one container (with JUnit's parallel
 * execution enabled, e.g. {@code build.sh test --config junit.jupiter.execution.parallel.enabled=true};
 * one after the other otherwise), each with a team of its own, each seeing exactly its own pushes
 * to a device they all push to.
 */
@Tag("container")
@Execution(ExecutionMode.CONCURRENT)
class TeamsParallelTest {
    @RegisterExtension
    static ApnsMockExtension apns = new ApnsMockExtension();

    @RepeatedTest(4)
    void eachTestSeesItsOwnPushes(ApnsMockTeam team) throws Exception {
        String device = "a3".repeat(32);
        var client = ContainerPushTest.http2Trusting(apns.caFile());
        for (int i = 0; i < 3; i++) {
            HttpResponse<String> answer = ContainerPushTest.push(client, apns.apnsUrl(), team.providerToken(), device, team.topic(),
                    "{\"aps\":{\"alert\":\"" + team.teamId() + "\"}}");
            assertEquals(200, answer.statusCode(), answer.body());
        }
        team.admin().waitFor(Query.any(), 3, Duration.ofSeconds(10));
        List<Notification> records = team.admin().notifications(Query.any().outcome("all")).notifications;
        assertEquals(3, records.size(), records.toString());
        for (Notification record : records) {
            assertEquals(team.teamId(), record.get("auth", "teamId"));
            assertEquals(team.teamId(), record.get("payload", "aps", "alert"));
        }
    }
}
