import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// The admin listener's HTTP/1.1 pipeline: Hummingbird's `HTTP1Channel.setup` (2.28) with one
/// difference, ``IgnoredUpgradeHandler`` after the decoder, so that a request asking to upgrade
/// (`Upgrade: h2c`, as Java's `HttpClient` and `curl --http2` send on a new connection) is answered
/// over HTTP/1.1 and the connection stays usable (RFC 9110 §7.8 lets a server ignore `Upgrade`).
enum AdminHTTP1Pipeline {
    /// An upgrade configuration with no upgrader: it makes NIO's decoder keep the bytes that follow
    /// an upgrade request when it is removed (`.forwardBytes`, where a server without upgrade
    /// drops them); the `HTTPServerUpgradeHandler` it adds finds no upgrader for the first request
    /// and leaves the pipeline.
    static var noUpgrade: NIOHTTPServerUpgradeConfiguration { (upgraders: [], completionHandler: { _ in }) }

    static func decoderLimits(_ configuration: HTTP1Channel.Configuration) -> NIOHTTPDecoderLimitConfiguration {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderFieldSize = configuration.httpDecoder.maxHeaderFieldSize
        limits.maxHeaderListSize = configuration.httpDecoder.maxHeaderListSize
        limits.maxHeaderFieldCount = configuration.httpDecoder.maxHeaderFieldCount
        return limits
    }

    static func setup(
        channel: any Channel, configuration: HTTP1Channel.Configuration, logger: Logger
    ) -> EventLoopFuture<HTTP1Channel.Value> {
        channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            let limits = decoderLimits(configuration)
            try pipeline.configureHTTPServerPipeline(
                withPipeliningAssistance: false,  // NIOAsyncChannel serves requests in order
                withServerUpgrade: noUpgrade,
                withErrorHandling: false,  // Hummingbird answers protocol errors itself
                withOutboundHeaderValidation: false,  // HTTP types validate the fields already
                withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: limits)
            let backlog = UpgradeBacklog()
            try pipeline.addHandler(UpgradeBacklogGuard(backlog: backlog), position: .first)
            try pipeline.addHandler(IgnoredUpgradeHandler(limits: limits, backlog: backlog))
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try pipeline.addHandlers(configuration.additionalChannelHandlers())
            try pipeline.addHandler(
                HTTPConnectionStateHandler(idleTimeout: configuration.idleTimeout.map { .init($0) }, logger: logger))
            return try NIOAsyncChannel(
                wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }
}

/// Answers a request that asks to upgrade as any other and keeps the connection's HTTP/1.1 going.
///
/// NIO's request decoder (llhttp) stops parsing after a request with `Upgrade` and
/// `Connection: upgrade` (or a CONNECT): the bytes after it belong to the new protocol if the
/// upgrade happens, and nothing in NIO 2.101 tells it that none did. Left so, the next request on
/// the connection is never read (the client's second call waits and fails). So once such a
/// request has ended and its answer is written, this handler replaces the stopped decoder and its
/// paired response encoder with a fresh pair, which parses the bytes the old decoder kept.
/// Meanwhile the connection is still read (so that a client that leaves is seen at once, as an
/// event stream needs), and ``UpgradeBacklogGuard`` bounds what piles up in the stopped decoder.
final class IgnoredUpgradeHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let limits: NIOHTTPDecoderLimitConfiguration
    private let backlog: UpgradeBacklog
    /// Request heads read and response ends written on this connection.
    private var requests = 0
    private var responses = 0
    /// The number (counted in `requests`) of the request after which the decoder stops.
    private var stoppingRequest: Int?
    /// That request has ended: the decoder has stopped.
    private var decoderStopped = false
    /// The decoder is being replaced.
    private var replacing = false

    init(limits: NIOHTTPDecoderLimitConfiguration, backlog: UpgradeBacklog) {
        self.limits = limits
        self.backlog = backlog
    }

    /// Whether llhttp takes `head` for an upgrade and stops after its message: an `Upgrade`
    /// header with `upgrade` among the `Connection` tokens, or CONNECT (its
    /// `llhttp__before_headers_complete`).
    static func stopsDecoder(_ head: HTTPRequestHead) -> Bool {
        if head.method == .CONNECT { return true }
        guard head.headers.contains(name: "upgrade") else { return false }
        return head.headers[canonicalForm: "connection"].contains { $0.lowercased() == "upgrade" }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch part {
        case .head(let head):
            requests += 1
            if Self.stopsDecoder(head) {
                stoppingRequest = requests
                decoderStopped = false
            }
        case .body:
            break
        case .end:
            if stoppingRequest == requests {
                decoderStopped = true
                backlog.stopped = true
            }
        }
        context.fireChannelRead(data)
        if case .end = part { replaceDecoderIfAnswered(context: context) }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let isEnd: Bool
        if case .end = unwrapOutboundIn(data) { isEnd = true } else { isEnd = false }
        context.write(data, promise: promise)
        if isEnd {
            responses += 1
            replaceDecoderIfAnswered(context: context)
        }
    }

    /// Once the stopping request has ended and its answer (and every earlier one) is written,
    /// puts a fresh encoder and decoder after the stopped decoder and removes the old pair; the
    /// old decoder hands the bytes it kept to the new one as it leaves.
    private func replaceDecoderIfAnswered(context: ChannelHandlerContext) {
        guard decoderStopped, !replacing, let stopping = stoppingRequest, responses >= stopping else { return }
        stoppingRequest = nil
        decoderStopped = false
        replacing = true
        let pipeline = context.pipeline.syncOperations
        do {
            let encoder = try pipeline.handler(type: HTTPResponseEncoder.self)
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try pipeline.configureHTTPServerPipeline(
                position: .after(decoder), withPipeliningAssistance: false, withServerUpgrade: AdminHTTP1Pipeline.noUpgrade,
                withErrorHandling: false, withOutboundHeaderValidation: false, withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: limits)
            // The encoder first, synchronously: nothing may be written through it once the new one
            // is in place.
            pipeline.removeHandler(encoder, promise: nil)
            let removed = context.eventLoop.makePromise(of: Void.self)
            pipeline.removeHandler(decoder, promise: removed)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            let loopBoundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
            removed.futureResult.whenComplete { _ in
                let handler = handler.value
                handler.replacing = false
                if !handler.decoderStopped {
                    handler.backlog.stopped = false
                    handler.backlog.bytes = 0
                }
                // The bytes the old decoder kept may have held another such request.
                handler.replaceDecoderIfAnswered(context: loopBoundContext.value)
            }
        } catch {
            // The connection's pipeline is not what it was built as (it is being torn down).
            context.close(promise: nil)
        }
    }
}

/// What ``IgnoredUpgradeHandler`` and ``UpgradeBacklogGuard`` of one connection share, on its
/// event loop.
final class UpgradeBacklog {
    /// The decoder has stopped after a request that asked to upgrade and is not replaced yet.
    var stopped = false
    /// Bytes read meanwhile, which the stopped decoder keeps.
    var bytes = 0
    /// A client waiting for its answer sends nothing (or its next request, pipelined): more than
    /// this is no HTTP/1.1 client's doing.
    static let limit = 64 * 1024
}

/// Sees the raw bytes before the decoder: while the decoder is stopped, closes a connection that
/// sends more than ``UpgradeBacklog/limit``, which the stopped decoder would otherwise keep
/// without bound (it is read on so that a client's leaving is seen).
final class UpgradeBacklogGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private let backlog: UpgradeBacklog

    init(backlog: UpgradeBacklog) {
        self.backlog = backlog
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if backlog.stopped {
            backlog.bytes += unwrapInboundIn(data).readableBytes
            if backlog.bytes > UpgradeBacklog.limit {
                context.close(promise: nil)
                return
            }
        }
        context.fireChannelRead(data)
    }
}
