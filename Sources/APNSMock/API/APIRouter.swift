import APNSMockCore
import Logging

/// What a listener is for, which decides the APIs its requests can reach.
enum ListenerRole: Sendable, Equatable {
    /// The APNs listener: device pushes (and later broadcast sends).
    case apns
}

/// The API a request goes to.
enum Endpoint: Equatable {
    /// `POST /3/device/<token>`, and on the APNs listener any path no other API claims (answered
    /// 404 BadPath by the device API, as APNs answers unknown paths).
    case devicePush
}

/// Everything a listener's connections serve: its APIs, chosen per request by listener and
/// `:path`, the recorder that applies the mock's state to their verdicts, and that state.
///
/// A new endpoint is a case of ``Endpoint``, a line in ``endpoint(for:)`` and its API beside
/// ``DeviceAPI``; a new listener is a ``ListenerRole`` and its routes here.
struct APIRouter: Sendable {
    let role: ListenerRole
    let device: DeviceAPI
    let recorder: Recorder

    var state: MockState { recorder.state }

    init(role: ListenerRole, device: DeviceAPI, recorder: Recorder) {
        self.role = role
        self.device = device
        self.recorder = recorder
    }

    /// The routes of `role` over `state`, with the configuration's APIs.
    init(role: ListenerRole, configuration: ServerConfiguration, tokenKeys: TokenKeys, state: MockState, logger: Logger) {
        self.init(
            role: role, device: DeviceAPI(configuration: configuration, tokenKeys: tokenKeys),
            recorder: Recorder(state: state, logger: logger))
    }

    /// The API for a request on this listener.
    func endpoint(for path: String?) -> Endpoint {
        switch role {
        case .apns:
            return .devicePush
        }
    }
}
