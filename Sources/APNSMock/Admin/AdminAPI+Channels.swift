import APNSMockCore
import Foundation
import Hummingbird

/// `/v1/channels`: the broadcast channels of every app and environment, for tests that need a
/// channel without going through channel management, or want to see what a client created.
extension AdminAPI {
    func addChannelRoutes(to router: Router<Context>) {
        let api = self
        router.get("/v1/channels") { request, _ in await api.scoped(request) { api.listChannels(request, scope: $0) } }
        router.post("/v1/channels") { request, _ in try await api.scoped(request) { try await api.addChannel(request, scope: $0) } }
        router.delete("/v1/channels/:channelId") { request, context in
            // Standard base64 may hold `/`: a client sends it percent-encoded.
            let raw = context.parameters.get("channelId") ?? ""
            return await api.scoped(request) { api.removeChannel(raw.removingPercentEncoding ?? raw, scope: $0) }
        }
    }

    /// A team's channels are those of its apps.
    func listChannels(_ request: Request, scope: Scope) -> Response {
        var bundleID: String?
        var environment: APNSEnvironment?
        for (key, value) in request.uri.queryParameters {
            switch String(key) {
            case "bundleId":
                bundleID = String(value)
            case "team":
                continue
            case "environment":
                guard let parsed = APNSEnvironment(rawValue: String(value)) else {
                    return Self.error(.badRequest, "environment: \"\(value)\" is not sandbox or production")
                }
                environment = parsed
            default:
                return Self.error(.badRequest, "\(key): unknown query parameter (expected bundleId, environment, team)")
            }
        }
        let channels = state.channels.current.all.filter { channel in
            (bundleID == nil || channel.bundleID == bundleID) && (environment == nil || channel.environment == environment)
                && (scope.space?.apps.contains(channel.bundleID) ?? true)
        }
        return Self.json(.ok, ChannelList(channels: channels.map(ChannelView.init)))
    }

    func addChannel(_ request: Request, scope: Scope) async throws -> Response {
        let body: JSONValue
        switch try await Self.jsonBody(request) {
        case .failure(let error): return Self.error(.badRequest, error.message)
        case .success(let value): body = value
        }
        let fields: (bundleID: String, environment: APNSEnvironment, id: String?, storagePolicy: MessageStoragePolicy)
        do {
            fields = try BroadcastChannel.decode(
                json: body, knownApps: knownApps(in: scope), appsOwner: scope.space.map { "team \($0.teamID)" })
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

    func removeChannel(_ id: String, scope: Scope) -> Response {
        if let space = scope.space {
            guard let channel = state.channels.current.all.first(where: { $0.id == id }), space.apps.contains(channel.bundleID) else {
                return Self.error(.notFound, "channelId: no channel with this ID among team \(space.teamID)'s apps")
            }
        }
        return state.channels.delete(id: id) == nil
            ? Self.error(.notFound, "channelId: no channel with this ID") : Response(status: .noContent)
    }
}
