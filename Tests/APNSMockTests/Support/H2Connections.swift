import APNSMock
import APNSMockTesting

/// Raw HTTP/2 connections to a harness mock: opening one, reading the frames it received, and
/// reading the server's stream limits from them.
enum H2Connections {
    /// Harness mocks that allow the raw client's concurrent streams before its token is seen.
    static func configure(_ configuration: inout ServerConfiguration) {
        configuration.http2.streamsBeforeAuthentication = 100
    }

    /// A TLS connection negotiated for h2 that has sent the connection preface and an empty SETTINGS.
    static func connect(_ mock: RunningMock) async throws -> RawClient {
        let client = try await RawClient.connect(port: mock.apnsPort, security: .tls(caPath: mock.caPath, alpn: ["h2"]))
        try await client.send(H2.preface + H2.settings())
        return client
    }

    /// The frames `client` has received so far.
    static func frames(_ client: RawClient) -> [H2.Frame] { H2.parse(client.received) }

    /// MAX_CONCURRENT_STREAMS values of the server's (non-ACK) SETTINGS frames, in order.
    static func maxConcurrentStreams(in frames: [H2.Frame]) -> [UInt32] {
        frames.filter { $0.type == H2.FrameType.settings.rawValue && $0.flags == 0 }.flatMap { frame in
            stride(from: 0, to: frame.payload.count, by: 6).compactMap { offset in
                frame.payload[offset] == 0 && frame.payload[offset + 1] == 3 ? H2.readBE32(frame.payload, offset + 2) : nil
            }
        }
    }
}
