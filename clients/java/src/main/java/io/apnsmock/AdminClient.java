package io.apnsmock;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.stream.Collectors;

/**
 * A client of apns-mock's admin API (plain HTTP/1.1 and JSON), the JDK only: list and wait for
 * the records of what a service sent, make the mock misbehave (fault rules, unregistered
 * devices, the clock), and read its state (stats, devices, channels, events).
 *
 * <pre>{@code
 * AdminClient admin = new AdminClient("http://127.0.0.1:2198");
 * admin.reset();
 * // ... the code under test pushes through its usual APNs client ...
 * Notification push = admin.waitFor(Query.ofToken(device), 1, Duration.ofSeconds(5)).get(0);
 * assertEquals("Hello", push.get("payload", "aps", "alert", "title"));
 * }</pre>
 *
 * An answer outside 2xx throws {@link AdminException} with the server's message; a wait that
 * times out throws {@link WaitTimeoutError} (an AssertionError) with what did arrive.
 *
 * <p>Teams: {@link #forTeam(String)} returns a client whose calls carry the header
 * {@code APNS-Mock-Team} and so see and change only that team's records, stats, devices, faults,
 * channels and clock; {@link #createTeam}, {@link #teams()} and {@link #deleteTeam} manage the
 * teams, and {@link ApnsMockTeam#create} makes a team with a fresh key for one test.
 */
public final class AdminClient {
    public static final String DEFAULT_URL = "http://127.0.0.1:2198";
    /** The header that scopes a call to one team. */
    public static final String TEAM_HEADER = "APNS-Mock-Team";

    private final String base;
    private final String token;
    private final Duration timeout;
    private final HttpClient http;
    private final String team;

    /** The admin API at {@code url}, no admin token, 10 s per request. */
    public AdminClient(String url) {
        this(url, null, Duration.ofSeconds(10));
    }

    /** {@code token}: the mock's {@code admin.token} ({@code APNS_MOCK_ADMIN_TOKEN}), or null. */
    public AdminClient(String url, String token, Duration timeout) {
        this.base = (url == null || url.isEmpty() ? DEFAULT_URL : url).replaceAll("/+$", "");
        this.token = token;
        this.timeout = timeout;
        this.http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(timeout).build();
        this.team = null;
    }

    private AdminClient(AdminClient other, String team) {
        this.base = other.base;
        this.token = other.token;
        this.timeout = other.timeout;
        this.http = other.http;
        this.team = team;
    }

    public String url() {
        return base;
    }

    /**
     * A client of the same mock (address, admin token, timeout, connections) whose calls are
     * scoped to {@code teamId}: each sends {@code APNS-Mock-Team: <teamId>}. Null or empty: an
     * unscoped client (the whole mock). This client is unchanged.
     */
    public AdminClient forTeam(String teamId) {
        return new AdminClient(this, teamId == null || teamId.isEmpty() ? null : teamId);
    }

    /** The team the calls are scoped to, or null (the whole mock). */
    public String team() {
        return team;
    }

    // Records

    /** One page of records. */
    public static final class Page {
        public final List<Notification> notifications;
        public final long next;
        public final boolean more;

        Page(List<Notification> notifications, long next, boolean more) {
            this.notifications = notifications;
            this.next = next;
            this.more = more;
        }
    }

    /** {@code GET /v1/notifications}: one page of records, oldest first. */
    public Page notifications(Query query) {
        Map<String, Object> body = object("GET", "/v1/notifications", query.parameters(), null);
        Object more = body.get("more");
        return new Page(records(body), ((Number) body.get("next")).longValue(), Boolean.TRUE.equals(more));
    }

    /** Every record that matches, following {@code next} while {@code more}. */
    public List<Notification> allNotifications(Query query) {
        List<Notification> records = new ArrayList<>();
        Query current = query;
        while (true) {
            Page page = notifications(current);
            records.addAll(page.notifications);
            if (!page.more) {
                return records;
            }
            current = query.copySince(page.next);
        }
    }

    /**
     * {@code GET /v1/notifications/wait}: {@code count} matching records (records already stored
     * count; {@code since} waits for new ones only) as soon as they are there, or
     * {@link WaitTimeoutError} after {@code timeout} with what matched.
     */
    public List<Notification> waitFor(Query query, int count, Duration timeout) {
        Map<String, String> parameters = query.parameters();
        parameters.put("count", Integer.toString(count));
        double seconds = timeout.toMillis() / 1000.0;
        parameters.put("timeout", seconds == Math.rint(seconds) ? Long.toString((long) seconds) : Double.toString(seconds));
        HttpResponse<String> response = send("GET", "/v1/notifications/wait", parameters, null, timeout.plus(this.timeout), true);
        Map<String, Object> body = Json.parseObject(response.body());
        if (response.statusCode() == 408) {
            throw new WaitTimeoutError(count, records(body), timeout, query);
        }
        return records(body);
    }

    /** {@code DELETE /v1/notifications}: forgets every record ({@code seq} keeps counting). */
    public void deleteNotifications() {
        send("DELETE", "/v1/notifications", null, null);
    }

    /**
     * {@code GET /v1/events}, open once this returns (the mock has subscribed it): iterate it for
     * records and notices as they come; {@link EventStream#close()} ends it.
     */
    public EventStream events(Query query) {
        HttpRequest request = request("GET", "/v1/events", query.parameters(), null, null)
                .header("Accept", "text/event-stream").build();
        try {
            HttpResponse<InputStream> response = http.send(request, HttpResponse.BodyHandlers.ofInputStream());
            if (response.statusCode() / 100 != 2) {
                String text;
                try (InputStream body = response.body()) {
                    text = new String(body.readAllBytes(), StandardCharsets.UTF_8);
                }
                throw error(response.statusCode(), text, "GET", "/v1/events");
            }
            EventStream stream = new EventStream(response.body());
            stream.readOpening();
            return stream;
        } catch (IOException e) {
            throw new UncheckedIOException("GET " + base + "/v1/events: " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    /** {@code GET /v1/reasons}: every reason APNs sends, with its status and meaning. */
    public List<Map<String, Object>> reasons() {
        return list(object("GET", "/v1/reasons", null, null), "reasons");
    }

    // Fault rules

    /** {@code POST /v1/faults} with one rule (the admin API's "Faults"); returns it as listed, with its id. */
    public Map<String, Object> addFault(Map<String, ?> rule) {
        return object("POST", "/v1/faults", null, rule);
    }

    /** {@code POST /v1/faults} with a list: all are added, or none. */
    public List<Map<String, Object>> addFaults(List<? extends Map<String, ?>> rules) {
        return list(object("POST", "/v1/faults", null, rules), "faults");
    }

    /** {@code GET /v1/faults}: the rules, with {@code remaining} and {@code applied}. */
    public List<Map<String, Object>> faults() {
        return list(object("GET", "/v1/faults", null, null), "faults");
    }

    public void removeFault(String id) {
        send("DELETE", "/v1/faults/" + segment(id), null, null);
    }

    public void clearFaults() {
        send("DELETE", "/v1/faults", null, null);
    }

    // Devices

    /** {@code POST /v1/devices}: registers (or replaces) a device; fields as the configuration's {@code devices.tokens}. */
    public Map<String, Object> registerDevice(Map<String, ?> device) {
        return object("POST", "/v1/devices", null, device);
    }

    public Map<String, Object> registerDevice(String token, String topic, String environment) {
        Map<String, Object> device = new LinkedHashMap<>();
        device.put("token", token);
        putIfSet(device, "topic", topic);
        putIfSet(device, "environment", environment);
        return registerDevice(device);
    }

    /** {@code GET /v1/devices}: {@code {"policy": …, "devices": [...]}}. */
    public Map<String, Object> devices() {
        return object("GET", "/v1/devices", null, null);
    }

    /**
     * {@code POST /v1/devices/{token}/unregister}: from now on pushes to it get 410 with
     * {@code reason} ({@code Unregistered} when null, or {@code ExpiredToken}) and {@code timestamp}
     * (milliseconds or RFC 3339; now when null).
     */
    public Map<String, Object> unregisterDevice(String token, String reason, Object timestamp) {
        Map<String, Object> body = new LinkedHashMap<>();
        putIfSet(body, "reason", reason);
        putIfSet(body, "timestamp", timestamp);
        return object("POST", "/v1/devices/" + segment(token) + "/unregister", null, body);
    }

    public void removeDevice(String token) {
        send("DELETE", "/v1/devices/" + segment(token), null, null);
    }

    // Channels

    /** {@code GET /v1/channels}, optionally of one app ({@code bundleId}) and environment (null: all). */
    public List<Map<String, Object>> channels(String bundleId, String environment) {
        Map<String, String> parameters = new LinkedHashMap<>();
        putIfSet(parameters, "bundleId", bundleId);
        putIfSet(parameters, "environment", environment);
        return list(object("GET", "/v1/channels", parameters, null), "channels");
    }

    /** {@code POST /v1/channels}: the channel, its {@code channelId} generated. */
    public Map<String, Object> createChannel(String bundleId, String environment, Integer messageStoragePolicy) {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("bundleId", bundleId);
        putIfSet(body, "environment", environment);
        putIfSet(body, "messageStoragePolicy", messageStoragePolicy);
        return createChannel(body);
    }

    /** {@code POST /v1/channels} with every field ({@code bundleId}, {@code environment}, {@code channelId}, {@code messageStoragePolicy}). */
    public Map<String, Object> createChannel(Map<String, ?> channel) {
        return object("POST", "/v1/channels", null, channel);
    }

    public void deleteChannel(String channelId) {
        send("DELETE", "/v1/channels/" + segment(channelId), null, null);
    }

    // Teams (never scoped: the header is ignored there)

    /**
     * {@code POST /v1/teams}: adds a team ({@code teamId}, {@code apps}, optionally {@code keys}
     * — each {@code keyId}, {@code pem} (a P-256 public key or .p8), {@code environment},
     * {@code topics}, {@code relatedKeyId} — and {@code devices}) and returns it as listed:
     * {@code teamId}, {@code apps}, {@code keys} (without PEM), {@code devices}
     * ({@code policy}, {@code count}), {@code source}. A malformed team is an AdminException 400
     * naming the field; a team ID, key ID or app taken, or the limit of 1,000 teams, a 409.
     */
    public Map<String, Object> createTeam(Map<String, ?> team) {
        return object("POST", "/v1/teams", null, team);
    }

    /** {@code POST /v1/teams} with one key: {@code keyPem} a P-256 public key PEM (or a .p8); {@code keyId} null: no key. */
    public Map<String, Object> createTeam(String teamId, List<String> apps, String keyId, String keyPem) {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("teamId", teamId);
        body.put("apps", apps);
        if (keyId != null) {
            Map<String, Object> key = new LinkedHashMap<>();
            key.put("keyId", keyId);
            key.put("pem", keyPem);
            body.put("keys", List.of(key));
        }
        return createTeam(body);
    }

    /** {@code GET /v1/teams}: the configuration's teams first, then those added, in order of addition. */
    public List<Map<String, Object>> teams() {
        return list(object("GET", "/v1/teams", null, null), "teams");
    }

    /**
     * {@code DELETE /v1/teams/{teamId}}: removes a team added at run time with its keys (their
     * tokens are 403 InvalidProviderToken from then on), records, devices, faults, channels and
     * clock. AdminException 404 for an unknown team, 409 for one of the configuration file.
     */
    public void deleteTeam(String teamId) {
        send("DELETE", "/v1/teams/" + segment(teamId), null, null);
    }

    // Clock, state, observability

    /** {@code GET /v1/clock}: {@code {"offsetSeconds", "now", "wallClock"}} (scoped: and {@code teamOffsetSeconds}, the team's own part). */
    public Map<String, Object> clock() {
        return object("GET", "/v1/clock", null, null);
    }

    /** {@code POST /v1/clock}: moves the mock's time ahead (tokens age); returns the clock. */
    public Map<String, Object> advanceClock(long seconds) {
        return object("POST", "/v1/clock", null, Map.of("advanceSeconds", seconds));
    }

    /**
     * {@code POST /v1/reset}: records, devices, channels, faults, clock back to the configuration's.
     * Unscoped it resets every team's state too (teams added at run time stay); scoped, only the team's.
     */
    public void reset() {
        send("POST", "/v1/reset", null, null);
    }

    public Map<String, Object> stats() {
        return object("GET", "/v1/stats", null, null);
    }

    /** {@code GET /v1/health}: {@code {"status": "ok", "ports": {...}}}; AdminException 503 while starting. */
    public Map<String, Object> health() {
        return object("GET", "/v1/health", null, null);
    }

    /** {@code GET /v1/ca.pem}: the CA to trust for the mock's TLS listeners. */
    public String caPem() {
        return send("GET", "/v1/ca.pem", null, null).body();
    }

    /** {@code GET /metrics}: Prometheus text. */
    public String metrics() {
        return send("GET", "/metrics", null, null).body();
    }

    /** {@code GET /v1/openapi.json}: the admin API's OpenAPI 3.1 document. */
    public Map<String, Object> openapi() {
        return object("GET", "/v1/openapi.json", null, null);
    }

    // HTTP

    private Map<String, Object> object(String method, String path, Map<String, String> query, Object body) {
        return Json.parseObject(send(method, path, query, body).body());
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> list(Map<String, Object> body, String name) {
        return (List<Map<String, Object>>) body.get(name);
    }

    @SuppressWarnings("unchecked")
    private static List<Notification> records(Map<String, Object> body) {
        List<Object> raw = (List<Object>) body.get("notifications");
        return raw.stream().map(record -> new Notification((Map<String, Object>) record)).collect(Collectors.toList());
    }

    private HttpResponse<String> send(String method, String path, Map<String, String> query, Object body) {
        return send(method, path, query, body, timeout, false);
    }

    private HttpResponse<String> send(String method, String path, Map<String, String> query, Object body,
                                      Duration requestTimeout, boolean waiting) {
        HttpRequest request = request(method, path, query, body, requestTimeout).build();
        HttpResponse<String> response;
        try {
            response = http.send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UncheckedIOException(method + " " + base + path + ": " + e, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
        int status = response.statusCode();
        if (status / 100 == 2 || (waiting && status == 408)) {
            return response;
        }
        throw error(status, response.body(), method, path);
    }

    private HttpRequest.Builder request(String method, String path, Map<String, String> query, Object body, Duration requestTimeout) {
        String url = base + path;
        if (query != null && !query.isEmpty()) {
            url += "?" + query.entrySet().stream()
                    .map(entry -> encode(entry.getKey()) + "=" + encode(entry.getValue()))
                    .collect(Collectors.joining("&"));
        }
        HttpRequest.Builder builder = HttpRequest.newBuilder(URI.create(url));
        if (requestTimeout != null) {
            builder.timeout(requestTimeout);
        }
        if (body != null) {
            builder.header("Content-Type", "application/json")
                    .method(method, HttpRequest.BodyPublishers.ofString(Json.write(body), StandardCharsets.UTF_8));
        } else {
            builder.method(method, HttpRequest.BodyPublishers.noBody());
        }
        if (token != null && !token.isEmpty()) {
            builder.header("Authorization", "Bearer " + token);
        }
        if (team != null) {
            builder.header(TEAM_HEADER, team);
        }
        return builder;
    }

    private static AdminException error(int status, String text, String method, String path) {
        String message = text == null || text.isEmpty() ? "HTTP " + status : text;
        try {
            Object error = Json.parseObject(text).get("error");
            if (error != null) {
                message = error.toString();
            }
        } catch (IllegalArgumentException notJson) {
            // the text as it is
        }
        return new AdminException(status, message, method, path);
    }

    private static <V> void putIfSet(Map<String, V> map, String name, V value) {
        if (value != null) {
            map.put(name, value);
        }
    }

    private static String encode(String value) {
        return URLEncoder.encode(value, StandardCharsets.UTF_8);
    }

    private static String segment(String value) {
        return encode(value).replace("+", "%20");
    }

    /** One Server-Sent Event: {@code type} {@code message} for a record ({@code data} the record, {@code id} its seq), or a notice. */
    public static final class Event {
        public final String type;
        public final Object data;
        public final String id;

        Event(String type, Object data, String id) {
            this.type = type;
            this.data = data;
            this.id = id;
        }

        /** The record of a {@code message} event, else null. */
        @SuppressWarnings("unchecked")
        public Notification notification() {
            return "message".equals(type) && data instanceof Map ? new Notification((Map<String, Object>) data) : null;
        }
    }

    /** An open {@code /v1/events} stream: an Iterator of {@link Event}s until it ends or is closed. */
    public static final class EventStream implements Iterator<Event>, AutoCloseable {
        private final InputStream body;
        private final BufferedReader reader;
        private Event pending;
        private boolean ended;

        EventStream(InputStream body) {
            this.body = body;
            this.reader = new BufferedReader(new InputStreamReader(body, StandardCharsets.UTF_8));
        }

        void readOpening() throws IOException {
            String line;
            while ((line = reader.readLine()) != null && !line.isEmpty()) {
                // the opening comment: the stream is subscribed
            }
        }

        @Override
        public boolean hasNext() {
            if (pending == null && !ended) {
                pending = read();
                ended = pending == null;
            }
            return pending != null;
        }

        @Override
        public Event next() {
            if (!hasNext()) {
                throw new NoSuchElementException("the event stream ended");
            }
            Event event = pending;
            pending = null;
            return event;
        }

        private Event read() {
            String type = null;
            String id = null;
            List<String> data = new ArrayList<>();
            try {
                String line;
                while ((line = reader.readLine()) != null) {
                    if (line.isEmpty()) {
                        if (!data.isEmpty()) {
                            String text = String.join("\n", data);
                            Object value;
                            try {
                                value = Json.parse(text);
                            } catch (IllegalArgumentException notJson) {
                                value = text;
                            }
                            return new Event(type == null ? "message" : type, value, id);
                        }
                        type = null;
                        id = null;
                    } else if (!line.startsWith(":")) {
                        int colon = line.indexOf(':');
                        String name = colon < 0 ? line : line.substring(0, colon);
                        String value = colon < 0 ? "" : line.substring(colon + 1);
                        if (value.startsWith(" ")) {
                            value = value.substring(1);
                        }
                        switch (name) {
                            case "data": data.add(value); break;
                            case "event": type = value; break;
                            case "id": id = value; break;
                            default: break;
                        }
                    }
                }
                return null;
            } catch (IOException e) {
                if (ended) {
                    return null;
                }
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void close() {
            ended = true;
            try {
                body.close();
            } catch (IOException ignored) {
                // closing
            }
        }
    }
}
