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
        let accepted = decision.acceptedPush
        if let rule = faults.apply(to: request, accepted: accepted) {
            injected = true
            answer = Self.answer(for: rule, replacing: response)
        }
        let status = answer.response?.status
        let rejection = answer.response?.rejection
        statistics.count(status: status, rejection: rejection, action: answer.action)
        if records.isEnabled {
            records.append(RawRecord(
                receivedAt: Self.nowMilliseconds(), request: recordable(request, state: &state), accepted: accepted,
                environment: environment, auth: auth, apnsID: response.apnsID,
                uniqueID: answer.response?.uniqueID, status: status, rejection: rejection, injected: injected,
                action: answer.action, connectionID: connection.connectionID, streamID: streamID))
        }
        return answer
    }

    /// The request as a record keeps it: without `authorization`, and with body and extra headers
    /// that share storage with the previous record of the connection when they repeat, so that a
    /// load test's identical payloads cost one comparison, not one copy, per record. The stream's
    /// own buffers are never shared with a record, so recycling them costs no copy either.
    func recordable(_ request: PushRequest, state: inout ConnectionState) -> PushRequest {
        var recorded = request
        recorded.authorization = nil
        if !request.body.hasSameBytes(as: state.recordedBody) {
            state.recordedBody = Array(request.body)
        }
        recorded.body = state.recordedBody
        if !Self.sameHeaders(request.otherHeaders, state.recordedOtherHeaders) {
            state.recordedOtherHeaders = Array(request.otherHeaders)
        }
        recorded.otherHeaders = state.recordedOtherHeaders
        return recorded
    }

    /// Strings a connection repeats are the same objects, so `==` usually settles on identity.
    private static func sameHeaders(_ a: [(name: String, value: String)], _ b: [(name: String, value: String)]) -> Bool {
        guard a.count == b.count else { return false }
        for index in a.indices where a[index].name != b[index].name || a[index].value != b[index].value {
            return false
        }
        return true
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
