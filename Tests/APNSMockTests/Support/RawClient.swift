import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

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

    /// `receiveBuffer` sets SO_RCVBUF before connecting, which caps what the kernel takes in for
    /// a client that stops reading (otherwise loopback autotuning absorbs tens of MB).
    static func connect(
        port: Int, security: Security, receiveBuffer: Int? = nil,
        group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> RawClient {
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
        var bootstrap = ClientBootstrap(group: group)
        if let receiveBuffer {
            bootstrap = bootstrap.channelOption(.socketOption(.so_rcvbuf), value: SocketOptionValue(receiveBuffer))
        }
        let channel = try await bootstrap
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

    /// The client's own port (what the server sees as the peer's).
    var localPort: Int? { channel.localAddress?.port }

    func send(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes)).get()
    }

    func close() async {
        try? await channel.close().get()
    }

    /// Waits until the server closed the connection (or `timeout` passed); returns what arrived
    /// and whether the connection was closed.
    func waitForClose(timeout: TimeAmount = .seconds(10)) async -> (received: [UInt8], closed: Bool, error: String?) {
        await collector.wait(timeout: timeout) { $0.closed }
        return collector.snapshot
    }

    /// Waits until `predicate` holds for the received bytes (or the connection closed, or `timeout`
    /// passed). Woken by each arrival: no polling.
    func waitUntil(timeout: TimeAmount = .seconds(10), _ predicate: @escaping @Sendable ([UInt8]) -> Bool) async -> [UInt8] {
        await collector.wait(timeout: timeout) { predicate($0.received) || $0.closed }
        return collector.snapshot.received
    }

    /// Waits until the channel accepts writes again (or `timeout` passed); whether it does.
    func waitUntilWritable(timeout: TimeAmount = .seconds(2)) async -> Bool {
        if channel.isWritable { return true }
        await collector.wait(timeout: timeout) { [channel] _ in channel.isWritable }
        return channel.isWritable
    }

    var received: [UInt8] { collector.snapshot.received }

    /// Stops reading from the socket, like a client that no longer reads its responses.
    func stopReading() async throws {
        try await channel.setOption(ChannelOptions.autoRead, value: false).get()
    }

    /// Reads again after ``stopReading()``.
    func resumeReading() async throws {
        try await channel.setOption(ChannelOptions.autoRead, value: true).get()
        channel.read()
    }

    /// Whether the channel still accepts writes without queueing past its high watermark.
    var isWritable: Bool { channel.isWritable }

    /// Writes without waiting for the bytes to reach the socket.
    func enqueue(_ bytes: [UInt8]) {
        channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
    }
}

/// What the client received, and the tasks waiting for it to change.
private final class Collector: Sendable {
    struct Snapshot: Sendable {
        var received: [UInt8] = []
        var closed = false
        var error: String?
    }

    private struct State {
        var snapshot = Snapshot()
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Mutex(State())

    var snapshot: (received: [UInt8], closed: Bool, error: String?) {
        state.withLock { ($0.snapshot.received, $0.snapshot.closed, $0.snapshot.error) }
    }

    func append(_ buffer: ByteBuffer) {
        change { $0.received += buffer.readableBytesView }
    }

    func closed(error: String?) {
        change {
            $0.closed = true
            if $0.error == nil { $0.error = error }
        }
    }

    /// Something other than the bytes changed (writability): waiters look again.
    func poke() {
        change { _ in }
    }

    private func change(_ update: (inout Snapshot) -> Void) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            update(&state.snapshot)
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in woken { waiter.resume() }
    }

    /// Returns once `done` holds for the state or `timeout` passes, re-checking on every change.
    func wait(timeout: TimeAmount, until done: @escaping @Sendable (Snapshot) -> Bool) async {
        let deadline = ContinuousClock.now + .nanoseconds(timeout.nanoseconds)
        while ContinuousClock.now < deadline {
            let id = state.withLock { state -> UInt64 in
                state.nextWaiter += 1
                return state.nextWaiter
            }
            let timer = Task { [weak self] in
                try? await Task.sleep(until: deadline, clock: .continuous)
                self?.wake(id)
            }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let satisfied = state.withLock { state -> Bool in
                    if done(state.snapshot) { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if satisfied { continuation.resume() }
            }
            timer.cancel()
            if done(state.withLock { $0.snapshot }) { return }
        }
    }

    private func wake(_ id: UInt64) {
        state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
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

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        collector.poke()
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        collector.closed(error: "\(error)")
        context.close(promise: nil)
    }
}
