package io.apnsmock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.KeyFactory;
import java.security.PublicKey;
import java.security.Signature;
import java.security.spec.X509EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** What the team API sends, against a stand-in server (no engine): the header, the body, the deletion. */
class TeamsOfflineTest {
    static void answer(HttpExchange exchange, int status, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        exchange.sendResponseHeaders(status, status == 204 ? -1 : bytes.length);
        if (status != 204) {
            exchange.getResponseBody().write(bytes);
        }
        exchange.close();
    }

    @Test
    void scopedCallsTeamBodyAndDeletion() throws Exception {
        List<String> seen = Collections.synchronizedList(new ArrayList<>());
        AtomicReference<Map<String, Object>> created = new AtomicReference<>();
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/", exchange -> {
            String method = exchange.getRequestMethod();
            String path = exchange.getRequestURI().getPath();
            seen.add(method + " " + path + " team=" + exchange.getRequestHeaders().getFirst("APNS-Mock-Team"));
            if (method.equals("POST") && path.equals("/v1/teams")) {
                created.set(Json.parseObject(new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8)));
                answer(exchange, 201, "{\"teamId\":\"" + created.get().get("teamId") + "\",\"apps\":[],\"keys\":[],\"devices\":{\"policy\":null,\"count\":0},\"source\":\"api\"}");
            } else if (method.equals("DELETE")) {
                answer(exchange, seen.stream().filter(s -> s.startsWith("DELETE")).count() == 1 ? 204 : 404, "{\"error\":\"team: gone\"}");
            } else {
                answer(exchange, 200, "{\"teams\":[],\"offsetSeconds\":0}");
            }
        });
        server.start();
        try {
            AdminClient admin = new AdminClient("http://127.0.0.1:" + server.getAddress().getPort());
            assertNull(admin.team());
            AdminClient scoped = admin.forTeam("TEAM000001");
            assertEquals("TEAM000001", scoped.team());
            assertNull(scoped.forTeam(null).team());
            scoped.clock();
            admin.clock();
            assertEquals(List.of("GET /v1/clock team=TEAM000001", "GET /v1/clock team=null"), seen);
            seen.clear();

            ApnsMockTeam team = ApnsMockTeam.create(scoped, "com.example.one", "com.example.two");
            assertEquals(List.of("POST /v1/teams team=null"), seen, "created through the unscoped client");
            assertEquals(team.teamId(), created.get().get("teamId"));
            assertEquals(List.of("com.example.one", "com.example.two"), created.get().get("apps"));
            assertEquals(team.keyId(), Json.at(created.get(), "keys", 0, "keyId"));
            String publicPem = (String) Json.at(created.get(), "keys", 0, "pem");
            assertEquals(team.publicKeyPem(), publicPem);
            assertTrue(publicPem.startsWith("-----BEGIN PUBLIC KEY-----\n") && publicPem.endsWith("\n-----END PUBLIC KEY-----\n"), publicPem);
            assertTrue(team.privateKeyPem().startsWith("-----BEGIN PRIVATE KEY-----\n"), team.privateKeyPem());
            assertEquals("api", team.view().get("source"));
            assertEquals("com.example.one", team.topic());
            assertEquals(team.teamId(), team.admin().team());

            // Its tokens verify with the public key the mock was given.
            String jwt = team.providerToken();
            assertSame(jwt, team.providerToken(), "kept, as a provider keeps its token");
            String[] parts = jwt.split("\\.");
            assertTrue(new String(Base64.getUrlDecoder().decode(parts[1]), StandardCharsets.UTF_8).contains("\"iss\":\"" + team.teamId() + "\""));
            PublicKey key = KeyFactory.getInstance("EC").generatePublic(new X509EncodedKeySpec(Base64.getMimeDecoder().decode(
                    publicPem.replace("-----BEGIN PUBLIC KEY-----", "").replace("-----END PUBLIC KEY-----", ""))));
            Signature verifier = Signature.getInstance("SHA256withECDSA");
            verifier.initVerify(key);
            verifier.update((parts[0] + "." + parts[1]).getBytes(StandardCharsets.US_ASCII));
            assertTrue(verifier.verify(ProviderToken.joseToDer(Base64.getUrlDecoder().decode(parts[2]))));

            seen.clear();
            team.close();
            team.close();
            assertEquals(List.of("DELETE /v1/teams/" + team.teamId() + " team=null"), seen, "deleted once");
            ApnsMockTeam.create(admin).close(); // the stand-in answers 404 now: no error
            assertTrue(ApnsMockTeam.randomId().matches("[A-Z0-9]{10}"));
        } finally {
            server.stop(0);
        }
    }
}
