import APNSMockCore
import Logging

/// What a listener is for, which decides the APIs its requests can reach.
enum ListenerRole: Sendable, Equatable, CaseIterable {
    /// The APNs listener: device pushes and broadcasts.
    case apns
    /// A channel-management listener; each serves one environment, as Apple's
    /// `api-manage-broadcast[.sandbox].push.apple.com` do.
    case channelManagement(APNSEnvironment)

    static let allCases: [ListenerRole] = [.apns] + APNSEnvironment.allCases.map { .channelManagement($0) }
}

/// One API of the mock, end to end for one request: the request's ``Effects``, which the
/// connection carries out. Every API of the mock is a ``DecidingAPI``, which only decides (a
/// ``Verdict`` that depends only on the request, the connection's context and own state and the
/// configuration) and leaves the rest to the one ``Pipeline``: the ``Policy``, the verdict's
/// ``StoreChange``, the ``Recorder``.
///
/// A new endpoint is a ``DecidingAPI`` with its ``Verdict`` and one row of ``Routes/table``. APIs are classes
/// (immutable once built), so that reaching one through its route costs a retain rather than a
/// copy of the whole existential.
protocol RequestAPI: AnyObject, Sendable {
    func answer(
        _ request: borrowing PushRequest, stream: RequestStream, context: ConnectionContext,
        connection: inout ConnectionMemo
    ) -> Effects
}

/// Which requests of a listener a route takes, by `:path`.
enum PathPattern: Sendable {
    /// Paths that start with these bytes.
    case prefix(StaticString)
    /// Every path no other route of the listener takes, and a request without `:path`.
    case otherwise

    func matches(_ path: String?) -> Bool {
        switch self {
        case .otherwise: true
        case .prefix(let prefix): path?.hasUTF8Prefix(prefix) ?? false
        }
    }
}

/// The mock's routing table, listener role × `:path` → API, and the stages its APIs share: one
/// authenticator (tokens seen on one listener count on all) and one ``Pipeline`` over the mock's
/// ``MockState``.
struct Routes: Sendable {
    struct Route: Sendable {
        var role: ListenerRole
        var path: PathPattern
        var api: any RequestAPI
    }

    /// Every route, in the order a listener tries its own.
    let table: [Route]
    let state: MockState
    /// The device API's validator, which the admin API's record rendering shares.
    let validator: Validator

    init(configuration: ServerConfiguration, state: MockState, logger: Logger) {
        let authenticator = Authenticator(
            teams: state.teams, settings: configuration.validation, tokenUpdateInterval: configuration.tokenUpdateInterval,
            fallbackTopics: configuration.allowedTopics, narrowsTopics: configuration.allowedTopics != .any)
        let pipeline = Pipeline(
            policy: Policy(
                state: state, shrinksStreamsAfterRejection: configuration.shrinkStreamsAfterRejection,
                magicDeviceTokens: configuration.magicDeviceTokens),
            recorder: Recorder(state: state, logger: logger))
        let device = DeviceAPI(configuration: configuration, authenticator: authenticator, pipeline: pipeline)
        let broadcast = BroadcastAPI(configuration: configuration, authenticator: authenticator, pipeline: pipeline)
        self.state = state
        validator = device.validator
        table = [
            // `POST /4/broadcasts/apps/<bundle>`; the broadcast API answers BadPath for the rest of
            // a wrong path under `/4/broadcasts/`.
            Route(role: .apns, path: .prefix(BroadcastPath.prefix), api: broadcast),
            // `POST /3/device/<token>`, and any path no other API claims: the device API answers it
            // 404 BadPath, as APNs answers unknown paths.
            Route(role: .apns, path: .otherwise, api: device),
        ] + APNSEnvironment.allCases.map { environment in
            // `/1/apps/<bundle>/channels` and `/1/apps/<bundle>/all-channels`; the channel API
            // answers BadPath for any other path.
            Route(
                role: .channelManagement(environment), path: .otherwise,
                api: ChannelAPI(
                    environment: environment, configuration: configuration, authenticator: authenticator,
                    pipeline: pipeline))
        }
    }

    /// The routes of one listener, as its connections dispatch through them.
    func serving(_ role: ListenerRole) -> ListenerRoutes {
        ListenerRoutes(role: role, routes: table.filter { $0.role == role }, state: state)
    }
}

/// The routes of one listener: each request goes to the API of the first route whose path pattern
/// takes its `:path`.
struct ListenerRoutes: Sendable {
    let role: ListenerRole
    let routes: [Routes.Route]
    let state: MockState

    /// The answer of the API whose route takes the request, or ``Effects/unrouted`` when no route
    /// of the listener takes it (every listener of ``Routes/table`` ends with an `otherwise` route,
    /// so a request always finds one). The API is called in place: returning it as an existential
    /// copied (retained and released) it per request. Not optional: an `Effects?` is destroyed
    /// through Optional's generic value witness, about 125 instructions per request.
    func answer(
        _ request: borrowing PushRequest, stream: RequestStream, context: ConnectionContext,
        connection: inout ConnectionMemo
    ) -> Effects {
        guard let index = routeIndex(for: request.path) else { return .unrouted }
        return routes[index].api.answer(request, stream: stream, context: context, connection: &connection)
    }

    /// The first route that takes a request with this `:path`.
    func routeIndex(for path: String?) -> Int? {
        for index in routes.indices where routes[index].path.matches(path) {
            return index
        }
        return nil
    }
}
