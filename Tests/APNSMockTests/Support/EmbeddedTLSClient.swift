@testable import APNSMock
import NIOCore
import NIOEmbedded
import NIOSSL

/// A TLS client with no socket, for driving an ``APNSConnection`` sans I/O: NIOSSL's client
/// handler in an `EmbeddedChannel`. Plaintext written to it comes out as ciphertext for the
/// connection; the connection's ciphertext goes in and comes out as plaintext.
final class EmbeddedTLSClient {
    let channel: EmbeddedChannel
    private let connection: APNSConnection
    /// Plaintext received from the connection so far.
    private(set) var received: [UInt8] = []
    /// How ciphertext reaches the connection: as the client wrote it (a record or a flight per
    /// buffer), in pieces of a given size (a record split across reads), or everything waiting
    /// in one buffer (many records in one read).
    enum Delivery {
        case asWritten
        case pieces(Int)
        case coalesced
    }
    private let delivery: Delivery

    init(to connection: APNSConnection, caPath: String, serverName: String = "localhost", delivery: Delivery = .asWritten) throws {
        self.delivery = delivery
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .file(caPath)
        configuration.applicationProtocols = ["h2"]
        // Apple's host names select an environment by SNI; the test certificate names localhost.
        configuration.certificateVerification = .noHostnameVerification
        let context = try NIOSSLContext(configuration: configuration)
        channel = EmbeddedChannel(handler: try NIOSSLClientHandler(context: context, serverHostname: serverName))
        self.connection = connection
        _ = channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 443))
        pump()
    }

    /// Sends `plaintext` as one write (one TLS record, so the connection reads it in one go), and
    /// moves bytes both ways until neither side has more.
    func send(_ plaintext: [UInt8]) {
        channel.writeAndFlush(ByteBuffer(bytes: plaintext), promise: nil)
        pump()
    }

    /// Sends each of `parts` as its own write (its own TLS record), then moves bytes both ways.
    func send(records parts: [[UInt8]]) {
        for part in parts {
            channel.write(ByteBuffer(bytes: part), promise: nil)
            channel.flush()
        }
        pump()
    }

    /// Moves ciphertext between the client and the connection until both are quiet.
    func pump() {
        for _ in 0..<64 {
            var moved = false
            var waiting = ByteBuffer()
            while var ciphertext = try? channel.readOutbound(as: ByteBuffer.self) {
                moved = true
                switch delivery {
                case .asWritten:
                    connection.receive(ciphertext)
                case .pieces(let size):
                    while let piece = ciphertext.readSlice(length: min(size, ciphertext.readableBytes)),
                          piece.readableBytes > 0 {
                        connection.receive(piece)
                    }
                case .coalesced:
                    waiting.writeBuffer(&ciphertext)
                }
            }
            if waiting.readableBytes > 0 {
                connection.receive(waiting)
            }
            var output = ByteBuffer()
            connection.produceOutput(into: &output, budget: 1 << 20)
            if output.readableBytes > 0 {
                _ = try? channel.writeInbound(output)
                moved = true
            }
            while let plaintext = try? channel.readInbound(as: ByteBuffer.self) {
                received += plaintext.readableBytesView
            }
            if !moved { return }
        }
    }

    /// The HTTP/2 frames received so far.
    var frames: [H2.Frame] { H2.parse(received) }
}
