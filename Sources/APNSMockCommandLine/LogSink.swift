import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where log lines go: a bounded queue in memory that one writer thread of its own empties into a
/// file descriptor (standard error). Logging never waits for the descriptor: a thread that logs
/// (an event loop answering pushes) only appends under a short lock. When the reader of the
/// descriptor does not keep up (a test harness that reads a pipe only at the end, a stuck log
/// shipper), the queue fills up to ``capacity`` bytes and further lines are dropped and counted
/// (``droppedLines``, the metric `apns_log_lines_dropped_total`); once the writer gets to write
/// again it says how many were dropped, at most once per ``reportInterval``.
public final class LogSink: Sendable {
    /// The process's standard error, shared by every logger the command line bootstraps.
    public static let standardError = LogSink(descriptor: STDERR_FILENO)

    /// Bytes of lines waiting at most: about 5,000 typical lines.
    public static let capacity = 1 << 20
    /// The shortest time between two "lines dropped" reports.
    public static let reportInterval: Duration = .seconds(10)

    private struct Queue {
        var bytes: [UInt8] = []
        /// Lines dropped since the last report.
        var dropped = 0
        /// Whether the writer sleeps and must be woken for new lines.
        var writerIdle = true
        /// Formats the report of dropped lines in the log's format (set by the bootstrap).
        var report: @Sendable (Int) -> String = { "\($0) log lines dropped: the log's reader did not keep up\n" }
    }

    private let descriptor: Int32
    private let queue = Mutex(Queue())
    private let wake = DispatchSemaphore(value: 0)
    private let dropped = Atomic<Int>(0)

    /// Lines dropped since start because the queue was full.
    public var droppedLines: Int { dropped.load(ordering: .relaxed) }

    init(descriptor: Int32) {
        self.descriptor = descriptor
        let thread = Thread { [self] in writeForever() }
        thread.name = "apns-mock log writer"
        thread.start()
    }

    /// How the report of dropped lines is written (one whole line, with its newline).
    public func setReportFormat(_ format: @escaping @Sendable (Int) -> String) {
        queue.withLock { $0.report = format }
    }

    /// Queues one whole line (with its newline); drops it when the queue is full. Never blocks
    /// beyond the queue's lock.
    public func write(_ line: String) {
        var line = line
        line.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    public func write(_ bytes: UnsafeRawBufferPointer) {
        append(bytes)
    }

    private func append(_ bytes: UnsafeRawBufferPointer) {
        let (wakeWriter, kept) = queue.withLock { queue -> (Bool, Bool) in
            guard queue.bytes.count + bytes.count <= Self.capacity else {
                queue.dropped += 1
                return (false, false)
            }
            queue.bytes.append(contentsOf: bytes)
            guard queue.writerIdle else { return (false, true) }
            queue.writerIdle = false
            return (true, true)
        }
        if wakeWriter {
            wake.signal()
        } else if !kept {
            dropped.wrappingAdd(1, ordering: .relaxed)
        }
    }

    /// Blocks until every line queued so far is written (a command about to exit; tests).
    public func flush(timeout: Duration = .seconds(2)) {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if queue.withLock({ $0.writerIdle && $0.bytes.isEmpty }) { return }
            Thread.sleep(forTimeInterval: 0.001)
        }
    }

    private func writeForever() {
        var pending: [UInt8] = []
        var lastReport = ContinuousClock.now - Self.reportInterval
        while true {
            let (bytes, droppedNow, report) = queue.withLock { queue -> ([UInt8], Int, @Sendable (Int) -> String) in
                swap(&pending, &queue.bytes)
                let now = ContinuousClock.now
                var reported = 0
                if queue.dropped > 0, now - lastReport >= Self.reportInterval {
                    reported = queue.dropped
                    queue.dropped = 0
                }
                if pending.isEmpty, reported == 0 { queue.writerIdle = true }
                return (pending, reported, queue.report)
            }
            if droppedNow > 0 {
                lastReport = ContinuousClock.now
                var line = report(droppedNow)
                line.withUTF8 { writeAll(UnsafeRawBufferPointer($0)) }
            }
            if bytes.isEmpty {
                if droppedNow == 0 { wake.wait() }
                continue
            }
            bytes.withUnsafeBytes { writeAll($0) }
            pending.removeAll(keepingCapacity: pending.capacity <= Self.capacity)
        }
    }

    /// Writes everything, waiting for the descriptor as long as it takes (this thread only); a
    /// descriptor that fails (closed, a full disk) loses the bytes.
    private func writeAll(_ bytes: UnsafeRawBufferPointer) {
        guard var next = bytes.baseAddress else { return }
        var left = bytes.count
        while left > 0 {
            let written = systemWrite(descriptor, next, left)
            if written > 0 {
                next += written
                left -= written
            } else if written < 0, errno == EINTR {
                continue
            } else if written < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                // A non-blocking descriptor (inherited so): wait until it takes more.
                var poller = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                _ = poll(&poller, 1, 1000)
            } else {
                return
            }
        }
    }
}

private func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
    Glibc.write(descriptor, bytes, count)
    #else
    Darwin.write(descriptor, bytes, count)
    #endif
}

/// swift-log's text format (as `StreamLogHandler` writes it: time, level, label, metadata, message),
/// written through a ``LogSink``.
public struct TextLogHandler: LogHandler {
    public let label: String
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    private let sink: LogSink

    public init(label: String, sink: LogSink = .standardError) {
        self.label = label
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let merged = event.metadata.map { metadata.merging($0) { _, new in new } } ?? metadata
        let fields = merged.isEmpty ? "" : " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        sink.write("\(Self.timestamp()) \(event.level) \(label):\(fields) [\(event.source)] \(event.message)\n")
    }

    static func timestamp() -> String {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        var buffer = [Int8](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
