import APNSMockCore
import Foundation
import Hummingbird
#if canImport(Glibc)
import Glibc
#endif

/// Who may use the admin API from a browser (docs/admin-api.md, "Browsers and the admin API"):
/// the names a request's `Host` may give and the origins a page may have. Built once at start.
///
/// A web page the user opens elsewhere must not drive the mock: a cross-origin "simple" request
/// (a form POST, `text/plain`) is sent by a browser without asking first, and DNS rebinding points
/// an attacker's name at the mock so that its page counts as same-origin. Hence three checks:
/// `Origin`, when present, is the listener's own, a loopback page's or one the configuration
/// names; `Host` is a name of the mock (a rebinding page's is the attacker's); a request that
/// changes state sends JSON (which a browser sends cross-origin only after a CORS preflight).
struct AdminAccessPolicy: Sendable {
    /// The bind address, lowercased, brackets removed; `nil` when it is a wildcard.
    let listenerHost: String?
    /// Binds every interface (`0.0.0.0`, `::`): clients dial the container or machine by an
    /// address or a service name the mock cannot know.
    let bindsWildcard: Bool
    /// The machine's host name and its first label, lowercased.
    let machineNames: Set<String>
    /// `admin.allowedHosts` and the hosts of `admin.allowedOrigins`.
    let allowedHosts: Set<String>
    /// `admin.allowedHosts` has `*`.
    let anyHost: Bool
    /// `admin.allowedOrigins`, as browsers send them.
    let allowedOrigins: Set<WebOrigin>

    init(host: String = "127.0.0.1", allowedOrigins: [String] = [], allowedHosts: [String] = [], machineHostname: String? = Self.hostname()) {
        let bind = HostAndPort(host.hasPrefix("[") ? host : (host.filter { $0 == ":" }.count > 1 ? "[\(host)]" : host))?.host
            ?? host.lowercased()
        bindsWildcard = Self.isWildcard(bind)
        listenerHost = bindsWildcard ? nil : bind
        var names = Set<String>()
        if let machine = machineHostname.map({ $0.lowercased() }), !machine.isEmpty {
            names.insert(machine)
            if let label = machine.split(separator: ".").first { names.insert(String(label)) }
        }
        machineNames = names
        let origins = allowedOrigins.compactMap(WebOrigin.init)
        self.allowedOrigins = Set(origins)
        self.allowedHosts = Set(allowedHosts.filter { $0 != "*" }.map { $0.lowercased() } + origins.map(\.host))
        anyHost = allowedHosts.contains("*")
    }

    init(_ settings: AdminSettings) {
        self.init(host: settings.host, allowedOrigins: settings.allowedOrigins, allowedHosts: settings.allowedHosts)
    }

    /// Whether `host` (from a `Host` header, lowercased, without brackets) names this mock.
    func allowsHost(_ host: String) -> Bool {
        if anyHost || Self.isLoopback(host) || host == listenerHost || machineNames.contains(host) || allowedHosts.contains(host) {
            return true
        }
        // On a wildcard bind the mock answers on addresses and names it cannot list (a container's
        // IP, a compose or Kubernetes service name). DNS rebinding needs a name the attacker's
        // DNS answers for: never an address, and never a single label, which a browser resolves
        // through the local resolver only.
        return bindsWildcard && (Self.ipAddressBytes(host) != nil || !host.contains("."))
    }

    /// Whether a page of `origin` may use the API, for a request whose `Host` is `authority`.
    func allowsOrigin(_ origin: WebOrigin, authority: HostAndPort?) -> Bool {
        isSameOrigin(origin, authority: authority) || isLoopbackOrigin(origin) || allowedOrigins.contains(origin)
    }

    func isSameOrigin(_ origin: WebOrigin, authority: HostAndPort?) -> Bool {
        guard let authority else { return false }
        return origin == WebOrigin(scheme: "http", authority: authority)
    }

    func isLoopbackOrigin(_ origin: WebOrigin) -> Bool {
        (origin.scheme == "http" || origin.scheme == "https") && Self.isLoopback(origin.host)
    }

    // MARK: Names and addresses

    /// `localhost`, a name under it (RFC 6761: browsers resolve it to loopback themselves), an
    /// address of 127.0.0.0/8 or ::1 (also as an IPv4-mapped address).
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host.hasSuffix(".localhost") { return true }
        guard let bytes = ipAddressBytes(host) else { return false }
        if bytes.count == 4 { return bytes[0] == 127 }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
        return bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF && bytes[12] == 127
    }

    static func isWildcard(_ host: String) -> Bool {
        host == "*" || (ipAddressBytes(host)?.allSatisfy { $0 == 0 } ?? false)
    }

    /// The address's bytes (4 or 16), or `nil` when `host` is not an IP address literal.
    static func ipAddressBytes(_ host: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    static func hostname() -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }
}

/// The browser checks of ``AdminAccessPolicy`` on every admin request, and CORS for the pages it
/// allows from other origins. A refused request gets `403 {"error":"<check>: …"}` naming the check
/// (`host`, `origin`, `content-type`) and changes nothing. Runs before the token check: a page's
/// request is refused the same whether or not it carries the token.
struct AdminBrowserGuardMiddleware<Context: Hummingbird.RequestContext>: RouterMiddleware {
    let policy: AdminAccessPolicy

    /// Methods that change state, whose body (if any) must be JSON.
    static var changingMethods: Set<HTTPRequest.Method> { [.post, .put, .patch, .delete] }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // A change from the shared log was checked where it was received.
        if SharedReplay.applying { return try await next(request, context) }
        // The health probes and the OpenAPI document hold no data (as for the token): an
        // orchestrator's probe may give any Host.
        if request.method == .get, BearerTokenMiddleware<Context>.open.contains(request.uri.path) {
            return try await next(request, context)
        }
        // Host: the first one is the request's authority; a second one is refused rather than
        // guessed about.
        var authority: HostAndPort?
        if let host = request.head.authority {
            guard let parsed = HostAndPort(host), policy.allowsHost(parsed.host) else {
                return Self.refuse(
                    "host: \(host) is not a name of this mock (allowed: loopback names and addresses, the admin listener's address, this machine's name, admin.allowedHosts and the hosts of admin.allowedOrigins; a wildcard bind also any IP address and single-label name)")
            }
            authority = parsed
        }
        if request.headers.contains(where: { $0.name.canonicalName == "host" }) {
            return Self.refuse("host: the request has more than one Host header")
        }
        // Origin: browsers send it on every cross-origin request and on same-origin ones that are
        // not GET or HEAD.
        var crossOrigin: String?
        let origins = request.headers[values: .origin]
        if !origins.isEmpty {
            guard origins.count == 1, let origin = WebOrigin(origins[0]), policy.allowsOrigin(origin, authority: authority) else {
                return Self.refuse(
                    "origin: a page of \(origins.joined(separator: ", ")) may not use the admin API (allowed: the admin listener's own origin, loopback origins and admin.allowedOrigins)")
            }
            if !policy.isSameOrigin(origin, authority: authority) { crossOrigin = origins[0] }
        }
        // A CORS preflight from a page that may use the API.
        if request.method == .options, let crossOrigin, request.headers[.accessControlRequestMethod] != nil {
            let headers: HTTPFields = [
                .accessControlAllowOrigin: crossOrigin,
                .accessControlAllowMethods: "GET, POST, PUT, PATCH, DELETE",
                .accessControlAllowHeaders: "Authorization, Content-Type, APNS-Mock-Team, Last-Event-ID",
                .accessControlMaxAge: "600",
                .vary: "Origin",
            ]
            return Response(status: .noContent, headers: headers)
        }
        // Content type: a request that changes state and has a body (or names a type) sends JSON.
        if Self.changingMethods.contains(request.method) {
            let contentType = request.headers[.contentType]
            let length = request.headers[.contentLength]
            let hasBody = request.headers[.transferEncoding] != nil || length.map { Int($0) != 0 } ?? false
            if contentType != nil || hasBody {
                guard let contentType, Self.isJSON(contentType) else {
                    return Self.refuse(
                        "content-type: \(request.method) with a body must send Content-Type: application/json (got \(contentType ?? "none"))")
                }
            }
        }
        var response = try await next(request, context)
        if let crossOrigin {
            response.headers[.accessControlAllowOrigin] = crossOrigin
            response.headers[values: .vary] += ["Origin"]
        }
        return response
    }

    /// `application/json`, parameters allowed (`; charset=utf-8`), any case.
    static func isJSON(_ contentType: String) -> Bool {
        let mediaType = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0]
        return mediaType.trimmingCharacters(in: .whitespaces).lowercased() == "application/json"
    }

    static func refuse(_ message: String) -> Response {
        AdminAPI.error(.forbidden, message)
    }
}
