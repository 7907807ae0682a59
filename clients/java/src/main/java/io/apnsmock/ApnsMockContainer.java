package io.apnsmock;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * apns-mock's image as a test container, in the manner of Testcontainers, with the JDK only: it
 * speaks the Docker-compatible API of the engine {@link Engine#find()} finds (Docker, or podman's
 * socket; no Ryuk, no registry), starts the image with its ports mapped to free ones, waits until
 * {@code GET /v1/health} answers 200, and removes the container on {@link #stop()} (or when the
 * JVM exits).
 *
 * <pre>{@code
 * try (ApnsMockContainer mock = new ApnsMockContainer("apns-mock:local").start()) {
 *     // push to mock.apnsUrl(), trusting mock.caFile(), with "bearer " + mock.providerToken()
 *     mock.admin().waitFor(Query.ofToken(device), 1, Duration.ofSeconds(5));
 * }
 * }</pre>
 *
 * Without configuration the mock knows the demo team {@code DEMOTEAM01}, key {@code DEMOKEY001}
 * (made at its start; {@link #keyPem()} reads it out of the container) and the app
 * {@code com.example.app}; {@link #withTeam}, {@link #withKey}, {@link #withTopics} and the
 * other {@code with…} methods configure it through its {@code APNS_MOCK_*} variables.
 */
public class ApnsMockContainer implements AutoCloseable {
    public static final String DEFAULT_IMAGE = "apns-mock:local";
    public static final int APNS_PORT = 2197;
    public static final int ADMIN_PORT = 2198;
    public static final int BROADCAST_SANDBOX_PORT = 2195;
    public static final int BROADCAST_PRODUCTION_PORT = 2196;
    public static final String DEMO_TEAM_ID = "DEMOTEAM01";
    public static final String DEMO_KEY_ID = "DEMOKEY001";
    public static final String DEMO_TOPIC = "com.example.app";
    static final String CERTS = "/var/lib/apns-mock/certs";
    private static final Duration API_TIMEOUT = Duration.ofSeconds(30);

    private final String image;
    private final Map<String, String> environment = new LinkedHashMap<>();
    private String teamId = DEMO_TEAM_ID;
    private String keyId = DEMO_KEY_ID;
    private String keyPem;
    private List<String> topics = List.of(DEMO_TOPIC);
    private String adminToken;
    private Duration startupTimeout = Duration.ofSeconds(60);

    private Engine engine;
    private String containerId;
    private final Map<Integer, Integer> mappedPorts = new LinkedHashMap<>();
    private Thread shutdownHook;
    private Path caDirectory;
    private String token;
    private Instant tokenIssuedAt;
    private AdminClient admin;

    /** The image {@code apns-mock:local} ({@code scripts/image} builds it), or {@code APNS_MOCK_IMAGE} when that is set. */
    public ApnsMockContainer() {
        this(System.getenv().getOrDefault("APNS_MOCK_IMAGE", DEFAULT_IMAGE));
    }

    public ApnsMockContainer(String image) {
        this.image = image;
        // Tests reach the mock through the mapped 2197; the image's 443 needs a sysctl on podman.
        environment.put("APNS_MOCK_ADDITIONAL_PORTS", "none");
    }

    // Configuration (before start)

    /** The team whose key signs provider tokens ({@code APNS_MOCK_TEAM_ID}). */
    public ApnsMockContainer withTeam(String teamId) {
        this.teamId = teamId;
        environment.put("APNS_MOCK_TEAM_ID", teamId);
        return this;
    }

    /** The team's key: its id and its .p8 PEM ({@code APNS_MOCK_KEY_ID}, {@code APNS_MOCK_KEY_PEM}). */
    public ApnsMockContainer withKey(String keyId, String keyPem) {
        this.keyId = keyId;
        this.keyPem = keyPem;
        environment.put("APNS_MOCK_KEY_ID", keyId);
        environment.put("APNS_MOCK_KEY_PEM", keyPem);
        return this;
    }

    /** The team's apps ({@code APNS_MOCK_TOPICS}); the first is {@link #topic()}. */
    public ApnsMockContainer withTopics(String... topics) {
        this.topics = List.of(topics);
        environment.put("APNS_MOCK_TOPICS", String.join(",", topics));
        return this;
    }

    /** {@code sandbox} or {@code production}: the environment of hosts that name none. */
    public ApnsMockContainer withEnvironment(String environment) {
        this.environment.put("APNS_MOCK_ENVIRONMENT", environment);
        return this;
    }

    /** The admin API then needs {@code Authorization: Bearer <token>}; {@link #admin()} sends it. */
    public ApnsMockContainer withAdminToken(String adminToken) {
        this.adminToken = adminToken;
        environment.put("APNS_MOCK_ADMIN_TOKEN", adminToken);
        return this;
    }

    /** Any other {@code APNS_MOCK_*} variable (the project's docs/configuration.md lists them). */
    public ApnsMockContainer withEnv(String name, String value) {
        environment.put(name, value);
        return this;
    }

    public ApnsMockContainer withStartupTimeout(Duration startupTimeout) {
        this.startupTimeout = startupTimeout;
        return this;
    }

    // Lifecycle

    /** Starts the container and waits until it is healthy; returns this. */
    public synchronized ApnsMockContainer start() {
        if (containerId != null) {
            return this;
        }
        engine = Engine.find();
        ensureImage();
        Map<String, Object> exposed = new LinkedHashMap<>();
        Map<String, Object> bindings = new LinkedHashMap<>();
        for (int port : new int[] {APNS_PORT, ADMIN_PORT, BROADCAST_SANDBOX_PORT, BROADCAST_PRODUCTION_PORT}) {
            exposed.put(port + "/tcp", Map.of());
            Map<String, Object> binding = new LinkedHashMap<>();
            binding.put("HostIp", engine.isLocal() ? "127.0.0.1" : "");
            binding.put("HostPort", "");
            bindings.put(port + "/tcp", List.of(binding));
        }
        List<String> env = new ArrayList<>();
        environment.forEach((name, value) -> env.add(name + "=" + value));
        Map<String, Object> create = new LinkedHashMap<>();
        create.put("Image", image);
        create.put("Env", env);
        create.put("ExposedPorts", exposed);
        create.put("Labels", Map.of("apns-mock.test-container", "true"));
        create.put("HostConfig", Map.of("PortBindings", bindings));
        Engine.Response created = engine.call("POST", "/containers/create", create, API_TIMEOUT, 201);
        containerId = (String) Json.parseObject(created.text()).get("Id");
        shutdownHook = new Thread(this::remove, "apns-mock-container-removal");
        Runtime.getRuntime().addShutdownHook(shutdownHook);
        try {
            engine.call("POST", "/containers/" + containerId + "/start", null, API_TIMEOUT, 204, 304);
            readPorts();
            waitUntilHealthy();
        } catch (RuntimeException | Error e) {
            stop();
            throw e;
        }
        return this;
    }

    /** Removes the container (and the CA file). */
    public synchronized void stop() {
        if (shutdownHook != null) {
            try {
                Runtime.getRuntime().removeShutdownHook(shutdownHook);
            } catch (IllegalStateException shuttingDown) {
                // the hook runs anyway
            }
            shutdownHook = null;
        }
        remove();
        containerId = null;
        mappedPorts.clear();
        admin = null;
        token = null;
    }

    @Override
    public void close() {
        stop();
    }

    public boolean isRunning() {
        return containerId != null;
    }

    // Where it is

    public String containerId() {
        return requireStarted();
    }

    /** The host the mapped ports are reached on (127.0.0.1 for a local engine). */
    public String host() {
        requireStarted();
        return engine.host();
    }

    /** The host port mapped to the container's {@code port} (2197, 2198, 2195, 2196). */
    public int mappedPort(int port) {
        requireStarted();
        Integer mapped = mappedPorts.get(port);
        if (mapped == null) {
            throw new IllegalArgumentException("port " + port + " is not mapped (2197, 2198, 2195, 2196 are)");
        }
        return mapped;
    }

    public int apnsPort() {
        return mappedPort(APNS_PORT);
    }

    /** {@code https://<host>:<port>}: device pushes ({@code /3/device/<token>}) and broadcasts. */
    public String apnsUrl() {
        return "https://" + host() + ":" + apnsPort();
    }

    /** {@code http://<host>:<port>}: the admin and query API and the inbox page. */
    public String adminUrl() {
        return "http://" + host() + ":" + mappedPort(ADMIN_PORT);
    }

    /** Channel management ({@code sandbox} or {@code production}). */
    public String channelManagementUrl(String environment) {
        return "https://" + host() + ":" + mappedPort("production".equals(environment) ? BROADCAST_PRODUCTION_PORT : BROADCAST_SANDBOX_PORT);
    }

    public String teamId() { return teamId; }
    public String keyId() { return keyId; }
    /** The first app of the team: a topic the mock accepts. */
    public String topic() { return topics.get(0); }
    public List<String> topics() { return topics; }
    public String adminToken() { return adminToken; }
    public String image() { return image; }

    // What a client needs

    /** The admin API's client (sends the admin token when one is set). */
    public synchronized AdminClient admin() {
        requireStarted();
        if (admin == null) {
            admin = new AdminClient(adminUrl(), adminToken, Duration.ofSeconds(10));
        }
        return admin;
    }

    /**
     * A team of its own for one test ({@link ApnsMockTeam#create}): a random team ID, a fresh
     * P-256 key, {@code apps} (none: one made from the team ID) and an admin client scoped to it;
     * close it to delete it.
     */
    public ApnsMockTeam newTeam(String... apps) {
        return ApnsMockTeam.create(admin(), apps);
    }

    /** The CA certificate (PEM) the TLS listeners are issued under ({@code GET /v1/ca.pem}). */
    public String caPem() {
        return admin().caPem();
    }

    /** A file holding {@link #caPem()}, kept until the container stops. */
    public synchronized Path caFile() {
        requireStarted();
        try {
            if (caDirectory == null) {
                caDirectory = Files.createTempDirectory("apns-mock-ca-");
            }
            Path file = caDirectory.resolve("ca.pem");
            if (!Files.exists(file)) {
                Files.writeString(file, caPem());
            }
            return file;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The provider key (PKCS #8 PEM) the mock verifies tokens with: the one given, or the demo key it made. */
    public synchronized String keyPem() {
        if (keyPem != null) {
            return keyPem;
        }
        requireStarted();
        keyPem = new String(readFile(CERTS + "/AuthKey_" + keyId + ".p8"), StandardCharsets.UTF_8);
        return keyPem;
    }

    /**
     * A provider token (ES256 JWT) the mock accepts, for {@link #teamId()}'s {@link #keyId()}: the
     * same one for 30 minutes, as a provider keeps its token (APNs refuses one renewed too often).
     */
    public synchronized String providerToken() {
        if (token == null || Duration.between(tokenIssuedAt, Instant.now()).toMinutes() >= 30) {
            tokenIssuedAt = Instant.now();
            token = ProviderToken.sign(keyPem(), teamId, keyId, tokenIssuedAt);
        }
        return token;
    }

    /** A file of the container, read through the engine's archive endpoint. */
    public byte[] readFile(String path) {
        Engine.Response archive = engine.call("GET", "/containers/" + requireStarted() + "/archive?path=" + encode(path), null, API_TIMEOUT, 200);
        return firstFileOfTar(archive.body, path);
    }

    /** The container's output so far (the last 200 lines). */
    public String logs() {
        Engine.Response logs = engine.call("GET", "/containers/" + requireStarted() + "/logs?stdout=true&stderr=true&tail=200", null, API_TIMEOUT, 200);
        return demultiplex(logs.body);
    }

    // Helpers

    private void ensureImage() {
        String path = "/images/" + image + "/json";
        try {
            if (engine.request("GET", path, null, API_TIMEOUT).status == 200) {
                return;
            }
            Engine.Response pulled = engine.request("POST", "/images/create?fromImage=" + encode(image), null, Duration.ofMinutes(3));
            if (pulled.status == 200 && engine.request("GET", path, null, API_TIMEOUT).status == 200) {
                return;
            }
        } catch (IOException e) {
            throw new IllegalStateException("the engine at " + engine.dockerHost() + ": " + e.getMessage(), e);
        }
        throw new IllegalStateException("the image " + image + " is not in the engine at " + engine.dockerHost()
                + " and could not be pulled: build it (scripts/image with podman, or `docker build -t " + image + " .` in apns-mock's checkout)");
    }

    @SuppressWarnings("unchecked")
    private void readPorts() {
        Map<String, Object> inspect = Json.parseObject(engine.call("GET", "/containers/" + containerId + "/json", null, API_TIMEOUT, 200).text());
        Map<String, Object> ports = (Map<String, Object>) Json.at(inspect, "NetworkSettings", "Ports");
        for (int port : new int[] {APNS_PORT, ADMIN_PORT, BROADCAST_SANDBOX_PORT, BROADCAST_PRODUCTION_PORT}) {
            Object hostPort = ports == null ? null : Json.at(ports.get(port + "/tcp"), 0, "HostPort");
            if (hostPort == null || hostPort.toString().isEmpty()) {
                throw new IllegalStateException("the engine mapped no host port to " + port + "/tcp: " + Json.write(ports));
            }
            mappedPorts.put(port, Integer.parseInt(hostPort.toString()));
        }
    }

    private void waitUntilHealthy() {
        HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(2)).build();
        Instant deadline = Instant.now().plus(startupTimeout);
        String last = "no answer yet";
        while (Instant.now().isBefore(deadline)) {
            Map<String, Object> inspect = Json.parseObject(engine.call("GET", "/containers/" + containerId + "/json", null, API_TIMEOUT, 200).text());
            Object status = Json.at(inspect, "State", "Status");
            if ("exited".equals(status) || "dead".equals(status)) {
                throw new IllegalStateException("apns-mock exited before it was healthy (" + image + "):\n" + logs());
            }
            try {
                HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(adminUrl() + "/v1/health")).timeout(Duration.ofSeconds(2));
                if (adminToken != null) {
                    request.header("Authorization", "Bearer " + adminToken);
                }
                HttpResponse<String> response = http.send(request.build(), HttpResponse.BodyHandlers.ofString());
                if (response.statusCode() == 200) {
                    return;
                }
                last = response.statusCode() + " " + response.body();
            } catch (IOException e) {
                last = e.toString();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for apns-mock", e);
            }
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for apns-mock", e);
            }
        }
        throw new IllegalStateException("apns-mock not healthy after " + startupTimeout.toSeconds() + " s (" + last + "):\n" + logs());
    }

    private synchronized void remove() {
        if (containerId != null && engine != null) {
            try {
                engine.request("DELETE", "/containers/" + containerId + "?force=true&v=true", null, API_TIMEOUT);
            } catch (IOException ignored) {
                // the engine is gone: nothing to remove it from
            }
        }
        if (caDirectory != null) {
            try {
                Files.deleteIfExists(caDirectory.resolve("ca.pem"));
                Files.deleteIfExists(caDirectory);
            } catch (IOException ignored) {
                // a temporary file
            }
            caDirectory = null;
        }
    }

    private String requireStarted() {
        if (containerId == null) {
            throw new IllegalStateException("the container is not started: call start() first");
        }
        return containerId;
    }

    private static String encode(String value) {
        return java.net.URLEncoder.encode(value, StandardCharsets.UTF_8);
    }

    /** The first regular file of a tar archive (pax and GNU headers skipped). */
    static byte[] firstFileOfTar(byte[] tar, String what) {
        int at = 0;
        while (at + 512 <= tar.length) {
            if (tar[at] == 0) {
                break;
            }
            String sizeField = new String(tar, at + 124, 12, StandardCharsets.US_ASCII).replace("\0", "").trim();
            long size = sizeField.isEmpty() ? 0 : Long.parseLong(sizeField, 8);
            byte type = tar[at + 156];
            int data = at + 512;
            if (type == '0' || type == 0) {
                byte[] file = new byte[(int) size];
                System.arraycopy(tar, data, file, 0, (int) size);
                return file;
            }
            at = data + (int) ((size + 511) / 512 * 512);
        }
        throw new IllegalStateException("no file " + what + " in the container's archive");
    }

    /** The engine's log stream: frames of 8-byte headers when the container has no TTY. */
    static String demultiplex(byte[] raw) {
        if (raw.length < 8 || raw[0] > 2 || raw[1] != 0 || raw[2] != 0 || raw[3] != 0) {
            return new String(raw, StandardCharsets.UTF_8);
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int at = 0;
        while (at + 8 <= raw.length) {
            int size = ((raw[at + 4] & 0xff) << 24) | ((raw[at + 5] & 0xff) << 16) | ((raw[at + 6] & 0xff) << 8) | (raw[at + 7] & 0xff);
            int length = Math.min(size, raw.length - at - 8);
            out.write(raw, at + 8, length);
            at += 8 + size;
        }
        return out.toString(StandardCharsets.UTF_8);
    }
}
