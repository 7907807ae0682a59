import APNSMockCore
import Logging

/// The last stage of the request path: keeps what happened to a request whose ``Effects`` the
/// ``Policy`` stage settled. It counts the outcome, logs a rejection and appends the record; it
/// changes nothing that deciding or the policy reads.
struct Recorder: Sendable {
    let state: MockState
    let logger: Logger

    /// A device push. Returns the record's sequence number (0: recording is off).
    func recordDevice(
        _ verdict: borrowing DeviceVerdict, actions: Effects.Actions, request: borrowing PushRequest, stream: RequestStream,
        context: ConnectionContext, connection: inout ConnectionState
    ) -> UInt64 {
        let answered = actions.answers
        let status = answered ? verdict.response.status : nil
        let rejection = answered ? verdict.response.rejection : nil
        let action = actions.fault?.name
        note(status: status, rejection: rejection, action: action, kind: .device, id: verdict.response.apnsIDText,
             streamID: stream.id, context: context)
        guard state.records.isEnabled else { return 0 }
        let receivedAt = connection.readTime()
        let decision = verdict.decision
        let shape = connection.shapes.device(
            for: request, accepted: decision.isAccepted, lint: decision.acceptedLint,
            interpreted: {
                decision.acceptedPush.map {
                    RawRecord.Interpreted(
                        priority: $0.priority, expiration: $0.expiration, pushType: $0.pushType, topic: $0.topic,
                        lint: $0.lint)
                }
            },
            environment: verdict.environment, auth: verdict.auth, connectionID: UInt64(context.connectionNumber))
        let path = request.path.registerCopy(), apnsIDHeader = request.apnsID.registerCopy()
        let apnsID = verdict.response.apnsID
        let uniqueID = answered ? verdict.response.uniqueID : nil
        let injected = actions.faultMatched, streamID = stream.id
        let written = actions.writtenAtOnce(streamOpen: stream.isOpen), offset = state.clock.offsetSeconds
        return state.records.append { seq in
            RawRecord(
                seq: seq, receivedAt: receivedAt, shape: shape, path: path, apnsIDHeader: apnsIDHeader,
                apnsID: apnsID, uniqueID: uniqueID, status: status, rejection: rejection, injected: injected,
                action: action, streamID: streamID, responseWritten: written, clockOffset: offset)
        }
    }

    /// What a broadcast-side record says beyond the request and its response.
    struct BroadcastSide {
        var kind: RecordKind
        var bundleID: String?
        var channelID: String?
        var operation: ChannelOperation?
        /// An accepted broadcast's interpretation (none for channel management).
        var interpreted: RawRecord.Interpreted?
        var environment: APNSEnvironment
        var auth: AuthSummary
    }

    /// A broadcast or a channel-management request, answered `response` (unless the effects
    /// replace the answer). Returns the record's sequence number (0: recording is off).
    func recordBroadcastSide(
        _ side: BroadcastSide, response: BroadcastResponse, actions: Effects.Actions, request: borrowing PushRequest,
        stream: RequestStream, context: ConnectionContext, connection: inout ConnectionState
    ) -> UInt64 {
        let answered = actions.answers
        let status = answered ? response.status : nil
        let rejection = answered ? response.rejection : nil
        let action = actions.fault?.name
        state.statistics.count(kind: side.kind)
        note(status: status, rejection: rejection, action: action, kind: side.kind,
             id: response.requestID.text(uppercase: false), streamID: stream.id, context: context)
        guard state.records.isEnabled else { return 0 }
        let receivedAt = connection.readTime()
        let shape = connection.shapes.broadcastSide(
            for: request, interpreted: side.interpreted, environment: side.environment, auth: side.auth,
            connectionID: UInt64(context.connectionNumber))
        let path = request.path.registerCopy(), apnsIDHeader = request.apnsID.registerCopy()
        let requestID = response.requestID
        let uniqueID = answered ? response.uniqueID : nil
        let details = connection.shapes.broadcastDetails(
            kind: side.kind, bundleID: side.bundleID, channelID: side.channelID, operation: side.operation)
        let injected = actions.faultMatched, streamID = stream.id
        let written = actions.writtenAtOnce(streamOpen: stream.isOpen), offset = state.clock.offsetSeconds
        return state.records.append { seq in
            RawRecord(
                seq: seq, receivedAt: receivedAt, shape: shape, path: path, apnsIDHeader: apnsIDHeader,
                apnsID: requestID, uniqueID: uniqueID, status: status, rejection: rejection, injected: injected,
                action: action, streamID: streamID, broadcast: details, responseWritten: written, clockOffset: offset)
        }
    }

    /// Counts the outcome and logs a rejection at debug level: a load test of bad tokens must not
    /// write a line per request (``RejectionSummaryService`` says at info level, every ten seconds,
    /// how many were rejected and why).
    private func note(
        status: Int?, rejection: Rejection?, action: FaultRule.Action.Name?, kind: RecordKind, id: @autoclosure () -> String,
        streamID: Int32, context: ConnectionContext
    ) {
        state.statistics.count(status: status, rejection: rejection, action: action)
        if let rejection, logger.logLevel <= .debug {
            logger.debug(
                "rejected request",
                metadata: [
                    "connection": "\(context.connectionNumber)",
                    "stream": "\(streamID)",
                    kind == .device ? "apns-id" : "apns-request-id": "\(id())",
                    "status": "\(rejection.status)",
                    "reason": "\(rejection.wireReason)",
                ])
        }
    }
}
