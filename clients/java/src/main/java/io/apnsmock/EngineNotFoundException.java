package io.apnsmock;

/** No container engine answered; the message (one line) says where it looked and what to set. */
public class EngineNotFoundException extends IllegalStateException {
    public EngineNotFoundException(String message) {
        super(message);
    }
}
