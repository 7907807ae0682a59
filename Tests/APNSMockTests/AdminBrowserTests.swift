@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// The admin API against web pages (docs/admin-api.md, "Browsers and the admin API"): a page the
/// user opens elsewhere cannot change the mock with a cross-origin form POST nor read it through
/// DNS rebinding, while the inbox page, loopback pages, `admin.allowedOrigins` and the clients go
/// on working. Requests are made with curl, which sends whatever Host and Origin it is told.
@Suite("Admin API and browsers: Origin, Host, Content-Type", .timeLimit(.minutes(2)))
struct AdminBrowserTests {
    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: Data
        var error: String? {
            (try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["error"] as? String
        }
    }

    /// One request to the admin listener on 127.0.0.1 with exactly these headers (curl adds
    /// none but Host, User-Agent and Accept, and no Content-Type unless told).
    static func request(
        _ port: Int, _ method: String, _ path: String, headers: [String: String] = [:], body: String? = nil
    ) async throws -> Answer {
        var arguments = ["-sS", "-i", "--max-time", "20", "-X", method]
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            arguments += ["-H", "\(name): \(value)"]
        }
        if let body {
            arguments += ["--data-binary", body]
            // curl names form data unless told otherwise; `Content-Type:` with nothing removes it.
            if headers["Content-Type"] == nil { arguments += ["-H", "Content-Type:"] }
        }
        arguments.append("http://127.0.0.1:\(port)\(path)")
        let output = try await ExternalTool.run("curl", arguments)
        guard output.exitCode == 0 else { throw Curl.CurlFailure(exitCode: output.exitCode, stderr: output.stderr) }
        let response = try Curl.parse(output.stdout)
        return Answer(status: response.status, headers: response.headers, body: response.body)
    }

    static let fault = #"{"match":{"topic":"com.example.app"},"respond":{"status":503,"reason":"ServiceUnavailable"}}"#

    /// A page on another site posts a form (or `text/plain`) to `/v1/faults`, as any page can
    /// without a preflight: refused, naming the check, and no rule is added. Without an Origin (a
    /// client that is not a browser) the body still has to be JSON.
    @Test func aCrossOriginFormPostIsRefusedAndChangesNothing() async throws {
        try await MockHarness.withRunningMock { mock in
            for contentType in ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x"] {
                let answer = try await Self.request(
                    mock.adminPort, "POST", "/v1/faults",
                    headers: ["Origin": "http://evil.example", "Content-Type": contentType], body: Self.fault)
                #expect(answer.status == 403, "\(contentType)")
                #expect(answer.error?.hasPrefix("origin: ") == true, "\(answer.error ?? "")")
                #expect(answer.headers["access-control-allow-origin"] == nil)
            }
            let plain = try await Self.request(
                mock.adminPort, "POST", "/v1/faults", headers: ["Content-Type": "text/plain"], body: Self.fault)
            #expect(plain.status == 403)
            #expect(plain.error?.hasPrefix("content-type: ") == true, "\(plain.error ?? "")")
            // Nor with the JSON type: a page cannot send it cross-origin without a preflight,
            // and the preflight is refused too.
            let json = try await Self.request(
                mock.adminPort, "POST", "/v1/faults",
                headers: ["Origin": "http://evil.example", "Content-Type": "application/json"], body: Self.fault)
            #expect(json.status == 403)
            let preflight = try await Self.request(
                mock.adminPort, "OPTIONS", "/v1/faults",
                headers: ["Origin": "http://evil.example", "Access-Control-Request-Method": "POST"])
            #expect(preflight.status == 403)
            #expect(preflight.headers["access-control-allow-origin"] == nil)
            // `Origin: null` (a sandboxed frame, a file: page) is no origin that may.
            let opaque = try await Self.request(
                mock.adminPort, "DELETE", "/v1/faults", headers: ["Origin": "null"])
            #expect(opaque.status == 403)
            #expect(try await mock.admin.faults().faults.isEmpty)
        }
    }

    /// DNS rebinding: the attacker's name now points at 127.0.0.1, so its page's requests are
    /// same-origin and carry no Origin, but their Host is the attacker's name.
    @Test func aRebindingHostIsRefused() async throws {
        try await MockHarness.withRunningMock { mock in
            _ = try await Pushes.push(mock, token: Pushes.token)
            for host in ["evil.example:\(mock.adminPort)", "evil.example", "127.0.0.1.evil.example:\(mock.adminPort)"] {
                let answer = try await Self.request(mock.adminPort, "GET", "/v1/notifications", headers: ["Host": host])
                #expect(answer.status == 403, "\(host)")
                #expect(answer.error?.hasPrefix("host: ") == true, "\(answer.error ?? "")")
                #expect(!String(decoding: answer.body, as: UTF8.self).contains(Pushes.token))
            }
            let events = try await Self.request(mock.adminPort, "GET", "/v1/events", headers: ["Host": "evil.example"])
            #expect(events.status == 403)
            // The names of the mock itself answer.
            for host in ["127.0.0.1:\(mock.adminPort)", "localhost:\(mock.adminPort)", "[::1]:\(mock.adminPort)", "app.localhost"] {
                let answer = try await Self.request(mock.adminPort, "GET", "/v1/notifications", headers: ["Host": host])
                #expect(answer.status == 200, "\(host): \(answer.error ?? "")")
            }
            // The health probe answers whatever the Host (an orchestrator's probe).
            let health = try await Self.request(mock.adminPort, "GET", "/v1/health", headers: ["Host": "10.1.2.3:8080"])
            #expect(health.status == 200)
        }
    }

    /// The inbox page's own requests (same origin), a page on a loopback origin (a developer's
    /// dashboard on localhost:3000), and what `admin.allowedOrigins` names are allowed; a page of
    /// another origin gets the CORS headers it needs to read the answer.
    @Test func sameOriginLoopbackAndConfiguredOriginsPass() async throws {
        try await MockHarness.withRunningMock(configure: {
            $0.admin.allowedOrigins = ["http://dashboard.internal:8080"]
        }) { mock in
            let port = mock.adminPort
            let json = ["Content-Type": "application/json; charset=utf-8"]
            let same = try await Self.request(
                port, "POST", "/v1/faults", headers: json.merging(["Origin": "http://127.0.0.1:\(port)"]) { $1 }, body: Self.fault)
            #expect(same.status == 201, "\(same.error ?? "")")
            #expect(same.headers["access-control-allow-origin"] == nil)
            for origin in ["http://localhost:3000", "http://127.0.0.1:5173", "http://[::1]:8080", "http://localhost"] {
                let answer = try await Self.request(
                    port, "POST", "/v1/faults", headers: json.merging(["Origin": origin]) { $1 }, body: Self.fault)
                #expect(answer.status == 201, "\(origin): \(answer.error ?? "")")
                #expect(answer.headers["access-control-allow-origin"] == origin)
            }
            let dashboard = "http://dashboard.internal:8080"
            let preflight = try await Self.request(
                port, "OPTIONS", "/v1/faults",
                headers: ["Origin": dashboard, "Access-Control-Request-Method": "POST",
                          "Access-Control-Request-Headers": "content-type, authorization"])
            #expect(preflight.status == 204)
            #expect(preflight.headers["access-control-allow-origin"] == dashboard)
            #expect(preflight.headers["access-control-allow-headers"]?.lowercased().contains("content-type") == true)
            let posted = try await Self.request(
                port, "POST", "/v1/faults", headers: json.merging(["Origin": dashboard]) { $1 }, body: Self.fault)
            #expect(posted.status == 201, "\(posted.error ?? "")")
            #expect(posted.headers["access-control-allow-origin"] == dashboard)
            // A page served by that host through the mock's port (a reverse proxy in front of it).
            let listed = try await Self.request(
                port, "GET", "/v1/faults", headers: ["Origin": dashboard, "Host": "dashboard.internal:8080"])
            #expect(listed.status == 200, "\(listed.error ?? "")")
            // Allowed, but not JSON: refused all the same.
            let form = try await Self.request(
                port, "POST", "/v1/faults",
                headers: ["Origin": dashboard, "Content-Type": "application/x-www-form-urlencoded"], body: Self.fault)
            #expect(form.status == 403)
            #expect(form.error?.hasPrefix("content-type: ") == true, "\(form.error ?? "")")
            // A DELETE without a body needs no type; one that names a type that is not JSON is refused.
            #expect(try await Self.request(port, "DELETE", "/v1/faults", headers: ["Origin": dashboard]).status == 204)
            let typed = try await Self.request(port, "POST", "/v1/reset", headers: ["Content-Type": "text/plain"])
            #expect(typed.status == 403)
            #expect(try await Self.request(port, "POST", "/v1/reset").status == 204)
            // Another port of the same host is another origin.
            let otherPort = try await Self.request(
                port, "POST", "/v1/faults", headers: json.merging(["Origin": "http://dashboard.internal:9090"]) { $1 }, body: Self.fault)
            #expect(otherPort.status == 403)
        }
    }

    /// With a token the same checks apply, and the token too; its scheme is case-insensitive
    /// (RFC 9110 §11.1).
    @Test func withATokenTheChecksStillApplyAndTheSchemeIsCaseInsensitive() async throws {
        try await MockHarness.withRunningMock(configure: { $0.admin.token = "s3cret-token" }) { mock in
            let port = mock.adminPort
            for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
                let answer = try await Self.request(port, "GET", "/v1/stats", headers: ["Authorization": "\(scheme) s3cret-token"])
                #expect(answer.status == 200, "\(scheme)")
            }
            for credentials in ["Bearer s3cret-tokenx", "Bearer", "Basic s3cret-token", "Bearers3cret-token", "bearer S3CRET-TOKEN"] {
                let answer = try await Self.request(port, "GET", "/v1/stats", headers: ["Authorization": credentials])
                #expect(answer.status == 401, "\(credentials)")
            }
            let crossOrigin = try await Self.request(
                port, "POST", "/v1/faults",
                headers: ["Authorization": "Bearer s3cret-token", "Origin": "http://evil.example", "Content-Type": "text/plain"],
                body: Self.fault)
            #expect(crossOrigin.status == 403)
            #expect(crossOrigin.error?.hasPrefix("origin: ") == true)
            let rebound = try await Self.request(
                port, "GET", "/v1/notifications", headers: ["Authorization": "Bearer s3cret-token", "Host": "evil.example"])
            #expect(rebound.status == 403)
            #expect(try await AdminClient(baseURL: mock.adminURL, token: "s3cret-token").faults().faults.isEmpty)
        }
    }

    /// Which names a Host may give, by the listener's bind address (no listener needed).
    @Test func hostNamesByBindAddress() {
        let loopback = AdminAccessPolicy(host: "127.0.0.1", allowedHosts: ["apns-mock.ci.svc.cluster.local"], machineHostname: "build-7.example.net")
        for host in ["127.0.0.1", "127.0.0.2", "::1", "localhost", "app.localhost", "build-7.example.net", "build-7",
                     "apns-mock.ci.svc.cluster.local", "::ffff:127.0.0.1"] {
            #expect(loopback.allowsHost(host), "\(host)")
        }
        for host in ["evil.example", "10.0.0.5", "apns-mock", "0.0.0.0", "localhost.evil.example"] {
            #expect(!loopback.allowsHost(host), "\(host)")
        }
        // The container image binds every interface: clients dial it by its address or its
        // service name, which a rebinding attacker cannot be (an address, a single label).
        for bind in ["0.0.0.0", "::", "[::]"] {
            let wildcard = AdminAccessPolicy(host: bind, machineHostname: "3f2a9c")
            for host in ["10.0.0.5", "172.18.0.3", "fd00::5", "apns-mock", "3f2a9c", "localhost"] {
                #expect(wildcard.allowsHost(host), "\(bind): \(host)")
            }
            for host in ["evil.example", "apns-mock.evil.example"] {
                #expect(!wildcard.allowsHost(host), "\(bind): \(host)")
            }
        }
        let named = AdminAccessPolicy(host: "10.0.0.5", machineHostname: nil)
        #expect(named.allowsHost("10.0.0.5"))
        #expect(!named.allowsHost("10.0.0.6"))
        #expect(AdminAccessPolicy(host: "127.0.0.1", allowedHosts: ["*"], machineHostname: nil).allowsHost("evil.example"))
    }

    /// `admin.allowedOrigins` and `admin.allowedHosts` are checked at start-up, naming the entry,
    /// in the file and in their variables.
    @Test func allowedOriginsAndHostsAreCheckedAtStartUp() throws {
        let parsed = try Configuration.parse(yaml: """
            admin:
              allowedOrigins: ["HTTP://Dashboard.Internal:8080", "https://ci.example:443", "http://[::1]:3000"]
              allowedHosts: [apns-mock.ci.svc.cluster.local, "::1", "*"]
            """, file: "mock.yaml")
        #expect(parsed.admin.allowedOrigins == ["http://dashboard.internal:8080", "https://ci.example", "http://[::1]:3000"])
        #expect(parsed.admin.allowedHosts == ["apns-mock.ci.svc.cluster.local", "::1", "*"])
        for (entry, list) in [("dashboard.internal:8080", "[\"dashboard.internal:8080\"]"), ("http://a/b", "[\"http://x\", \"http://a/b\"]"),
                              ("*", "[\"*\"]"), ("http://a:99999", "[\"http://a:99999\"]"), ("null", "[\"null\"]")] {
            #expect {
                _ = try Configuration.parse(yaml: "admin: { allowedOrigins: \(list) }", file: "mock.yaml")
            } throws: { error in
                let text = "\(error)"
                return text.contains("admin.allowedOrigins[") && text.contains("\"\(entry)\"")
            }
        }
        #expect {
            _ = try Configuration.parse(yaml: "admin: { allowedHosts: [\"http://a\"] }", file: "mock.yaml")
        } throws: { "\($0)".contains("admin.allowedHosts[0]") }
        #expect {
            _ = try Configuration.parse(yaml: "admin: { allowedHosts: [\"a:8080\"] }", file: "mock.yaml")
        } throws: { "\($0)".contains("admin.allowedHosts[0]") }
        var configuration = Configuration()
        try EnvironmentVariables(["APNS_MOCK_ADMIN_ALLOWED_ORIGINS": "http://a.example, https://b.example:8443"]).apply(to: &configuration)
        #expect(configuration.admin.allowedOrigins == ["http://a.example", "https://b.example:8443"])
        #expect {
            try EnvironmentVariables(["APNS_MOCK_ADMIN_ALLOWED_ORIGINS": "http://a.example,b.example"]).apply(to: &configuration)
        } throws: { "\($0)".contains("APNS_MOCK_ADMIN_ALLOWED_ORIGINS[1]") && "\($0)".contains("\"b.example\"") }
    }

    /// A token no header can carry is refused at start-up, naming the field or variable (and
    /// never showing the token).
    @Test func aTokenWithWhitespaceOrControlCharactersIsRefused() throws {
        for (yaml, what) in [("admin: { token: \"abc def\" }", "whitespace"), ("admin: { token: \"abc\\ndef\" }", "whitespace"),
                             ("admin: { token: \"abc\\u0001def\" }", "control character"), ("admin: { token: \"abcdéf\" }", "outside ASCII")] {
            #expect {
                _ = try Configuration.parse(yaml: yaml, file: "mock.yaml")
            } throws: { error in
                let text = "\(error)"
                return text.contains("admin.token") && text.contains(what) && !text.contains("def")
            }
        }
        var configuration = Configuration()
        #expect {
            try EnvironmentVariables(["APNS_MOCK_ADMIN_TOKEN": "abc\tdef"]).apply(to: &configuration)
        } throws: { "\($0)".contains("APNS_MOCK_ADMIN_TOKEN") && "\($0)".contains("whitespace") }
        try EnvironmentVariables(["APNS_MOCK_ADMIN_TOKEN": "Zm9v.YmFy-~_+/="]).apply(to: &configuration)
        #expect(configuration.admin.token == "Zm9v.YmFy-~_+/=")
    }
}
