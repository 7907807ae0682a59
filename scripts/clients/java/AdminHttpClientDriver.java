// Calls apns-mock's admin API three times with one java.net.http.HttpClient, as a Java test suite
// does: GET /v1/health, GET /v1/stats, POST /v1/faults with a JSON body. The client is HTTP_2
// (its default): on a plain http:// URL it asks, on the first request of its new connection, to
// upgrade (`Connection: Upgrade, HTTP2-Settings`, `Upgrade: h2c`, `HTTP2-Settings`), and on an
// HTTP/1.1 answer goes on over HTTP/1.1 on the same connection. The admin listener answers over
// HTTP/1.1 and must keep reading that connection: the second call used to wait forever.
//
// Run with the JDK's source launcher (no build): java AdminHttpClientDriver.java http://127.0.0.1:PORT
// Prints one line per call, "<method> <path> <status> <HTTP version>"; exits 1 when a call fails
// or answers another status than expected.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

public class AdminHttpClientDriver {
    public static void main(String[] args) throws Exception {
        String base = args[0];
        HttpClient client = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_2)
            .connectTimeout(Duration.ofSeconds(10))
            .build();
        String fault = "{\"match\":{\"topic\":\"com.example.java\"},\"respond\":{\"status\":503,\"reason\":\"ServiceUnavailable\"}}";
        HttpRequest[] requests = {
            HttpRequest.newBuilder(URI.create(base + "/v1/health")).timeout(Duration.ofSeconds(15)).GET().build(),
            HttpRequest.newBuilder(URI.create(base + "/v1/stats")).timeout(Duration.ofSeconds(15)).GET().build(),
            HttpRequest.newBuilder(URI.create(base + "/v1/faults")).timeout(Duration.ofSeconds(15))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(fault)).build(),
        };
        int[] expected = {200, 200, 201};
        int failures = 0;
        for (int index = 0; index < requests.length; index++) {
            HttpRequest request = requests[index];
            String call = request.method() + " " + request.uri().getPath();
            try {
                HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
                System.out.println(call + " " + response.statusCode() + " " + response.version());
                if (response.statusCode() != expected[index]) {
                    System.err.println(call + ": expected " + expected[index] + ", got " + response.statusCode() + ": " + response.body());
                    failures++;
                }
            } catch (Exception error) {
                System.out.println(call + " failed");
                System.err.println(call + ": " + error);
                failures++;
            }
        }
        System.exit(failures == 0 ? 0 : 1);
    }
}
