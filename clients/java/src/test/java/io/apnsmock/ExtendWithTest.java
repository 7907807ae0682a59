package io.apnsmock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.apnsmock.junit5.ApnsMockExtension;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The extension declared with @ExtendWith: the container and its admin client as parameters. */
@Tag("container")
@ExtendWith(ApnsMockExtension.class)
class ExtendWithTest {
    @Test
    void parametersAreTheRunningContainerAndItsAdminClient(ApnsMockContainer mock, AdminClient admin) throws Exception {
        assertTrue(mock.isRunning());
        assertSame(mock.admin(), admin);
        assertTrue(mock.apnsUrl().startsWith("https://127.0.0.1:"), mock.apnsUrl());
        assertTrue(mock.keyPem().contains("BEGIN PRIVATE KEY"));
        String device = "e0".repeat(32);
        assertEquals(200, ContainerPushTest.push(ContainerPushTest.http2Trusting(mock.caFile()), mock.apnsUrl(),
                mock.providerToken(), device, mock.topic(), "{\"aps\":{\"alert\":\"declared\"}}").statusCode());
        assertEquals("declared", admin.waitFor(Query.ofToken(device), 1, Duration.ofSeconds(5)).get(0).get("payload", "aps", "alert"));
        assertEquals("ok", admin.health().get("status"));
    }
}
