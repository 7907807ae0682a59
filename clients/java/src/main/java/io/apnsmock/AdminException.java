package io.apnsmock;

/** An admin API answer outside 2xx: {@link #status()} and the server's message as it wrote it. */
public class AdminException extends RuntimeException {
    private final int status;
    private final String serverMessage;

    public AdminException(int status, String serverMessage, String method, String path) {
        super(serverMessage + " (" + method + " " + path + " answered " + status + ")");
        this.status = status;
        this.serverMessage = serverMessage;
    }

    public int status() {
        return status;
    }

    /** The message as the server wrote it, e.g. {@code advanceSeconds: expected a whole number …}. */
    public String serverMessage() {
        return serverMessage;
    }
}
