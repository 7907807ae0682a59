import APNSMockCore
import Logging

/// What a request's connection contributes to deciding it.
struct ConnectionContext: Sendable {
    var connectionID: UInt64
    /// The environment named by the TLS SNI host, if it was one of Apple's.
    var sniEnvironment: APNSEnvironment?
}

/// Decides every request: validation, then the response that goes with the verdict.
///
/// Shared by all connections on all event loops; it holds only immutable configuration, so the
/// request path takes no lock here.
final class Responder: Sendable {
    let validator: Validator
    let defaultEnvironment: APNSEnvironment
    let logger: Logger

    init(validator: Validator, defaultEnvironment: APNSEnvironment, logger: Logger) {
        self.validator = validator
        self.defaultEnvironment = defaultEnvironment
        self.logger = logger
    }

    /// The environment of one request: the `:authority` the client addressed, else the TLS SNI
    /// host, else the server's default (apns-behavior.md section 8).
    func environment(of request: PushRequest, connection: ConnectionContext) -> APNSEnvironment {
        if let authority = request.authority, let environment = APNSEnvironment(host: authority) {
            return environment
        }
        return connection.sniEnvironment ?? defaultEnvironment
    }

    func respond(
        to request: PushRequest,
        streamID: Int32,
        connection: ConnectionContext,
        random: inout FastRandom
    ) -> APNSResponse {
        let environment = environment(of: request, connection: connection)
        let decision = validator.validate(request, context: RequestContext(environment: environment))
        let apnsID: APNSResponse.RequestID
        if let sent = request.apnsID, RequestIDFormat.isCanonical(sent) {
            apnsID = .echoed(sent)
        } else {
            apnsID = .generated(UUIDValue.random(using: &random))
        }
        switch decision {
        case .accepted:
            let uniqueID = environment == .sandbox ? UUIDValue.random(using: &random) : nil
            return .accepted(apnsID: apnsID, uniqueID: uniqueID)
        case .rejected(let rejection):
            let response = APNSResponse.rejected(rejection, apnsID: apnsID)
            logger.info(
                "rejected request",
                metadata: [
                    "connection": "\(connection.connectionID)",
                    "stream": "\(streamID)",
                    "apns-id": "\(response.apnsIDText)",
                    "status": "\(rejection.status)",
                    "reason": "\(rejection.wireReason)",
                ])
            return response
        }
    }
}

/// The canonical 8-4-4-4-12 UUID text APNs accepts in `apns-id`, either case.
enum RequestIDFormat {
    static func isCanonical(_ text: String) -> Bool {
        var count = 0
        for byte in text.utf8 {
            switch count {
            case 8, 13, 18, 23:
                guard byte == UInt8(ascii: "-") else { return false }
            default:
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
                     UInt8(ascii: "A")...UInt8(ascii: "F"):
                    break
                default:
                    return false
                }
            }
            count += 1
            if count > 36 { return false }
        }
        return count == 36
    }
}
