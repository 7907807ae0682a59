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

    init(to connection: APNSConnection, caPath: String, serverName: String = "localhost") throws {
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

    /// Moves ciphertext between the client and the connection until both are quiet.
    func pump() {
        for _ in 0..<64 {
            var moved = false
            while let ciphertext = try? channel.readOutbound(as: ByteBuffer.self) {
                connection.receive(ciphertext)
                moved = true
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
