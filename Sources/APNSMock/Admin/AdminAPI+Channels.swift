import APNSMockCore
import Foundation
import Hummingbird

/// `/v1/channels`: the broadcast channels of every app and environment, for tests that need a
/// channel without going through channel management, or want to see what a client created.
extension AdminAPI {
    func addChannelRoutes(to router: Router<Context>) {
        let api = self
        router.get("/v1/channels") { request, _ in api.listChannels(request) }
        router.post("/v1/channels") { request, _ in try await api.addChannel(request) }
        router.delete("/v1/channels/:channelId") { _, context in
            // Standard base64 may hold `/`: a client sends it percent-encoded.
            let raw = context.parameters.get("channelId") ?? ""
            return api.removeChannel(raw.removingPercentEncoding ?? raw)
        }
    }

    func listChannels(_ request: Request) -> Response {
        var bundleID: String?
        var environment: APNSEnvironment?
        for (key, value) in request.uri.queryParameters {
            switch String(key) {
            case "bundleId":
                bundleID = String(value)
            case "environment":
                guard let parsed = APNSEnvironment(rawValue: String(value)) else {
                    return Self.error(.badRequest, "environment: \"\(value)\" is not sandbox or production")
                }
                environment = parsed
            default:
                return Self.error(.badRequest, "\(key): unknown query parameter (expected bundleId, environment)")
            }
        }
        let channels = state.channels.current.all.filter { channel in
            (bundleID == nil || channel.bundleID == bundleID) && (environment == nil || channel.environment == environment)
        }
        return Self.json(.ok, ChannelList(channels: channels.map(ChannelView.init)))
    }

    func addChannel(_ request: Request) async throws -> Response {
        let body: JSONValue
        switch try await Self.jsonBody(request) {
        case .failure(let error): return Self.error(.badRequest, error.message)
        case .success(let value): body = value
        }
        let fields: (bundleID: String, environment: APNSEnvironment, id: String?, storagePolicy: MessageStoragePolicy)
        do {
            fields = try BroadcastChannel.decode(json: body, knownApps: knownApps)
        } catch {
            return Self.error(.badRequest, error.description)
        }
        switch state.channels.create(
            bundleID: fields.bundleID, environment: fields.environment, policy: fields.storagePolicy, id: fields.id)
        {
        case .success(let channel):
            return Self.json(.created, ChannelView(channel))
        case .failure(.duplicate):
            return Self.error(.conflict, "channelId: a channel with this ID exists")
        case .failure(.limitReached):
            return Self.error(
                .conflict, "bundleId: \(fields.bundleID) has broadcast.channelLimit (\(state.channels.settings.channelLimit)) channels in \(fields.environment.rawValue)")
        }
    }

    func removeChannel(_ id: String) -> Response {
        state.channels.delete(id: id) == nil
            ? Self.error(.notFound, "channelId: no channel with this ID") : Response(status: .noContent)
    }
}
