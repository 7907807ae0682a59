package io.apnsmock;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.StandardProtocolFamily;
import java.net.URI;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * A container engine's Docker-compatible API (Docker's, or podman's {@code podman system
 * service}), spoken with the JDK only: HTTP/1.1 over a Unix socket or TCP, each request on a
 * connection of its own, bounded in time.
 *
 * <p>{@link #find()} looks where Docker's clients look, and where podman's socket is:
 * {@code DOCKER_HOST} when it is set (and then only it); else the first of
 * {@code /var/run/docker.sock}, podman's rootful {@code /run/podman/podman.sock} and rootless
 * {@code $XDG_RUNTIME_DIR/podman/podman.sock} that answers {@code GET /_ping}. When none does it
 * throws {@link EngineNotFoundException}, one line saying where it looked and what to set.
 */
public final class Engine {
    public static final Duration PROBE_TIMEOUT = Duration.ofSeconds(3);
    private static final ScheduledExecutorService WATCHDOG = Executors.newSingleThreadScheduledExecutor(runnable -> {
        Thread thread = new Thread(runnable, "apns-mock-engine-watchdog");
        thread.setDaemon(true);
        return thread;
    });

    private final String dockerHost;
    private final SocketAddress address;

    /** The engine at {@code dockerHost}: {@code unix:///path} or {@code tcp://host:port}. */
    public Engine(String dockerHost) {
        this.dockerHost = dockerHost;
        URI uri = URI.create(dockerHost);
        String scheme = uri.getScheme() == null ? "" : uri.getScheme();
        switch (scheme) {
            case "unix":
                address = UnixDomainSocketAddress.of(uri.getPath());
                break;
            case "tcp":
            case "http":
                address = new InetSocketAddress(uri.getHost(), uri.getPort() < 0 ? 2375 : uri.getPort());
                break;
            default:
                throw new EngineNotFoundException("DOCKER_HOST=" + dockerHost
                        + " is not unix:// or tcp:// (TLS and ssh:// engines are not supported here): set DOCKER_HOST to the engine's socket");
        }
    }

    /** The engine to use, found as {@link Engine} says, with the process's environment. */
    public static Engine find() {
        return find(System.getenv(), defaultSockets(System.getenv()), PROBE_TIMEOUT);
    }

    /** Where engines listen when DOCKER_HOST is not set, in the order they are tried. */
    public static List<String> defaultSockets(Map<String, String> environment) {
        List<String> sockets = new ArrayList<>();
        sockets.add("/var/run/docker.sock");
        sockets.add("/run/podman/podman.sock");
        String runtime = environment.get("XDG_RUNTIME_DIR");
        if (runtime == null || runtime.isEmpty()) {
            runtime = "/run/user/" + uid();
        }
        sockets.add(runtime + "/podman/podman.sock");
        return sockets;
    }

    /** {@link #find()} with the environment and the sockets given (for tests). */
    public static Engine find(Map<String, String> environment, List<String> sockets, Duration timeout) {
        String dockerHost = environment.get("DOCKER_HOST");
        if (dockerHost != null && !dockerHost.isEmpty()) {
            Engine engine = new Engine(dockerHost);
            String problem = engine.probe(timeout);
            if (problem != null) {
                throw new EngineNotFoundException("DOCKER_HOST=" + dockerHost + " does not answer (" + problem
                        + "): start that engine, or set DOCKER_HOST to one that answers (unset it to use /var/run/docker.sock or podman's socket)");
            }
            return engine;
        }
        List<String> tried = new ArrayList<>();
        for (String socket : sockets) {
            if (!Files.exists(Path.of(socket))) {
                tried.add(socket + " (absent)");
                continue;
            }
            Engine engine = new Engine("unix://" + socket);
            String problem = engine.probe(timeout);
            if (problem == null) {
                return engine;
            }
            tried.add(socket + " (" + problem + ")");
        }
        throw new EngineNotFoundException("no container engine answers at " + String.join(", ", tried)
                + ": start Docker, or podman's socket (`systemctl --user start podman.socket`; as root "
                + "`systemctl start podman.socket` or `podman system service --time=0 &`), or set DOCKER_HOST (e.g. unix:///path/to/engine.sock)");
    }

    public String dockerHost() {
        return dockerHost;
    }

    /** Whether the engine's ports are this machine's (a Unix socket): then they are reached on 127.0.0.1. */
    public boolean isLocal() {
        return address instanceof UnixDomainSocketAddress;
    }

    /** The host its mapped ports are reached on. */
    public String host() {
        return isLocal() ? "127.0.0.1" : ((InetSocketAddress) address).getHostString();
    }

    /** Whether it is podman (its {@code /version} says so). */
    public boolean isPodman() {
        try {
            Response response = request("GET", "/version", null, PROBE_TIMEOUT);
            return response.status == 200 && response.text().toLowerCase(Locale.ROOT).contains("podman");
        } catch (IOException e) {
            return false;
        }
    }

    /** null when {@code GET /_ping} answers 200 within {@code timeout}, else why not. */
    public String probe(Duration timeout) {
        try {
            Response response = request("GET", "/_ping", null, timeout);
            return response.status == 200 ? null : "GET /_ping answered " + response.status;
        } catch (TimedOut e) {
            return "no answer in " + timeout.toSeconds() + " s";
        } catch (IOException e) {
            String message = e.getMessage();
            return message == null ? e.getClass().getSimpleName() : message;
        }
    }

    /** One answer of the engine. */
    public static final class Response {
        public final int status;
        public final byte[] body;

        Response(int status, byte[] body) {
            this.status = status;
            this.body = body;
        }

        public String text() {
            return new String(body, StandardCharsets.UTF_8);
        }
    }

    static final class TimedOut extends IOException {
        TimedOut(String message) {
            super(message);
        }
    }

    /** One request, {@code body} (JSON-able) or null, the answer read whole within {@code timeout}. */
    public Response request(String method, String path, Object body, Duration timeout) throws IOException {
        byte[] content = body == null ? new byte[0] : Json.write(body).getBytes(StandardCharsets.UTF_8);
        StringBuilder head = new StringBuilder()
                .append(method).append(' ').append(path).append(" HTTP/1.1\r\n")
                .append("Host: docker\r\nConnection: close\r\nAccept: application/json\r\n")
                .append("Content-Length: ").append(content.length).append("\r\n");
        if (body != null) {
            head.append("Content-Type: application/json\r\n");
        }
        head.append("\r\n");
        SocketChannel channel = address instanceof UnixDomainSocketAddress
                ? SocketChannel.open(StandardProtocolFamily.UNIX) : SocketChannel.open();
        boolean[] expired = {false};
        ScheduledFuture<?> watchdog = WATCHDOG.schedule(() -> {
            expired[0] = true;
            try {
                channel.close();
            } catch (IOException ignored) {
                // closing
            }
        }, timeout.toMillis(), TimeUnit.MILLISECONDS);
        try (channel) {
            channel.connect(address);
            write(channel, head.toString().getBytes(StandardCharsets.US_ASCII));
            write(channel, content);
            ByteArrayOutputStream raw = new ByteArrayOutputStream();
            ByteBuffer buffer = ByteBuffer.allocate(16384);
            while (channel.read(buffer) >= 0) {
                raw.write(buffer.array(), 0, buffer.position());
                buffer.clear();
            }
            return parse(raw.toByteArray());
        } catch (IOException e) {
            if (expired[0]) {
                throw new TimedOut(method + " " + path + ": no answer in " + timeout.toSeconds() + " s");
            }
            throw e;
        } finally {
            watchdog.cancel(false);
        }
    }

    /** {@link #request}, failing unless the status is one of {@code expected}. */
    public Response call(String method, String path, Object body, Duration timeout, int... expected) {
        Response response;
        try {
            response = request(method, path, body, timeout);
        } catch (IOException e) {
            throw new IllegalStateException(method + " " + path + " at " + dockerHost + ": " + e.getMessage(), e);
        }
        for (int status : expected) {
            if (response.status == status) {
                return response;
            }
        }
        String message = response.text();
        try {
            Object text = Json.parseObject(message).get("message");
            if (text != null) {
                message = text.toString();
            }
        } catch (IllegalArgumentException notJson) {
            // as it is
        }
        throw new IllegalStateException(method + " " + path + " at " + dockerHost + " answered " + response.status + ": " + message.trim());
    }

    private static void write(SocketChannel channel, byte[] bytes) throws IOException {
        ByteBuffer buffer = ByteBuffer.wrap(bytes);
        while (buffer.hasRemaining()) {
            channel.write(buffer);
        }
    }

    private static Response parse(byte[] raw) throws IOException {
        int end = indexOf(raw, "\r\n\r\n".getBytes(StandardCharsets.US_ASCII), 0);
        if (end < 0) {
            throw new IOException("not an HTTP answer (" + raw.length + " bytes)");
        }
        String[] lines = new String(raw, 0, end, StandardCharsets.ISO_8859_1).split("\r\n");
        String[] statusLine = lines[0].split(" ", 3);
        if (statusLine.length < 2 || !statusLine[0].startsWith("HTTP/")) {
            throw new IOException("not an HTTP answer: " + lines[0]);
        }
        int status = Integer.parseInt(statusLine[1]);
        boolean chunked = false;
        for (int i = 1; i < lines.length; i++) {
            String line = lines[i].toLowerCase(Locale.ROOT);
            if (line.startsWith("transfer-encoding:") && line.contains("chunked")) {
                chunked = true;
            }
        }
        int start = end + 4;
        if (!chunked) {
            byte[] body = new byte[raw.length - start];
            System.arraycopy(raw, start, body, 0, body.length);
            return new Response(status, body);
        }
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        int at = start;
        while (at < raw.length) {
            int lineEnd = indexOf(raw, "\r\n".getBytes(StandardCharsets.US_ASCII), at);
            if (lineEnd < 0) {
                break;
            }
            String sizeText = new String(raw, at, lineEnd - at, StandardCharsets.US_ASCII).split(";")[0].trim();
            int size = Integer.parseInt(sizeText, 16);
            if (size == 0) {
                break;
            }
            body.write(raw, lineEnd + 2, Math.min(size, raw.length - lineEnd - 2));
            at = lineEnd + 2 + size + 2;
        }
        return new Response(status, body.toByteArray());
    }

    private static int indexOf(byte[] data, byte[] pattern, int from) {
        outer:
        for (int i = from; i <= data.length - pattern.length; i++) {
            for (int j = 0; j < pattern.length; j++) {
                if (data[i + j] != pattern[j]) {
                    continue outer;
                }
            }
            return i;
        }
        return -1;
    }

    private static String uid() {
        try {
            Object uid = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
            return uid.toString();
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            return "0";
        }
    }
}
