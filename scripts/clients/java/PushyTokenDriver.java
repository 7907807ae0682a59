// Sends pushes through apns-mock from Java, with the provider token signed exactly as pushy signs
// it (com.eatthepath.pushy.apns.auth.AuthenticationToken), over Java's own HTTP/2 client.
//
// pushy's token, reproduced here with the same JDK calls:
//   - the signature from Signature.getInstance("SHA256withECDSA"), which is DER (an X9.62
//     SEQUENCE of two INTEGERs, 70 to 72 bytes), base64url-encoded as it is: pushy does not turn
//     it into JOSE's 64-byte r||s;
//   - header {"alg":"ES256","typ":"JWT","kid":…} and claims {"iss":…,"iat":<integer seconds>}, in
//     that order, without spaces (pushy's JsonSerializer over HashMaps whose order is fixed for
//     these keys);
//   - `authorization: bearer <token>` (lower-case scheme), one token per connection, signed on its
//     first push; on 403 ExpiredProviderToken pushy closes the connection and hands the rejection to
//     the caller without resending (so does this driver).
// What it does not reproduce: pushy's Netty pipeline (it offers no ALPN unless asked, and sends
// `apns-expiration` always). java.net.http.HttpClient negotiates h2 through ALPN and orders the
// headers itself. Headers sent: apns-expiration (0), apns-topic, apns-push-type: alert,
// apns-priority: 10, authorization — pushy's defaults for a SimpleApnsPushNotification with a
// push type set.
//
// Run with the JDK's source launcher (no build): java PushyTokenDriver.java --port P --ca CA.pem
// --key AuthKey.p8 --team TEAM --key-id KEY --device TOKEN... [--scenario S] [--topic T]
// [--timeout S]. Prints the drivers' JSON report (scripts/clients/driver_common.py).
import java.io.ByteArrayInputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.Signature;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

public class PushyTokenDriver {
    static int signed = 0;

    public static void main(String[] argv) throws Exception {
        Map<String, List<String>> args = parse(argv);
        int port = Integer.parseInt(one(args, "port"));
        String topic = args.containsKey("topic") ? one(args, "topic") : "com.example.app";
        Duration timeout = Duration.ofMillis((long) (Double.parseDouble(args.containsKey("timeout") ? one(args, "timeout") : "30") * 1000));
        PrivateKey key = readKey(Path.of(one(args, "key")));
        String team = one(args, "team");
        String keyId = one(args, "key-id");

        HttpClient client = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_2)
            .sslContext(trusting(Path.of(one(args, "ca"))))
            .connectTimeout(timeout)
            .build();
        String token = null;
        List<String> results = new ArrayList<>();
        for (String device : args.get("device")) {
            if (token == null) {
                token = sign(key, team, keyId);
            }
            HttpRequest request = HttpRequest.newBuilder(URI.create("https://localhost:" + port + "/3/device/" + device))
                .version(HttpClient.Version.HTTP_2)
                .timeout(timeout)
                .header("apns-expiration", "0")
                .header("apns-topic", topic)
                .header("apns-push-type", "alert")
                .header("apns-priority", "10")
                .header("authorization", "bearer " + token)
                .POST(HttpRequest.BodyPublishers.ofString("{\"aps\":{\"alert\":\"hello from java-pushy-token\"}}"))
                .build();
            try {
                HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
                String reason = match(response.body(), "\"reason\"\\s*:\\s*\"([^\"]*)\"");
                String timestamp = match(response.body(), "\"timestamp\"\\s*:\\s*(\\d+)");
                String apnsId = response.headers().firstValue("apns-id").orElse(null);
                results.add(result(device, response.statusCode() == 200, response.statusCode(), reason, apnsId, timestamp, null));
                if ("ExpiredProviderToken".equals(reason)) {
                    // pushy closes the connection; the next push signs a new token on a new one.
                    client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_2)
                        .sslContext(trusting(Path.of(one(args, "ca")))).connectTimeout(timeout).build();
                    token = null;
                }
            } catch (Exception error) {
                results.add(result(device, false, null, null, null, null, error.toString()));
            }
        }
        String scenario = args.containsKey("scenario") ? one(args, "scenario") : "";
        System.out.println("{\"client\":\"java-pushy-token\",\"version\":" + quote(System.getProperty("java.version"))
            + ",\"scenario\":" + quote(scenario) + ",\"dialed\":[],\"tokensSigned\":" + signed
            + ",\"results\":[" + String.join(",", results) + "]}");
    }

    /// pushy's AuthenticationToken: header and claims as its JsonSerializer writes them, signed with
    /// SHA256withECDSA, the DER signature base64url-encoded as it is.
    static String sign(PrivateKey key, String team, String keyId) throws Exception {
        Base64.Encoder encoder = Base64.getUrlEncoder().withoutPadding();
        String header = "{\"alg\":\"ES256\",\"typ\":\"JWT\",\"kid\":\"" + keyId + "\"}";
        String claims = "{\"iss\":\"" + team + "\",\"iat\":" + (System.currentTimeMillis() / 1000) + "}";
        String input = encoder.encodeToString(header.getBytes(StandardCharsets.US_ASCII)) + "."
            + encoder.encodeToString(claims.getBytes(StandardCharsets.US_ASCII));
        Signature signature = Signature.getInstance("SHA256withECDSA");
        signature.initSign(key);
        signature.update(input.getBytes(StandardCharsets.US_ASCII));
        signed++;
        return input + "." + encoder.encodeToString(signature.sign());
    }

    static PrivateKey readKey(Path path) throws Exception {
        String pem = Files.readString(path);
        String base64 = pem.replaceAll("-----[A-Z ]+-----", "").replaceAll("\\s", "");
        return KeyFactory.getInstance("EC").generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(base64)));
    }

    static SSLContext trusting(Path ca) throws Exception {
        CertificateFactory factory = CertificateFactory.getInstance("X.509");
        X509Certificate certificate = (X509Certificate) factory.generateCertificate(new ByteArrayInputStream(Files.readAllBytes(ca)));
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        store.setCertificateEntry("apns-mock", certificate);
        TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        trust.init(store);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(null, trust.getTrustManagers(), null);
        return context;
    }

    static String result(String device, boolean sent, Integer status, String reason, String apnsId, String timestamp, String error) {
        return "{\"device\":" + quote(device) + ",\"sent\":" + sent + ",\"status\":" + status + ",\"reason\":" + quote(reason)
            + ",\"apnsId\":" + quote(apnsId) + ",\"timestamp\":" + timestamp + ",\"error\":" + quote(error) + "}";
    }

    static String match(String text, String pattern) {
        Matcher matcher = Pattern.compile(pattern).matcher(text == null ? "" : text);
        return matcher.find() ? matcher.group(1) : null;
    }

    static String quote(String text) {
        if (text == null) return "null";
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }

    static String one(Map<String, List<String>> args, String name) {
        List<String> values = args.get(name);
        if (values == null || values.isEmpty()) throw new IllegalArgumentException("--" + name + " is required");
        return values.get(values.size() - 1);
    }

    static Map<String, List<String>> parse(String[] argv) {
        Map<String, List<String>> args = new LinkedHashMap<>();
        for (int index = 0; index + 1 < argv.length; index += 2) {
            if (!argv[index].startsWith("--")) throw new IllegalArgumentException("unexpected " + argv[index]);
            args.computeIfAbsent(argv[index].substring(2), name -> new ArrayList<>()).add(argv[index + 1]);
        }
        return args;
    }
}
