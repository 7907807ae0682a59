import APNSMockCore
import Logging

/// The last stage of the request path: keeps what happened to a request whose ``Effects`` the
/// ``Policy`` stage settled. It counts the outcome, logs a rejection and appends the record; it
/// changes nothing that deciding or the policy reads. One path for every API: what differs (the
/// record's shape, a broadcast-side record's details) the ``Verdict`` says.
struct Recorder: Sendable {
    let state: MockState
    let logger: Logger

    /// Keeps one request of `team` (its namespace, counted there too), answered `verdict`'s answer
    /// unless `actions` replace it. Returns the record's sequence number (0: recording is off).
    func record<V: Verdict>(
        _ verdict: V, actions: Effects.Actions, request: borrowing PushRequest, stream: RequestStream,
        context: ConnectionContext, team: Unmanaged<TeamSpace>?, connection: inout ConnectionMemo
    ) -> UInt64 {
        let outcome = tally(verdict, actions: actions, stream: stream, context: context, team: team)
        guard state.recording.isEnabled else { return 0 }
        let received = read(verdict, request: request, context: context, connection: &connection)
        return keep(verdict, outcome: outcome, received: received, actions: actions, stream: stream, team: team, connection: &connection)
    }

    /// What a record takes from the request itself, read while the connection lends it to the
    /// pipeline: for a request that waits for its fault rule's claim (``Pipeline``), before the
    /// wait, and kept with the rest once the answer is settled.
    struct Received: Sendable {
        let receivedAt: Int64
        let shape: RequestShape
        let path: String?
        let apnsIDHeader: String?
    }

    /// What the record of `verdict`'s request takes from the request (``Received``); `nil` when
    /// recording is off.
    func received<V: Verdict>(
        _ verdict: V, request: borrowing PushRequest, context: ConnectionContext, connection: inout ConnectionMemo
    ) -> Received? {
        guard state.recording.isEnabled else { return nil }
        return read(verdict, request: request, context: context, connection: &connection)
    }

    /// ``record(_:actions:request:stream:context:team:connection:)`` for a request whose
    /// ``Received`` was read before it waited (`nil`: recording is off).
    func record<V: Verdict>(
        _ verdict: V, received: Received?, actions: Effects.Actions, stream: RequestStream, context: ConnectionContext,
        team: Unmanaged<TeamSpace>?, connection: inout ConnectionMemo
    ) -> UInt64 {
        let outcome = tally(verdict, actions: actions, stream: stream, context: context, team: team)
        guard let received else { return 0 }
        return keep(verdict, outcome: outcome, received: received, actions: actions, stream: stream, team: team, connection: &connection)
    }

    /// What was answered, as counted and recorded.
    private typealias Outcome = (status: Int?, rejection: Rejection?, action: FaultRule.Action.Name?)

    /// Counts the request's outcome and logs a rejection.
    @inline(__always)
    private func tally<V: Verdict>(
        _ verdict: V, actions: Effects.Actions, stream: RequestStream, context: ConnectionContext, team: Unmanaged<TeamSpace>?
    ) -> Outcome {
        let answered = actions.answers
        let status = answered ? verdict.status : nil
        let rejection = answered ? verdict.rejection : nil
        let action = actions.actionName
        count(kind: V.kind)
        note(status: status, rejection: rejection, action: action, kind: V.kind, team: team,
             id: verdict.answerID.text(uppercase: V.kind == .device), streamID: stream.id, context: context)
        return (status, rejection, action)
    }

    /// Reads the request's part of its record (``Received``).
    @inline(__always)
    private func read<V: Verdict>(
        _ verdict: V, request: borrowing PushRequest, context: ConnectionContext, connection: inout ConnectionMemo
    ) -> Received {
        let receivedAt = connection.readTime()
        let shape = verdict.shape(for: request, shapes: &connection.shapes, connectionID: UInt64(context.connectionNumber))
        // `registerCopy()`: each `String?` copied out of the request is one retain through it
        // (docs/speed-idioms.md), not a trip through Optional's generic value witness.
        return Received(
            receivedAt: receivedAt, shape: shape, path: request.path.registerCopy(),
            apnsIDHeader: request.apnsID.registerCopy())
    }

    /// Appends the record.
    @inline(__always)
    private func keep<V: Verdict>(
        _ verdict: V, outcome: Outcome, received: Received, actions: Effects.Actions, stream: RequestStream,
        team: Unmanaged<TeamSpace>?, connection: inout ConnectionMemo
    ) -> UInt64 {
        let answerID = verdict.answerID
        let uniqueID = actions.answers ? verdict.uniqueID : nil
        let details = verdict.details(shapes: &connection.shapes)
        let injected = actions.faultMatched, streamID = stream.id
        let written = actions.writtenAtOnce(streamOpen: stream.isOpen)
        let offset = team?._withUnsafeGuaranteedRef { $0.clock.offsetSeconds } ?? state.clock.offsetSeconds
        return state.recording.append { seq in
            RawRecord(
                seq: seq, receivedAt: received.receivedAt, shape: received.shape, path: received.path,
                apnsIDHeader: received.apnsIDHeader, apnsID: answerID, uniqueID: uniqueID, status: outcome.status,
                rejection: outcome.rejection, injected: injected, action: outcome.action, streamID: streamID,
                broadcast: details, responseWritten: written, clockOffset: offset)
        }
    }

    /// Keeps a request no API decided (the 431 of an oversized header list: its headers were never
    /// all read, so there was nothing to validate), answered `status` with no reason, as the API
    /// whose route takes it records: its `kind`, and `fallback` as its environment when the request
    /// names none. The record holds the fields that came before the limit, no payload and no
    /// credentials. Returns its sequence number (0: recording is off).
    func recordUndecided(
        _ request: borrowing PushRequest, status: Int, kind: RecordKind, fallback: APNSEnvironment,
        stream: RequestStream, context: ConnectionContext, connection: inout ConnectionMemo
    ) -> UInt64 {
        count(kind: kind)
        note(status: status, rejection: nil, action: nil, kind: kind, team: nil, id: "", streamID: stream.id, context: context)
        guard state.recording.isEnabled else { return 0 }
        let receivedAt = connection.readTime()
        let environment = connection.environment(of: request, context: context, fallback: fallback)
        let shape = RequestShape(
            copy request, interpreted: nil, environment: environment, auth: AuthSummary(),
            connectionID: UInt64(context.connectionNumber))
        let details = kind == .device
            ? nil : connection.shapes.broadcastDetails(kind: kind, bundleID: nil, channelID: request.channelID, operation: nil)
        // The id a query finds it by: the client's, as an answer would have echoed it, else a new one.
        let requestID = APNSResponse.RequestID.take(
            kind == .device ? request.apnsID : request.requestID, random: &connection.random)
        let path = request.path, apnsIDHeader = request.apnsID, offset = state.clock.offsetSeconds
        return state.recording.append { seq in
            RawRecord(
                seq: seq, receivedAt: receivedAt, shape: shape, path: path, apnsIDHeader: apnsIDHeader, apnsID: requestID,
                uniqueID: nil, status: status, rejection: nil, injected: false, action: nil,
                streamID: stream.id, broadcast: details, responseWritten: stream.isOpen, clockOffset: offset)
        }
    }

    /// Counts a request of a kind other than device pushes: those are the total less the others
    /// (``RequestStatistics``).
    private func count(kind: RecordKind) {
        if kind != .device { state.counting.count(kind: kind) }
    }

    /// Counts the outcome and logs a rejection at debug level: a load test of bad tokens must not
    /// write a line per request (``RejectionSummaryService`` says at info level, every ten seconds,
    /// how many were rejected and why).
    private func note(
        status: Int?, rejection: Rejection?, action: FaultRule.Action.Name?, kind: RecordKind, team: Unmanaged<TeamSpace>?,
        id: @autoclosure () -> String, streamID: Int32, context: ConnectionContext
    ) {
        let filed = state.counting.count(status: status, rejection: rejection, action: action)
        if state.countsTeams { team?._withUnsafeGuaranteedRef { $0.counts.count(filed) } }
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
