import APNSMockCore
import Logging

/// Applies the mock's state to a decided request and keeps what happened: the rate limiter and the
/// fault rules may change the verdict, then the outcome is counted, recorded and logged. The one
/// place where a request touches shared state, after deciding (``DeviceAPI``) is done.
struct Recorder: Sendable {
    let state: MockState
    let logger: Logger

    /// The device push's final answer.
    func conclude(
        _ verdict: DeviceVerdict, request: borrowing PushRequest, streamID: Int32, context: ConnectionContext,
        connection: inout ConnectionState
    ) -> Answer {
        var response = verdict.response
        var decision = verdict.decision
        if state.isRateLimited, decision.isAccepted {
            let checked = decision
            decision = state.rateLimiter.withLock { limiter in limiter?.apply(to: checked) ?? checked }
            if let rejection = decision.rejection {
                response = .rejected(rejection, apnsID: response.apnsID)
            }
        }

        var answer = Answer(response: response.http2)
        var injected = false
        var action: FaultRule.Action?
        if let rule = state.faults.apply(to: request, decision: decision) {
            injected = true
            answer.delayMs = rule.delayMs
            if let ruleAction = rule.action {
                action = ruleAction
                answer.response = nil
                switch ruleAction {
                case .reset: answer.action = .resetStream
                case .close: answer.action = .close
                case .goaway: answer.action = .goAway(debugData: ErrorBody.bytes(for: rule.respond?.reason ?? .shutdown))
                }
            } else if var rejection = rule.respond {
                if rejection.reason.carriesTimestamp, rejection.timestamp == nil {
                    rejection.timestamp = Clock.nowMilliseconds()
                }
                response = .rejected(rejection, apnsID: response.apnsID)
                answer.response = response.http2
            }
        }

        let status = answer.response == nil ? nil : response.status
        let rejection = answer.response == nil ? nil : response.rejection
        connection.auth.noteAnswered(rejection?.reason)
        state.statistics.count(status: status, rejection: rejection, action: action)
        if let rejection {
            logger.info(
                "rejected request",
                metadata: [
                    "connection": "\(context.connectionID)",
                    "stream": "\(streamID)",
                    "apns-id": "\(response.apnsIDText)",
                    "status": "\(rejection.status)",
                    "reason": "\(rejection.wireReason)",
                ])
        }
        if state.records.isEnabled {
            let receivedAt = connection.readTime()
            let shape = connection.recordShape(
                for: request, decision: decision, environment: verdict.environment, auth: verdict.auth,
                connectionID: context.connectionID)
            let path = request.path, apnsIDHeader = request.apnsID, apnsID = response.apnsID
            let uniqueID = answer.response == nil ? nil : response.uniqueID
            let injected = injected, action = action
            state.records.append { seq in
                RawRecord(
                    seq: seq, receivedAt: receivedAt, shape: shape, path: path, apnsIDHeader: apnsIDHeader,
                    apnsID: apnsID, uniqueID: uniqueID, status: status, rejection: rejection, injected: injected,
                    action: action, streamID: streamID)
            }
        }
        return answer
    }
}

extension ConnectionState {
    /// The last record's shape if `request` fits it, else a new one (kept for the next record).
    mutating func recordShape(
        for request: borrowing PushRequest, decision: Decision, environment: APNSEnvironment, auth: AuthSummary,
        connectionID: UInt64
    ) -> RequestShape {
        if let shape = recordShape,
           shape.matches(request, accepted: decision.isAccepted, environment: environment, auth: auth) {
            return shape
        }
        let shape = RequestShape(
            copy request, accepted: decision.acceptedPush, environment: environment, auth: auth,
            connectionID: connectionID)
        recordShape = shape
        return shape
    }
}
