import APNSMockCore
import Logging

/// What a listener is for, which decides the APIs its requests can reach.
enum ListenerRole: Sendable, Equatable {
    /// The APNs listener: device pushes and broadcasts.
    case apns
    /// A channel-management listener; each serves one environment, as Apple's
    /// `api-manage-broadcast[.sandbox].push.apple.com` do.
    case channelManagement(APNSEnvironment)
}

/// The API a request goes to.
enum Endpoint: Equatable {
    /// `POST /3/device/<token>`, and on the APNs listener any path no other API claims (answered
    /// 404 BadPath by the device API, as APNs answers unknown paths).
    case devicePush
    /// `POST /4/broadcasts/apps/<bundle>` (any path under `/4/broadcasts/`).
    case broadcast
    /// Every request on a channel-management listener, in its environment.
    case channelManagement(APNSEnvironment)
}

/// Everything a listener's connections serve: its APIs, chosen per request by listener and
/// `:path`, the recorder that applies the mock's state to their verdicts, and that state.
///
/// A new endpoint is a case of ``Endpoint``, a line in ``endpoint(for:)``, its API beside
/// ``DeviceAPI`` and a case in ``APNSConnection``'s dispatch; a new listener is a ``ListenerRole``
/// and its routes here.
struct APIRouter: Sendable {
    private(set) var role: ListenerRole
    let device: DeviceAPI
    let broadcast: BroadcastAPI
    let channels: ChannelAPI
    let recorder: Recorder

    var state: MockState { recorder.state }

    /// The routes of `role` over `state`, with the configuration's APIs sharing one authenticator.
    init(role: ListenerRole, configuration: ServerConfiguration, tokenKeys: TokenKeys, state: MockState, logger: Logger) {
        let authenticator = Authenticator(
            keys: tokenKeys, settings: configuration.validation, tokenUpdateInterval: configuration.tokenUpdateInterval,
            fallbackTopics: configuration.allowedTopics, narrowsTopics: configuration.allowedTopics != .any,
            clock: state.clock, tokens: state.tokens)
        self.role = role
        device = DeviceAPI(configuration: configuration, authenticator: authenticator)
        broadcast = BroadcastAPI(configuration: configuration, authenticator: authenticator)
        channels = ChannelAPI(configuration: configuration, authenticator: authenticator)
        recorder = Recorder(state: state, logger: logger)
    }

    /// The API for a request on this listener.
    func endpoint(for path: String?) -> Endpoint {
        switch role {
        case .apns:
            if let path, BroadcastPath.isBroadcast(path) { return .broadcast }
            return .devicePush
        case .channelManagement(let environment):
            return .channelManagement(environment)
        }
    }

    /// The routes of the same APIs for another listener.
    func serving(_ role: ListenerRole) -> APIRouter {
        var router = self
        router.role = role
        return router
    }
}
