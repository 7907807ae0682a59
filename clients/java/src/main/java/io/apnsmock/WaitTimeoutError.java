package io.apnsmock;

import java.time.Duration;
import java.util.List;
import java.util.stream.Collectors;

/**
 * {@link AdminClient#waitFor} timed out: an {@link AssertionError} (a test fails with it) saying
 * how many of the expected records matched, and showing the last of them.
 */
public class WaitTimeoutError extends AssertionError {
    private final int expected;
    private final List<Notification> records;

    public WaitTimeoutError(int expected, List<Notification> records, Duration timeout, Query query) {
        super("waited " + seconds(timeout) + " s for " + expected + " notification(s) matching " + query + ": "
                + records.size() + " arrived (last seen: " + lastSeen(records) + ")");
        this.expected = expected;
        this.records = List.copyOf(records);
    }

    public int expected() { return expected; }
    public int matched() { return records.size(); }
    /** The records that did match. */
    public List<Notification> records() { return records; }

    private static String lastSeen(List<Notification> records) {
        if (records.isEmpty()) {
            return "none";
        }
        return records.subList(Math.max(0, records.size() - 5), records.size()).stream()
                .map(Notification::brief).collect(Collectors.joining("; "));
    }

    private static String seconds(Duration timeout) {
        double seconds = timeout.toMillis() / 1000.0;
        return seconds == Math.rint(seconds) ? Long.toString((long) seconds) : Double.toString(seconds);
    }
}
