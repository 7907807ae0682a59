import APNSMock
import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One Server-Sent Event of `GET /v1/events`: `type` is `message` for a record (`id` its seq,
/// ``record()`` decodes it), `skipped` or `refused-streams` for the notices (their JSON in `data`).
public struct AdminEvent: Sendable, Equatable {
    public var type: String
    public var id: String?
    public var data: Data

    /// The record a `message` event carries.
    public func record() throws -> NotificationRecord {
        try JSONDecoder().decode(NotificationRecord.self, from: data)
    }
}

/// An open `GET /v1/events` stream (``AdminClient/events(_:maxRate:lastEventID:)``): iterate it for
/// ``AdminEvent``s until it ends (a `limit`) or ``close()``; ending the iteration closes it too.
public final class AdminEventStream: AsyncSequence, Sendable {
    public typealias Element = AdminEvent

    private let events: AsyncThrowingStream<AdminEvent, any Error>
    private let session: URLSession

    private init(events: AsyncThrowingStream<AdminEvent, any Error>, session: URLSession) {
        self.events = events
        self.session = session
    }

    deinit {
        session.invalidateAndCancel()
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(base: events.makeAsyncIterator(), stream: self)
    }

    /// Keeps the stream (and so its connection) alive while it is iterated.
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<AdminEvent, any Error>.AsyncIterator
        let stream: AdminEventStream

        public mutating func next() async throws -> AdminEvent? {
            try await base.next()
        }
    }

    /// Closes the connection; an iteration in progress ends.
    public func close() {
        session.invalidateAndCancel()
    }

    /// Sends `request` and returns once the stream's first bytes arrived (the mock writes them after
    /// subscribing the stream), or throws ``AdminClientError`` with the server's message for an
    /// error.
    static func open(_ request: URLRequest) async throws -> AdminEventStream {
        let (events, continuation) = AsyncThrowingStream.makeStream(of: AdminEvent.self, throwing: (any Error).self)
        let delegate = Delegate(continuation: continuation)
        let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
        continuation.onTermination = { _ in session.invalidateAndCancel() }
        try await withCheckedThrowingContinuation { (opened: CheckedContinuation<Void, any Error>) in
            delegate.state.withLock { $0.opened = opened }
            session.dataTask(with: request).resume()
        }
        return AdminEventStream(events: events, session: session)
    }

    private final class Delegate: NSObject, URLSessionDataDelegate, Sendable {
        struct State {
            var opened: CheckedContinuation<Void, any Error>?
            /// An error answer's status while its body arrives.
            var errorStatus: Int?
            var body = Data()
            var parser = Parser()
        }

        let state = Mutex(State())
        let continuation: AsyncThrowingStream<AdminEvent, any Error>.Continuation

        init(continuation: AsyncThrowingStream<AdminEvent, any Error>.Continuation) {
            self.continuation = continuation
        }

        func urlSession(
            _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
        ) {
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            // A stream is open once its opening comment arrives (the mock writes it after
            // subscribing; the head may come before): see the first data below.
            if status != 200 { state.withLock { $0.errorStatus = status } }
            completionHandler(.allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            let (events, opened) = state.withLock { state -> ([AdminEvent], CheckedContinuation<Void, any Error>?) in
                if state.errorStatus != nil {
                    state.body.append(data)
                    return ([], nil)
                }
                return (state.parser.feed(data), state.opened.take())
            }
            opened?.resume()
            for event in events { continuation.yield(event) }
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            let (opened, failure) = state.withLock { state -> (CheckedContinuation<Void, any Error>?, (any Error)?) in
                var failure: (any Error)? = error
                if let status = state.errorStatus {
                    let message = (try? JSONDecoder().decode([String: String].self, from: state.body))?["error"]
                        ?? String(decoding: state.body, as: UTF8.self)
                    failure = AdminClientError(status: status, message: message)
                }
                return (state.opened.take(), failure)
            }
            if let opened {
                opened.resume(throwing: failure ?? AdminClientError("the event stream ended before it opened"))
            }
            // A cancelled task is the stream's own close: it ends without an error.
            if let urlError = error as? URLError, urlError.code == .cancelled {
                continuation.finish()
            } else {
                continuation.finish(throwing: failure)
            }
        }
    }

    /// The event stream format (HTML's "Server-sent events"): `field: value` lines, an empty line
    /// ending an event, `:` comments.
    struct Parser {
        private var pending = Data()
        private var type: String?
        private var id: String?
        private var data: [String] = []

        mutating func feed(_ bytes: Data) -> [AdminEvent] {
            pending.append(bytes)
            var events: [AdminEvent] = []
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                var line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending.removeSubrange(pending.startIndex...newline)
                if line.hasSuffix("\r") { line.removeLast() }
                if line.isEmpty {
                    if !data.isEmpty {
                        events.append(AdminEvent(type: type ?? "message", id: id, data: Data(data.joined(separator: "\n").utf8)))
                    }
                    type = nil
                    id = nil
                    data = []
                    continue
                }
                if line.hasPrefix(":") { continue }
                let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                var value = parts.count > 1 ? String(parts[1]) : ""
                if value.hasPrefix(" ") { value.removeFirst() }
                switch parts[0] {
                case "data": data.append(value)
                case "event": type = value
                case "id": id = value
                default: break
                }
            }
            return events
        }
    }
}
