package io.apnsmock;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One record of {@code /v1/notifications}, shaped as the admin API documents it: the common
 * fields as methods, everything through {@link #get(Object...)} or {@link #raw()}.
 */
public final class Notification {
    private final Map<String, Object> raw;

    public Notification(Map<String, Object> raw) {
        this.raw = Collections.unmodifiableMap(new LinkedHashMap<>(raw));
    }

    /** The value at a path: {@code get("payload", "aps", "alert", "title")}; null when absent. */
    public Object get(Object... path) {
        return Json.at(raw, path);
    }

    /** {@link #get} as a string (null when absent). */
    public String string(Object... path) {
        Object value = get(path);
        return value == null ? null : value.toString();
    }

    public long seq() { return number("seq"); }
    public String kind() { return string("kind"); }
    public String token() { return string("token"); }
    public String topic() { return string("topic"); }
    public String pushType() { return string("pushType"); }
    public String apnsId() { return string("apnsId"); }
    public String collapseId() { return string("collapseId"); }
    public String environment() { return string("environment"); }
    public String reason() { return string("reason"); }
    /** The HTTP status the mock answered, or 0 when it answered none (a connection action). */
    public int status() { return (int) number("status"); }
    public Integer priority() { Object p = raw.get("priority"); return p == null ? null : ((Number) p).intValue(); }

    /** The request's headers, lower-case names. */
    @SuppressWarnings("unchecked")
    public Map<String, String> headers() {
        Object headers = raw.get("headers");
        return headers instanceof Map ? (Map<String, String>) headers : Map.of();
    }

    /** The JSON payload as parsed ({@code Map}), or null. */
    @SuppressWarnings("unchecked")
    public Map<String, Object> payload() {
        Object payload = raw.get("payload");
        return payload instanceof Map ? (Map<String, Object>) payload : null;
    }

    public Map<String, Object> raw() {
        return raw;
    }

    private long number(String name) {
        Object value = raw.get(name);
        return value instanceof Number ? ((Number) value).longValue() : 0;
    }

    /** One line: {@code #7 200 token=a1a1a1a1a1a1… topic=com.example.app}. */
    public String brief() {
        String token = token() == null ? "-" : token();
        Object status = raw.get("status");
        String what = status != null ? status.toString() : (raw.get("action") != null ? raw.get("action").toString() : "no answer");
        if (reason() != null) {
            what += " " + reason();
        }
        return "#" + raw.get("seq") + " " + what + " token=" + token.substring(0, Math.min(12, token.length())) + "… topic=" + topic();
    }

    @Override
    public String toString() {
        return Json.write(raw);
    }
}
