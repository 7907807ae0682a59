@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Logging
import NIOCore
import Testing

/// ``APNSConnection`` driven with bytes alone, no sockets.
@Suite("Sans-I/O connection")
struct SansIOConnectionTests {
    func makeConnection() throws -> APNSConnection {
        let material = try MockHarness.sharedCertificates()
        let context = try TLSContext(
            certificateChainPath: material.serverCertificatePath, privateKeyPath: material.serverKeyPath,
            clientCAPath: material.caPath)
        let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let configuration = ServerConfiguration()
        let router = APIRouter(
            role: .apns, configuration: configuration, tokenKeys: .empty, state: MockState(configuration: configuration),
            logger: logger)
        return try APNSConnection(id: 1, tlsContext: context, settings: HTTP2Settings(), router: router, logger: logger)
    }

    @Test func malformedHandshakeRecordEndsTheConnectionWithAnAlert() throws {
        let connection = try makeConnection()
        // A TLS handshake record whose message is of an unknown type.
        let garbage: [UInt8] = [0x16, 0x03, 0x01, 0x00, 0x05, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        connection.receive(ByteBuffer(bytes: garbage))
        #expect(connection.isFinished)
        var output = ByteBuffer()
        connection.produceOutput(into: &output, budget: 1 << 16)
        // A TLS alert record: content type 21.
        #expect(output.readableBytesView.first == 21)
    }

    @Test func partialClientHelloWaitsForMore() throws {
        let connection = try makeConnection()
        let partial: [UInt8] = [0x16, 0x03, 0x01, 0x00, 0x80]
        connection.receive(ByteBuffer(bytes: partial))
        #expect(!connection.isFinished)
        #expect(!connection.isHandshakeComplete)
    }
}
