package io.apnsmock;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Filters of {@code /v1/notifications}, {@code /wait} and {@code /v1/events}:
 * {@code Query.ofToken(device).pushType("alert")}. Unset filters are not sent; without
 * {@link #outcome} the mock answers accepted records only.
 */
public final class Query {
    private final Map<String, String> parameters = new LinkedHashMap<>();

    public static Query any() {
        return new Query();
    }

    /** {@code Query.any().token(token)}. */
    public static Query ofToken(String token) {
        return new Query().token(token);
    }

    public Query token(String token) { return set("token", token); }
    public Query topic(String topic) { return set("topic", topic); }
    public Query pushType(String pushType) { return set("pushType", pushType); }
    public Query apnsId(String apnsId) { return set("apnsId", apnsId); }
    public Query collapseId(String collapseId) { return set("collapseId", collapseId); }
    /** {@code accepted} (the mock's default), {@code rejected} or {@code all}. */
    public Query outcome(String outcome) { return set("outcome", outcome); }
    public Query reason(String reason) { return set("reason", reason); }
    /** {@code device}, {@code broadcast} or {@code channel}. */
    public Query kind(String kind) { return set("kind", kind); }
    public Query channelId(String channelId) { return set("channelId", channelId); }
    /** Records after this {@code seq} only (a page's {@code next}). */
    public Query since(long seq) { return set("since", Long.toString(seq)); }
    public Query limit(int limit) { return set("limit", Integer.toString(limit)); }

    private Query set(String name, String value) {
        if (value == null) {
            parameters.remove(name);
        } else {
            parameters.put(name, value);
        }
        return this;
    }

    /** A copy with {@code since} set. */
    Query copySince(long seq) {
        Query copy = new Query();
        copy.parameters.putAll(parameters);
        return copy.since(seq);
    }

    Map<String, String> parameters() {
        return new LinkedHashMap<>(parameters);
    }

    @Override
    public String toString() {
        if (parameters.isEmpty()) {
            return "any record";
        }
        StringBuilder out = new StringBuilder();
        parameters.forEach((name, value) -> out.append(out.length() == 0 ? "" : ", ").append(name).append('=').append(value));
        return out.toString();
    }
}
