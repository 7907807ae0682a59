import APNSMockCore
import Hummingbird
import NIOCore

/// The admin API's OpenAPI 3.1 document (Admin/openapi.json, compiled into the binary), served at
/// `GET /v1/openapi.json`. It is the contract: AdminAPIContractTests fails when a route exists
/// that it lacks or the reverse, and scripts/openapi checks the live server's answers against it.
enum OpenAPIDocument {
    static let bytes: [UInt8] = PackageResources.openapi_json

    /// One operation: its method and its path template as the document writes it
    /// (`/v1/devices/{token}`).
    struct Route: Hashable, Sendable, CustomStringConvertible {
        var method: String
        var path: String
        var description: String { "\(method) \(path)" }
    }

    /// Every operation the document describes.
    static let routes: [Route] = {
        guard let document = try? JSONValue.parse(bytes), let paths = document["paths"]?.members else { return [] }
        let methods: Set<String> = ["get", "put", "post", "delete", "patch", "head", "options"]
        return paths.flatMap { path in
            (path.value.members ?? []).filter { methods.contains($0.key) }.map { Route(method: $0.key.uppercased(), path: path.key) }
        }
    }()

    /// The methods the document allows on `path`, which no route may have matched: for a 405's
    /// `Allow`.
    static func methods(for path: String) -> [String] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        return routes.filter { route in
            let template = route.path.split(separator: "/", omittingEmptySubsequences: false)
            return template.count == segments.count && zip(template, segments).allSatisfy(matches)
        }.map(\.method).sorted()
    }

    /// Whether one path segment fits one template segment: literal, or `{name}` with whatever
    /// literal text stands around it (`{seq}.apns`).
    private static func matches(_ template: Substring, _ segment: Substring) -> Bool {
        guard let open = template.firstIndex(of: "{"), let close = template.firstIndex(of: "}") else {
            return template == segment
        }
        let prefix = template[..<open], suffix = template[template.index(after: close)...]
        return segment.count > prefix.count + suffix.count && segment.hasPrefix(prefix) && segment.hasSuffix(suffix)
    }
}

/// The admin API's errors in its one shape, `{"error":"<field>: …"}`, also for what Hummingbird
/// answers itself: a path no route has (404, or 405 with `Allow` when the path exists for other
/// methods), a body past ``AdminAPI/bodyLimit`` (413), a request it cannot read (400).
struct AdminErrorMiddleware<Context: Hummingbird.RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError {
            return Self.response(status: error.status, message: error.body, request: request)
        } catch is NIOTooManyBytesError {
            return Self.response(status: .contentTooLarge, message: nil, request: request)
        } catch let error as any HTTPResponseError {
            return Self.response(status: error.status, message: nil, request: request)
        }
    }

    static func response(status: HTTPResponse.Status, message: String?, request: Request) -> Response {
        let path = request.uri.path
        switch status {
        case .notFound:
            let allowed = OpenAPIDocument.methods(for: path)
            if !allowed.isEmpty {
                var response = AdminAPI.error(
                    .methodNotAllowed, "method: \(request.method) is not allowed on \(path) (allowed: \(allowed.joined(separator: ", ")))")
                response.headers[.allow] = allowed.joined(separator: ", ")
                return response
            }
            return AdminAPI.error(.notFound, "path: no endpoint \(path) (the API is described at /v1/openapi.json)")
        case .contentTooLarge:
            return AdminAPI.error(.contentTooLarge, "body: larger than \(AdminAPI.bodyLimit) bytes, the most an admin request may send")
        default:
            return AdminAPI.error(status, "request: \(message ?? status.reasonPhrase)")
        }
    }
}
