import APNSMockCore
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// The shared records: a writer that ships this replica's queue (``MockState/recording``) to the
/// database, and a mirror that reads every replica's records back, in their shared order, into
/// the ring the admin API reads (``MockState/records``), counting them as they come.
///
/// A record is **acknowledged** once the batch that carries it is committed: it then survives
/// this replica's death and is read by every mirror. Until then it is in this process's queue
/// only, at most a few milliseconds under load; a replica killed in that window loses those, and
/// no acknowledged one (`/v1/stats` `shared.written` counts the acknowledged).
final class SharedRecords: Sendable {
    private let logger: Logger
    private struct Links {
        var engine: PostgresSharedState?
        var state: MockState?
    }

    private let links = Mutex(Links())

    private struct Writer {
        /// The queue's last record shipped (or dropped).
        var shipped: UInt64 = 0
        /// The shared number of this replica's last record written.
        var lastShared: Int64 = 0
        /// The last clearing this replica wrote.
        var lastMark: Int64 = 0
        /// Clearings asked for, written after the records queued before them.
        var clearings: [(through: UInt64, team: String?)] = []
        /// Callers waiting until the queue is shipped through a record.
        var flushWaiters: [(through: UInt64, continuation: CheckedContinuation<(Int64, Int64), Never>)] = []
    }

    private let writer = Mutex(Writer())

    private struct Mirror {
        /// The last shared record number read.
        var seq: Int64 = 0
        /// The last mark applied.
        var mark: Int64 = 0
        /// Callers waiting until the mirror has read through a shared number.
        var waiters: [(through: Int64, mark: Int64, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let mirror = Mutex(Mirror())
    /// The mirror's decoder (one task uses it): it keeps the last shape read.
    private let decoderState = Mutex(SharedRecordDecoder())

    /// Rows read and written per batch.
    static let batchSize = 2_000

    init(logger: Logger) {
        self.logger = logger
    }

    func attach(engine: PostgresSharedState, state: MockState) {
        links.withLock {
            $0.engine = engine
            $0.state = state
        }
    }

    private var engine: PostgresSharedState? { links.withLock { $0.engine } }
    private var state: MockState? { links.withLock { $0.state } }

    /// Records waiting in the queue.
    var queued: Int {
        guard let state else { return 0 }
        let last = state.recording.lastSeq
        return Int(last - min(last, writer.withLock { $0.shipped }))
    }

    // MARK: Start

    /// Reads the newest records there are (up to the ring's capacity) before the listeners serve.
    func start() async throws {
        guard let engine, let state else { return }
        var last: Int64 = 0
        for try await value in try await engine.client.query("SELECT last FROM apns_mock_record_counter", logger: logger)
            .decode(Int64.self)
        {
            last = value
        }
        let capacity = Int64(state.records.capacity)
        let start = max(0, last - capacity)
        mirror.withLock { $0.seq = start }
        state.records.startMirror(after: UInt64(start))
        while try await ingest(engine: engine, state: state) {}
        engine.reachable()
    }

    // MARK: Writer

    /// Clears the shared records of `team` (all when `nil`) after this replica's queue.
    func clear(team: String?) {
        guard let state else { return }
        let through = state.recording.lastSeq
        writer.withLock { $0.clearings.append((through, team)) }
    }

    /// Waits until this replica's records queued before the call are written and the mirror read
    /// them (a query on this replica then finds what it answered), at most `seconds`.
    func sync(seconds: Double) async {
        guard let state, let engine, engine.degradedReason == nil else { return }
        let through = state.recording.lastSeq
        _ = try? await withDeadline(seconds: seconds) { [self] in
            let (shared, mark) = await withCheckedContinuation { (continuation: CheckedContinuation<(Int64, Int64), Never>) in
                let done = writer.withLock { writer -> (Int64, Int64)? in
                    if writer.shipped >= through && writer.clearings.isEmpty { return (writer.lastShared, writer.lastMark) }
                    writer.flushWaiters.append((through, continuation))
                    return nil
                }
                if let done { continuation.resume(returning: done) }
            }
            await waitForMirror(through: shared, mark: mark)
            return true
        }
    }

    private func waitForMirror(through shared: Int64, mark: Int64) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = mirror.withLock { mirror -> Bool in
                if mirror.seq >= shared && mirror.mark >= mark { return true }
                mirror.waiters.append((shared, mark, continuation))
                return false
            }
            if done { continuation.resume() } else { engine?.recordsArrived.signal() }
        }
    }

    /// Ships the queue every few milliseconds, or at once when a query waits for it.
    func runWriter() async {
        var failures = 0
        while !Task.isCancelled {
            guard let engine, let state else { return }
            let wrote: Bool
            do {
                wrote = try await shipBatch(engine: engine, state: state)
                failures = 0
            } catch {
                if Task.isCancelled { return }
                engine.unreachable("writing records", error)
                failures += 1
                // Waiters for a flush are answered with what is there: a query must not hang.
                answerFlushWaiters(force: true)
                try? await Task.sleep(for: .milliseconds(min(1_000, 50 * failures)))
                continue
            }
            // Nothing to ship: look again in a few milliseconds (a query waiting for its records
            // waits at most that long more).
            if !wrote { try? await Task.sleep(for: .milliseconds(5)) }
        }
    }

    /// Ships one batch (or writes one clearing); false when there was nothing to do.
    private func shipBatch(engine: PostgresSharedState, state: MockState) async throws -> Bool {
        let queue = state.recording
        let last = queue.lastSeq
        let (from, clearing) = writer.withLock { writer -> (UInt64, (through: UInt64, team: String?)?) in
            (writer.shipped, writer.clearings.first)
        }
        // Records queued before a clearing go out before it.
        let limit = clearing.map { min($0.through, last) } ?? last
        if from >= limit, let clearing {
            try await writeClearing(team: clearing.team, engine: engine)
            writer.withLock { _ = $0.clearings.removeFirst() }
            answerFlushWaiters(force: false)
            return true
        }
        guard from < limit else {
            answerFlushWaiters(force: false)
            return false
        }
        var through = min(limit, from + UInt64(Self.batchSize))
        // A record's `responseWritten` is settled microseconds after it is queued, when its
        // answer is flushed: records younger than 20 ms wait for the next batch, unless a query
        // waits for them (its client already has those answers).
        let flushing = writer.withLock { !$0.flushWaiters.isEmpty } || clearing != nil
        let settled = Int64(Date().timeIntervalSince1970 * 1000) - 20
        var teams: [String] = [], bodies: [ByteBuffer] = []
        teams.reserveCapacity(Int(through - from))
        bodies.reserveCapacity(Int(through - from))
        var encoder = SharedRecordEncoder()
        var body = ByteBuffer()
        var lost = 0
        for seq in (from + 1)...through {
            guard let record = queue.read(seq), record.seq == seq else {
                // Overwritten before it went out: the queue was full.
                if seq <= queue.lastSeq, !queue.isWithinRing(seq) { lost += 1; continue }
                // Not stored yet (its writer took the number a moment ago): the next batch.
                through = seq - 1
                break
            }
            if !flushing, record.receivedAt > settled {
                through = seq - 1
                break
            }
            teams.append(record.auth.teamId ?? "")
            body.clear()
            encoder.encode(record, into: &body)
            bodies.append(body)
        }
        guard through > from else { return false }
        var lastShared: Int64 = 0
        if !bodies.isEmpty {
            let count = bodies.count
            for try await value in try await engine.client.query(
                """
                WITH counter AS (
                    UPDATE apns_mock_record_counter SET last = last + \(count) RETURNING last)
                INSERT INTO apns_mock_records (seq, team, origin, body)
                SELECT (SELECT last FROM counter) - \(count) + batch.ordinal, nullif(batch.team, ''), \(engine.replica), batch.body
                FROM unnest(\(teams)::text[], \(bodies)::bytea[]) WITH ORDINALITY AS batch(team, body, ordinal)
                RETURNING seq
                """, logger: logger
            ).decode(Int64.self) {
                lastShared = max(lastShared, value)
            }
            // Written: a lost notification only delays the mirrors (they look every second).
            try? await engine.notify("records")
            engine.reachable()
            engine.noteWritten(count)
        }
        if lost > 0 {
            engine.noteDropped(lost)
            logger.warning("shared records dropped: the queue was full", metadata: ["dropped": "\(lost)"])
        }
        writer.withLock { writer in
            writer.shipped = through
            if lastShared > 0 { writer.lastShared = lastShared }
        }
        answerFlushWaiters(force: false)
        return true
    }

    private func writeClearing(team: String?, engine: PostgresSharedState) async throws {
        var mark: Int64 = 0, after: Int64 = 0
        for try await (id, afterSeq) in try await engine.client.query(
            """
            WITH counter AS (UPDATE apns_mock_record_counter SET last = last RETURNING last)
            INSERT INTO apns_mock_record_marks (after_seq, team) SELECT last, \(team) FROM counter RETURNING id, after_seq
            """, logger: logger
        ).decode((Int64, Int64).self) {
            mark = id
            after = afterSeq
        }
        writer.withLock { writer in
            writer.lastMark = max(writer.lastMark, mark)
            writer.lastShared = max(writer.lastShared, after)
        }
        // Written: a lost notification only delays the mirrors (they look every second).
        try? await engine.notify("records")
    }

    /// Answers the flush waiters whose records went out (all of them when `force`).
    private func answerFlushWaiters(force: Bool) {
        let ready = writer.withLock { writer -> [(CheckedContinuation<(Int64, Int64), Never>, (Int64, Int64))] in
            let last = (writer.lastShared, writer.lastMark)
            let cleared = writer.clearings.isEmpty
            var ready: [(CheckedContinuation<(Int64, Int64), Never>, (Int64, Int64))] = []
            writer.flushWaiters.removeAll { waiter in
                guard force || (waiter.through <= writer.shipped && cleared) else { return false }
                ready.append((waiter.continuation, last))
                return true
            }
            return ready
        }
        for (continuation, value) in ready { continuation.resume(returning: value) }
    }

    // MARK: Mirror

    /// Reads the shared records as they come (woken by notifications, and every second).
    func runMirror() async {
        while !Task.isCancelled {
            guard let engine, let state else { return }
            await engine.recordsArrived.wait()
            if Task.isCancelled { return }
            do {
                while try await ingest(engine: engine, state: state) {}
            } catch {
                engine.unreachable("reading records", error)
            }
        }
    }

    /// Reads one page of new records and the clearings among them, and applies them in order; true
    /// when the page was full (more may follow).
    private func ingest(engine: PostgresSharedState, state: MockState) async throws -> Bool {
        let (fromSeq, fromMark) = mirror.withLock { ($0.seq, $0.mark) }
        let logger = logger
        // Two statements, each its own snapshot, records first: a clearing is committed before
        // any record numbered after it (the counter row's lock orders them), so every clearing
        // among the records read is in the second read. Clearings past the last record read wait
        // for the next pass.
        // The counter first: every record it had numbered is committed, so when none after
        // `fromSeq` is found they were deleted (retention), and the mirror moves past them rather
        // than waiting for numbers that will not come.
        var numbered: Int64 = 0
        for try await value in try await engine.client.query("SELECT last FROM apns_mock_record_counter", logger: logger)
            .decode(Int64.self)
        {
            numbered = value
        }
        var rows: [(Int64, ByteBuffer)] = []
        for try await (seq, body) in try await engine.client.query(
            "SELECT seq, body FROM apns_mock_records WHERE seq > \(fromSeq) ORDER BY seq LIMIT \(Self.batchSize)",
            logger: logger
        ).decode((Int64, ByteBuffer).self) {
            rows.append((seq, body))
        }
        var marks: [(Int64, Int64, String?)] = []
        for try await (id, after, team) in try await engine.client.query(
            "SELECT id, after_seq, team FROM apns_mock_record_marks WHERE id > \(fromMark) ORDER BY id", logger: logger
        ).decode((Int64, Int64, String?).self) {
            marks.append((id, after, team))
        }
        let full = rows.count == Self.batchSize
        var pendingMarks = marks[...]

        var teamSpaces: [String: TeamSpace?] = [:]
        var seq = fromSeq
        var decoder = decoderState.withLock { $0 }
        defer { decoderState.withLock { $0 = decoder } }
        func applyMarks(through seq: Int64) {
            while let mark = pendingMarks.first, mark.1 <= seq {
                pendingMarks.removeFirst()
                if let team = mark.2 {
                    state.applySharedClearing(team: team)
                } else {
                    state.applyRemoveRecords()
                }
                mirror.withLock { $0.mark = mark.0 }
            }
        }
        for (rowSeq, body) in rows {
            applyMarks(through: rowSeq - 1)
            seq = rowSeq
            guard let record = try? decoder.decode(body, seq: UInt64(rowSeq)) else {
                logger.warning("a shared record could not be read: skipped", metadata: ["seq": "\(rowSeq)"])
                state.records.skipMirror(through: UInt64(rowSeq))
                continue
            }
            count(record, state: state, teams: &teamSpaces)
            state.records.appendMirrored(record)
        }
        if rows.isEmpty, numbered > seq {
            seq = numbered
            state.records.skipMirror(through: UInt64(numbered))
        }
        applyMarks(through: seq)
        let waiting = mirror.withLock { mirror -> [CheckedContinuation<Void, Never>] in
            mirror.seq = seq
            var ready: [CheckedContinuation<Void, Never>] = []
            mirror.waiters.removeAll { waiter in
                guard waiter.through <= seq, waiter.mark <= mirror.mark else { return false }
                ready.append(waiter.continuation)
                return true
            }
            return ready
        }
        for continuation in waiting { continuation.resume() }
        return full
    }

    /// Counts a shared record as the request path counts its own in memory.
    private func count(_ record: RawRecord, state: MockState, teams: inout [String: TeamSpace?]) {
        if record.kind != .device { state.statistics.count(kind: record.kind) }
        let filed = state.statistics.count(status: record.status, rejection: record.rejection, action: record.action)
        if let team = record.auth.teamId {
            let space: TeamSpace?
            if let known = teams[team] {
                space = known
            } else {
                space = state.space(forRecordsOf: team)
                teams[team] = space
            }
            space?.counts.count(filed)
        }
    }
}
