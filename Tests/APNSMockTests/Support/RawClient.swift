import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// A client that sends exactly the bytes a test gives it, over plain TCP or over TLS (swift-nio-ssl,
/// an implementation independent of the server's OpenSSL), and collects every byte it receives.
/// Hostile cases (garbage, half-sent requests, hand-made frames) are written with it.
final class RawClient: Sendable {
    private let channel: Channel
    private let collector: Collector

    enum Security {
        case plaintext
        /// TLS trusting `caPath`, offering `alpn` (none when empty), naming `serverName` in SNI.
        case tls(caPath: String, alpn: [String], serverName: String? = "localhost")
    }

    private init(channel: Channel, collector: Collector) {
        self.channel = channel
        self.collector = collector
    }

    static func connect(port: Int, security: Security, group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> RawClient {
        let collector = Collector()
        let sslContext: NIOSSLContext?
        let serverName: String?
        switch security {
        case .plaintext:
            sslContext = nil
            serverName = nil
        case .tls(let caPath, let alpn, let name):
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.trustRoots = .file(caPath)
            configuration.applicationProtocols = alpn
            sslContext = try NIOSSLContext(configuration: configuration)
            serverName = name
        }
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let sslContext {
                        try channel.pipeline.syncOperations.addHandler(
                            NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
                    }
                    try channel.pipeline.syncOperations.addHandler(CollectingHandler(collector: collector))
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        return RawClient(channel: channel, collector: collector)
    }

    func send(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes)).get()
    }

    func close() async {
        try? await channel.close().get()
    }

    /// Waits until the server closed the connection (or `timeout` passed); returns what arrived
    /// and whether the connection was closed.
    func waitForClose(timeout: TimeAmount = .seconds(10)) async -> (received: [UInt8], closed: Bool, error: String?) {
        let deadline = NIODeadline.now() + timeout
        while NIODeadline.now() < deadline {
            if collector.snapshot.closed { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return collector.snapshot
    }

    /// Waits until `predicate` holds for the received bytes (or `timeout` passed).
    func waitUntil(timeout: TimeAmount = .seconds(10), _ predicate: ([UInt8]) -> Bool) async -> [UInt8] {
        let deadline = NIODeadline.now() + timeout
        while NIODeadline.now() < deadline {
            let snapshot = collector.snapshot
            if predicate(snapshot.received) || snapshot.closed { return snapshot.received }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return collector.snapshot.received
    }

    var received: [UInt8] { collector.snapshot.received }

    /// Stops reading from the socket, like a client that no longer reads its responses.
    func stopReading() async throws {
        try await channel.setOption(ChannelOptions.autoRead, value: false).get()
    }

    /// Whether the channel still accepts writes without queueing past its high watermark.
    var isWritable: Bool { channel.isWritable }

    /// Writes without waiting for the bytes to reach the socket.
    func enqueue(_ bytes: [UInt8]) {
        channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
    }
}

private final class Collector: Sendable {
    private let state = NIOLockedValueBox((received: [UInt8](), closed: false, error: String?.none))

    var snapshot: (received: [UInt8], closed: Bool, error: String?) { state.withLockedValue { $0 } }

    func append(_ buffer: ByteBuffer) {
        state.withLockedValue { $0.received += buffer.readableBytesView }
    }

    func closed(error: String?) {
        state.withLockedValue {
            $0.closed = true
            if $0.error == nil { $0.error = error }
        }
    }
}

private final class CollectingHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let collector: Collector

    init(collector: Collector) {
        self.collector = collector
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        collector.append(unwrapInboundIn(data))
    }

    func channelInactive(context: ChannelHandlerContext) {
        collector.closed(error: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        collector.closed(error: "\(error)")
        context.close(promise: nil)
    }
}
