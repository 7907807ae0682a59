package io.apnsmock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.Signature;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What needs no container engine: JSON, provider tokens, and how the engine is looked for. */
class OfflineTest {
    @Test
    void jsonRoundTrip() {
        String text = "{\"a\":[1,2.5,-3e2,true,false,null],\"b\":{\"c\":\"\\u00e9\\n\\\"x\\\"\"},\"n\":12345678901234}";
        Object value = Json.parse(text);
        assertEquals("é\n\"x\"", Json.at(value, "b", "c"));
        assertEquals(2.5, Json.at(value, "a", 1));
        assertEquals(12345678901234L, Json.at(value, "n"));
        assertEquals(Json.write(value), Json.write(Json.parse(Json.write(value))));
        assertThrows(IllegalArgumentException.class, () -> Json.parse("{\"a\":}"));
        assertThrows(IllegalArgumentException.class, () -> Json.parse("[1] 2"));
    }

    @Test
    void providerTokenVerifiesWithThePublicKey() throws Exception {
        KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
        generator.initialize(new ECGenParameterSpec("secp256r1"));
        for (int i = 0; i < 20; i++) { // r or s with a leading zero byte now and then
            KeyPair pair = generator.generateKeyPair();
            String pem = "-----BEGIN PRIVATE KEY-----\n"
                    + Base64.getMimeEncoder().encodeToString(pair.getPrivate().getEncoded()) + "\n-----END PRIVATE KEY-----\n";
            String jwt = ProviderToken.sign(pem, "TEAM123456", "KEY1234567", Instant.ofEpochSecond(1700000000));
            String[] parts = jwt.split("\\.");
            assertEquals(3, parts.length);
            Map<String, Object> header = Json.parseObject(new String(Base64.getUrlDecoder().decode(parts[0]), StandardCharsets.UTF_8));
            Map<String, Object> claims = Json.parseObject(new String(Base64.getUrlDecoder().decode(parts[1]), StandardCharsets.UTF_8));
            assertEquals(Map.of("alg", "ES256", "kid", "KEY1234567"), header);
            assertEquals(Map.of("iss", "TEAM123456", "iat", 1700000000L), claims);
            byte[] jose = Base64.getUrlDecoder().decode(parts[2]);
            assertEquals(64, jose.length);
            Signature verifier = Signature.getInstance("SHA256withECDSA");
            verifier.initVerify(pair.getPublic());
            verifier.update((parts[0] + "." + parts[1]).getBytes(StandardCharsets.US_ASCII));
            assertTrue(verifier.verify(ProviderToken.joseToDer(jose)));
        }
    }

    @Test
    void noEngineFailsInSecondsWithOneLine(@TempDir Path directory) throws Exception {
        Path silent = directory.resolve("silent.sock");
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(silent)); // accepts, never answers
            List<String> sockets = List.of(directory + "/docker.sock", silent.toString(), directory + "/xdg/podman/podman.sock");
            long started = System.nanoTime();
            EngineNotFoundException error = assertThrows(EngineNotFoundException.class,
                    () -> Engine.find(Map.of(), sockets, Duration.ofSeconds(2)));
            double seconds = (System.nanoTime() - started) / 1e9;
            assertTrue(seconds < 5, "took " + seconds + " s");
            String message = error.getMessage();
            assertFalse(message.contains("\n"), message);
            assertTrue(message.contains(directory + "/docker.sock (absent)"), message);
            assertTrue(message.contains(silent + " (no answer in 2 s)"), message);
            assertTrue(message.contains("set DOCKER_HOST"), message);
        }
    }

    @Test
    void dockerHostThatDoesNotAnswerIsNamed(@TempDir Path directory) {
        String host = "unix://" + directory + "/gone.sock";
        EngineNotFoundException error = assertThrows(EngineNotFoundException.class,
                () -> Engine.find(Map.of("DOCKER_HOST", host), List.of(), Duration.ofSeconds(2)));
        assertTrue(error.getMessage().startsWith("DOCKER_HOST=" + host + " does not answer ("), error.getMessage());
    }

    @Test
    void tarAndLogFrames() throws Exception {
        byte[] tar = new byte[2048];
        byte[] name = "AuthKey.p8".getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(name, 0, tar, 0, name.length);
        byte[] size = "00000000005\0".getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(size, 0, tar, 124, size.length);
        tar[156] = '0';
        System.arraycopy("hello".getBytes(StandardCharsets.US_ASCII), 0, tar, 512, 5);
        assertEquals("hello", new String(ApnsMockContainer.firstFileOfTar(tar, "x"), StandardCharsets.US_ASCII));
        byte[] frames = {1, 0, 0, 0, 0, 0, 0, 3, 'a', 'b', '\n', 2, 0, 0, 0, 0, 0, 0, 2, 'c', '\n'};
        assertEquals("ab\nc\n", ApnsMockContainer.demultiplex(frames));
        assertTrue(Files.notExists(Path.of("/nonexistent-apns-mock")));
    }
}
