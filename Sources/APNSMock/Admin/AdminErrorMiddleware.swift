import Hummingbird
import NIOCore

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
