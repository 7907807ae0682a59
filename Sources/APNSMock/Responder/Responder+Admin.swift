import APNSMockCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the connection does with a request: answer it (perhaps late), or act on the connection
/// instead because a fault rule said so.
struct Answer {
    /// `nil` when ``action`` replaces the response.
    var response: APNSResponse?
    var action: FaultRule.Action?
    /// The GOAWAY debug data's reason for ``FaultRule/Action/goaway``.
    var goAwayReason: Reason = .shutdown
    /// Answer or act after this many milliseconds, from an event-loop timer.
    var delayMs: Int = 0
}

// Fault injection, recording and counting: kept apart from deciding (Responder.swift) so that
// deciding stays a pure function of the request and the configuration.
extension Responder {
    /// Applies the first firing fault rule to the decided `response`, counts the outcome and
    /// records the request.
    func conclude(
        _ request: PushRequest, decision: Decision, response: APNSResponse, environment: APNSEnvironment,
        auth: AuthSummary, streamID: Int32, connection: ConnectionContext, state: inout ConnectionState
    ) -> Answer {
        var answer = Answer(response: response)
        var injected = false
        if let rule = faults.apply(to: request, decision: decision) {
            injected = true
            answer = Self.answer(for: rule, replacing: response)
        }
        let status = answer.response?.status
        let rejection = answer.response?.rejection
        state.auth.noteAnswered(rejection?.reason)
        statistics.count(status: status, rejection: rejection, action: answer.action)
        if records.isEnabled {
            let receivedAt = state.readTime()
            let shape = state.recordShape(
                for: request, decision: decision, environment: environment, auth: auth,
                connectionID: connection.connectionID)
            let uniqueID = answer.response?.uniqueID, action = answer.action, injected = injected
            records.append { seq in
                RawRecord(
                    seq: seq, receivedAt: receivedAt, shape: shape, path: request.path, apnsIDHeader: request.apnsID,
                    apnsID: response.apnsID, uniqueID: uniqueID, status: status, rejection: rejection,
                    injected: injected, action: action, streamID: streamID)
            }
        }
        return answer
    }

    private static func answer(for rule: FaultRule, replacing response: APNSResponse) -> Answer {
        var answer = Answer(response: response, delayMs: rule.delayMs)
        if let action = rule.action {
            answer.response = nil
            answer.action = action
            answer.goAwayReason = rule.respond?.reason ?? .shutdown
        } else if var rejection = rule.respond {
            if rejection.reason.carriesTimestamp, rejection.timestamp == nil {
                rejection.timestamp = nowMilliseconds()
            }
            answer.response = .rejected(rejection, apnsID: response.apnsID)
        }
        return answer
    }

    /// Wall-clock milliseconds: one `clock_gettime`, no Foundation on the request path.
    static func nowMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}
