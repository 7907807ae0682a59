import APNSMockCore
import Hummingbird

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
