package io.apnsmock;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.SecureRandom;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * A team of the mock made for one test (or one test worker): a random team ID, a fresh P-256 key
 * with a random key ID, apps of its own, and an admin client scoped to it, so that tests running
 * at the same time on one mock each see only their own pushes, faults, devices and clock.
 * {@link #close()} deletes it (its tokens are refused from then on).
 *
 * <pre>{@code
 * try (ApnsMockTeam team = ApnsMockTeam.create(admin, "com.example.worker1")) {
 *     // push to the mock with "bearer " + team.providerToken() and apns-topic team.topic()
 *     team.admin().waitFor(Query.ofToken(device), 1, Duration.ofSeconds(5));
 * }
 * }</pre>
 *
 * Only the public key is sent to the mock; the private one stays here ({@link #privateKeyPem()},
 * PKCS #8 as Apple's .p8 files are) to sign provider tokens.
 */
public final class ApnsMockTeam implements AutoCloseable {
    private static final String ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    private static final SecureRandom RANDOM = new SecureRandom();

    private final AdminClient mock;
    private final AdminClient admin;
    private final String teamId;
    private final String keyId;
    private final String privateKeyPem;
    private final String publicKeyPem;
    private final List<String> apps;
    private final Map<String, Object> view;
    private String token;
    private Instant tokenIssuedAt;
    private boolean closed;

    private ApnsMockTeam(AdminClient mock, String teamId, String keyId, String privateKeyPem, String publicKeyPem,
                         List<String> apps, Map<String, Object> view) {
        this.mock = mock;
        this.admin = mock.forTeam(teamId);
        this.teamId = teamId;
        this.keyId = keyId;
        this.privateKeyPem = privateKeyPem;
        this.publicKeyPem = publicKeyPem;
        this.apps = apps;
        this.view = view;
    }

    /**
     * Adds a team ({@code POST /v1/teams}) with a random team ID, a fresh P-256 key (environment
     * {@code any}, every app of the team) and {@code apps}: bundle IDs no other team has; none
     * given: one made from the team ID, {@code com.example.t<team ID in lowercase>}.
     * {@code admin} may be scoped or not: the team is created through its unscoped twin.
     */
    public static ApnsMockTeam create(AdminClient admin, String... apps) {
        AdminClient mock = admin.forTeam(null);
        String teamId = randomId();
        String keyId = randomId();
        List<String> teamApps = apps.length == 0 ? List.of("com.example.t" + teamId.toLowerCase(Locale.ROOT)) : List.of(apps);
        KeyPair pair;
        try {
            KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
            generator.initialize(new ECGenParameterSpec("secp256r1"));
            pair = generator.generateKeyPair();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("this JDK cannot make a P-256 key: " + e.getMessage(), e);
        }
        String privatePem = pem("PRIVATE KEY", pair.getPrivate().getEncoded()); // PKCS #8
        String publicPem = pem("PUBLIC KEY", pair.getPublic().getEncoded()); // X.509 SubjectPublicKeyInfo
        Map<String, Object> view = mock.createTeam(teamId, teamApps, keyId, publicPem);
        return new ApnsMockTeam(mock, teamId, keyId, privatePem, publicPem, teamApps, view);
    }

    /** A random ID of Apple's form, 10 uppercase letters and digits: a team ID or a key ID. */
    public static String randomId() {
        StringBuilder id = new StringBuilder(10);
        for (int i = 0; i < 10; i++) {
            id.append(ALPHABET.charAt(RANDOM.nextInt(ALPHABET.length())));
        }
        return id.toString();
    }

    private static String pem(String type, byte[] der) {
        String base64 = Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII)).encodeToString(der);
        return "-----BEGIN " + type + "-----\n" + base64 + "\n-----END " + type + "-----\n";
    }

    public String teamId() {
        return teamId;
    }

    public String keyId() {
        return keyId;
    }

    /** The team's private key, PKCS #8 PEM ({@code -----BEGIN PRIVATE KEY-----}), as a .p8 file holds it. */
    public String privateKeyPem() {
        return privateKeyPem;
    }

    /** Its public key ({@code -----BEGIN PUBLIC KEY-----}): what the mock was given. */
    public String publicKeyPem() {
        return publicKeyPem;
    }

    public List<String> apps() {
        return apps;
    }

    /** The team's first app: a topic its key may push to. */
    public String topic() {
        return apps.get(0);
    }

    /** The admin client scoped to this team (its records, stats, devices, faults, channels, clock, reset). */
    public AdminClient admin() {
        return admin;
    }

    /** The team as the mock answered its creation ({@code teamId}, {@code apps}, {@code keys}, {@code devices}, {@code source}). */
    public Map<String, Object> view() {
        return view;
    }

    /**
     * A provider token (ES256 JWT) of this team's key: the same one for 30 minutes, as a provider
     * keeps its token (APNs refuses one renewed too often).
     */
    public synchronized String providerToken() {
        if (token == null || Duration.between(tokenIssuedAt, Instant.now()).toMinutes() >= 30) {
            tokenIssuedAt = Instant.now();
            token = ProviderToken.sign(privateKeyPem, teamId, keyId, tokenIssuedAt);
        }
        return token;
    }

    /** A new provider token of this team's key, issued at {@code issuedAt}. */
    public String providerToken(Instant issuedAt) {
        return ProviderToken.sign(privateKeyPem, teamId, keyId, issuedAt);
    }

    /**
     * Deletes the team ({@code DELETE /v1/teams/{teamId}}); once deleted, later calls do nothing,
     * and a team already gone (404) is no error.
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        try {
            mock.deleteTeam(teamId);
        } catch (AdminException e) {
            if (e.status() != 404) {
                throw e;
            }
        }
        closed = true;
    }

    @Override
    public String toString() {
        return "ApnsMockTeam " + teamId + " (key " + keyId + ", apps " + apps + ")";
    }
}
