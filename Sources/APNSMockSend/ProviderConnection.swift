import APNSMockCore
import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// One push as it goes on the wire: the HEADERS of its stream and its DATA.
struct OutgoingPush: Sendable {
    var headers: HPACKHeaders
    var body: ByteBuffer
}

/// What APNs answered to one push.
struct ProviderAnswer: Sendable {
    var status: Int
    var apnsID: String?
    var uniqueID: String?
    /// The `reason` of an error body, as Apple spelled it.
    var reason: String?
    /// The `timestamp` of a 410 body (milliseconds since 1970).
    var timestamp: Int64?
    /// The body as text, for answers whose body is not Apple's `{"reason":…}`.
    var body: String
}

/// Why a push got no answer.
struct PushFailure: Error, Sendable {
    enum Kind: Sendable {
        /// Refused before the server looked at it (RST_STREAM REFUSED_STREAM, or a stream above a
        /// GOAWAY's last stream): safe to send again.
        case refused
        case reset
        case connectionClosed
        case timedOut
        case other
    }

    var kind: Kind
    var description: String
}

enum PushOutcome: Sendable {
    case response(ProviderAnswer)
    case failed(PushFailure)
}

/// The server a provider dials, and how it checks the server's certificate.
struct SendTarget: Sendable {
    /// The host the push is addressed to: SNI, `:authority` and the certificate check use it.
    var host: String
    var port: Int
    /// Where to connect (`--connect-to`), by default `host`/`port`.
    var dialHost: String
    var dialPort: Int
    /// Whether `host` is one of Apple's (`--sandbox`/`--production`).
    var isApple: Bool

    var authority: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == 443 ? name : "\(name):\(port)"
    }

    var dialDescription: String { dialHost.contains(":") ? "[\(dialHost)]:\(dialPort)" : "\(dialHost):\(dialPort)" }

    /// SNI must be a name: an IP address is checked against the certificate's IP entries instead.
    var serverNameIndication: String? { Self.isIPAddress(host) ? nil : host }

    static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }
}

/// Why a connection could not be set up, as one line.
struct ConnectFailure: Error, Sendable, CustomStringConvertible {
    var description: String
}

/// One HTTP/2 connection over TLS to APNs (or apns-mock), built on swift-nio-http2 and
/// swift-nio-ssl: each push is a stream of the connection's multiplexer.
final class ProviderConnection: Sendable {
    let channel: any Channel
    private let multiplexer: NIOHTTP2Handler.StreamMultiplexer
    private let watcher: NIOLoopBound<ConnectionWatcher>

    var eventLoop: any EventLoop { channel.eventLoop }

    private init(channel: any Channel, multiplexer: NIOHTTP2Handler.StreamMultiplexer, watcher: NIOLoopBound<ConnectionWatcher>) {
        self.channel = channel
        self.multiplexer = multiplexer
        self.watcher = watcher
    }

    /// Connects, completes the TLS handshake and checks that the server agreed to HTTP/2.
    static func connect(
        to target: SendTarget, tls: NIOSSLContext, group: any EventLoopGroup, timeout: TimeAmount
    ) async throws(ConnectFailure) -> ProviderConnection {
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(timeout)
            // TCP level: at the socket level option 1 is SO_DEBUG, which only root may set.
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
        let serverName = target.serverNameIndication
        let connected: (any Channel, NIOHTTP2Handler.StreamMultiplexer, NIOLoopBound<ConnectionWatcher>, EventLoopPromise<String?>)
        do {
            connected = try await bootstrap.connect(host: target.dialHost, port: target.dialPort) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handshake = channel.eventLoop.makePromise(of: String?.self)
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: tls, serverHostname: serverName))
                    try sync.addHandler(HandshakeWaiter(handshake))
                    try sync.addHandler(FlushCoalescer())
                    let multiplexer = try sync.configureHTTP2Pipeline(
                        mode: .client,
                        connectionConfiguration: Self.connectionConfiguration,
                        streamConfiguration: .init(),
                        inboundStreamInitializer: { stream in stream.close() })
                    let watcher = ConnectionWatcher()
                    try sync.addHandler(watcher)
                    return (channel, multiplexer, NIOLoopBound(watcher, eventLoop: channel.eventLoop), handshake)
                }
            }
        } catch {
            var problem = Self.describe(connectError: error)
            if !target.isApple, problem == String(cString: strerror(ECONNREFUSED)) {
                problem += " (is apns-mock serve running there?)"
            }
            throw ConnectFailure(description: "cannot connect to \(target.dialDescription): \(problem)")
        }
        let (channel, multiplexer, watcher, handshake) = connected
        let deadline = channel.eventLoop.scheduleTask(in: timeout) {
            handshake.fail(ConnectFailure(description: "no TLS handshake within \(timeout.seconds) s"))
        }
        let negotiated: String?
        do {
            negotiated = try await handshake.futureResult.get()
            deadline.cancel()
        } catch {
            deadline.cancel()
            channel.close(promise: nil)
            throw ConnectFailure(description: "TLS with \(target.dialDescription) failed: \(Self.describe(tlsError: error, target: target))")
        }
        guard negotiated == "h2" else {
            channel.close(promise: nil)
            throw ConnectFailure(description: "\(target.dialDescription) does not speak HTTP/2 (ALPN chose \(negotiated.map { "\"\($0)\"" } ?? "nothing"))")
        }
        return ProviderConnection(channel: channel, multiplexer: multiplexer, watcher: watcher)
    }

    private static let connectionConfiguration: NIOHTTP2Handler.ConnectionConfiguration = {
        var configuration = NIOHTTP2Handler.ConnectionConfiguration()
        configuration.initialSettings = [
            HTTP2Setting(parameter: .enablePush, value: 0),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16384),
        ]
        return configuration
    }()

    /// Sends `push` on a new stream; `completion` gets the answer or why there was none. Call on
    /// any thread; `completion` must belong to ``eventLoop``.
    func send(_ push: OutgoingPush, completion: EventLoopPromise<PushOutcome>) {
        let created = channel.eventLoop.makePromise(of: (any Channel).self)
        multiplexer.createStreamChannel(promise: created) { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(PushStreamHandler(push: push, completion: completion))
            }
        }
        created.futureResult.whenFailure { [watcher, eventLoop] error in
            // The stream never opened, so the push was not sent: it may go on another connection.
            var failure = eventLoop.inEventLoop ? watcher.value.closedFailure(error) : PushFailure(kind: .connectionClosed, description: "\(error)")
            failure.kind = .refused
            completion.succeed(.failed(failure))
        }
    }

    /// Whether the server sent GOAWAY: no new streams may go on this connection. Call on
    /// ``eventLoop``.
    var isGoingAway: Bool {
        watcher.value.goingAway
    }

    func close() {
        channel.close(promise: nil)
    }

    static func describe(connectError error: any Error) -> String {
        if let failure = error as? NIOConnectionError {
            if let first = failure.connectionErrors.first {
                return describe(connectError: first.error)
            }
            return "cannot resolve \(failure.host)"
        }
        if let io = error as? IOError {
            return String(cString: strerror(io.errnoCode))
        }
        if case ChannelError.connectTimeout(let amount) = error {
            return "no answer within \(amount.seconds) s"
        }
        if let failure = error as? ConnectFailure {
            return failure.description
        }
        return oneLine("\(error)")
    }

    static func describe(tlsError error: any Error, target: SendTarget) -> String {
        if let failure = error as? ConnectFailure {
            return failure.description
        }
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
            return "the server's certificate is not for \(target.host)"
        }
        let text = "\(error)"
        if text.contains("CERTIFICATE_VERIFY_FAILED") {
            return "the server's certificate is not trusted (CERTIFICATE_VERIFY_FAILED): check --ca"
        }
        if let io = error as? IOError {
            return String(cString: strerror(io.errnoCode))
        }
        return oneLine(text)
    }

    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).joined(separator: " ")
    }
}

extension TimeAmount {
    /// Whole or fractional seconds, for messages.
    var seconds: String {
        let value = Double(nanoseconds) / 1e9
        return value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
    }
}

extension HTTP2ErrorCode {
    /// RFC 9113's name of the code, e.g. `REFUSED_STREAM`.
    var name: String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
            "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR",
            "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        let code = Int(networkCode)
        return code < names.count ? names[code] : "error 0x\(String(code, radix: 16))"
    }
}

/// Completes a promise with the ALPN protocol when the TLS handshake is done, or fails it.
private final class HandshakeWaiter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let promise: EventLoopPromise<String?>

    init(_ promise: EventLoopPromise<String?>) {
        self.promise = promise
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let negotiated) = event {
            promise.succeed(negotiated)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(ConnectFailure(description: "the server closed the connection during the handshake"))
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // Also when the connection never came up (the pipeline is torn down without channelInactive).
        promise.fail(ConnectFailure(description: "the connection closed before the handshake"))
    }
}

/// Turns the flushes of one event-loop tick into one. swift-nio-http2 opens each stream on a tick
/// of its own and every new stream flushes, so without this each push costs a TLS record and a
/// `write(2)` of its own; with it the pushes started together leave in one write, as HTTP/2
/// clients batch them.
private final class FlushCoalescer: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = NIOAny

    private var scheduled = false

    func flush(context: ChannelHandlerContext) {
        guard !scheduled else { return }
        scheduled = true
        context.eventLoop.assumeIsolated().execute { [self] in
            scheduled = false
            context.flush()
        }
    }
}

/// Watches the connection's own frames and errors: remembers a GOAWAY (with Apple's reason in its
/// debug data) or an error, so that pushes cut off by it can say why.
final class ConnectionWatcher: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    private var goaway: (code: HTTP2ErrorCode, debug: String)?
    private var error: (any Error)?

    var goingAway: Bool { goaway != nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if case .goAway(_, let code, let opaque) = frame.payload {
            let debug = opaque.map { String(buffer: $0) } ?? ""
            goaway = (code, debug)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if self.error == nil { self.error = error }
        context.close(promise: nil)
    }

    /// The failure of a push that the connection's end cut off.
    func closedFailure(_ streamError: (any Error)?) -> PushFailure {
        if let goaway {
            let reason = Self.reason(in: goaway.debug).map { " \($0)" } ?? (goaway.debug.isEmpty ? "" : " \(goaway.debug)")
            return PushFailure(kind: .connectionClosed, description: "connection closed by GOAWAY \(goaway.code.name)\(reason)")
        }
        if let error {
            if let tls = error as? NIOSSLError, case .uncleanShutdown = tls {
                return PushFailure(kind: .connectionClosed, description: "connection closed by the server (without TLS close_notify)")
            }
            return PushFailure(kind: .connectionClosed, description: "connection failed: \(ProviderConnection.oneLine("\(error)"))")
        }
        return PushFailure(kind: .connectionClosed, description: "connection closed")
    }

    /// Apple's GOAWAY debug data is `{"reason":"…"}`.
    static func reason(in text: String) -> String? {
        guard let value = try? JSONValue.parse(text) else { return nil }
        return value["reason"]?.stringValue
    }
}

/// The handler of one push's stream: writes the request, collects the response.
final class PushStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let push: OutgoingPush
    private let completion: EventLoopPromise<PushOutcome>
    private var headers: HPACKHeaders?
    private var body: ByteBuffer?
    private var done = false

    init(push: OutgoingPush, completion: EventLoopPromise<PushOutcome>) {
        self.push = push
        self.completion = completion
    }

    func channelActive(context: ChannelHandlerContext) {
        let hasBody = push.body.readableBytes > 0
        let written = context.eventLoop.makePromise(of: Void.self)
        context.write(wrapOutboundOut(.headers(.init(headers: push.headers, endStream: !hasBody))), promise: hasBody ? nil : written)
        if hasBody {
            context.write(wrapOutboundOut(.data(.init(data: .byteBuffer(push.body), endStream: true))), promise: written)
        }
        context.flush()
        written.futureResult.assumeIsolated().whenFailure { [self] error in
            finish(.failed(failure(for: error, context: context)))
            context.close(promise: nil)
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            // A 1xx is informational; the first final HEADERS is the response, later ones trailers.
            if headers == nil, let status = frame.headers.first(name: ":status"), !status.hasPrefix("1") {
                headers = frame.headers
            }
            if frame.endStream { respond() }
        case .data(let frame):
            if case .byteBuffer(var bytes) = frame.data {
                body.setOrWriteBuffer(&bytes)
            }
            if frame.endStream { respond() }
        case .rstStream(let code):
            finish(.failed(Self.reset(code)))
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failed(failure(for: error, context: context)))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !done {
            finish(.failed(closedFailure(context: context, error: nil)))
        }
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // A stream torn down without ever becoming active still owes its push an outcome.
        if !done {
            finish(.failed(PushFailure(kind: .refused, description: "connection closed before the push was sent")))
        }
    }

    private func failure(for error: any Error, context: ChannelHandlerContext) -> PushFailure {
        if let closed = error as? NIOHTTP2Errors.StreamClosed {
            return Self.reset(closed.errorCode)
        }
        return closedFailure(context: context, error: error)
    }

    private func closedFailure(context: ChannelHandlerContext, error: (any Error)?) -> PushFailure {
        if let watcher = try? context.channel.parent?.pipeline.syncOperations.handler(type: ConnectionWatcher.self) {
            return watcher.closedFailure(error)
        }
        return PushFailure(kind: .connectionClosed, description: error.map { ProviderConnection.oneLine("\($0)") } ?? "connection closed")
    }

    static func reset(_ code: HTTP2ErrorCode) -> PushFailure {
        PushFailure(kind: code == .refusedStream ? .refused : .reset, description: "stream reset by the server (\(code.name))")
    }

    private func respond() {
        guard let headers, let status = headers.first(name: ":status").flatMap(Int.init) else {
            finish(.failed(PushFailure(kind: .other, description: "response without a :status")))
            return
        }
        let text = body.map { String(buffer: $0) } ?? ""
        var response = ProviderAnswer(
            status: status, apnsID: headers.first(name: "apns-id"), uniqueID: headers.first(name: "apns-unique-id"),
            reason: nil, timestamp: nil, body: text)
        if !text.isEmpty, let json = try? JSONValue.parse(text) {
            response.reason = json["reason"]?.stringValue
            response.timestamp = json["timestamp"]?.integerValue
        }
        finish(.response(response))
    }

    private func finish(_ outcome: PushOutcome) {
        guard !done else { return }
        done = true
        completion.succeed(outcome)
    }
}
