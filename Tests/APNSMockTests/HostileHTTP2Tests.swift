@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import NIOCore
import Testing

/// HTTP/2 abuses: stream ids reused or skipped, and the floods nghttp2's own limits stop (kept as
/// regressions, each ending as ``Hostile/expectHealthy(_:residentBefore:allowanceMiB:sourceLocation:)``).
@Suite("HTTP/2 abuses", .timeLimit(.minutes(2)))
struct HostileHTTP2Tests {
    // MARK: HTTP/2 details

    // DATA past the window is judged in HTTP2SessionTests (dataBeyondTheWindowIsAFlowControlError):
    // over a socket, whether a burst is past the window depends on how the server's reads split
    // it (the window is credited back between reads), so only the sans-I/O test is exact.

    @Test func headersOnAReusedStreamIDGetsStreamClosed() async throws {
        try await ServerProcess.withRunning { mock in
            let before = mock.residentKiB
            let client = try await Hostile.tlsClient(mock)
            try await client.send(H2.preface + H2.settings() + H2.request(stream: 1, token: Pushes.token, body: Pushes.body))
            _ = await client.waitUntil { Hostile.hasResponse(H2.parse($0), stream: 1) }
            try await client.send(H2.request(stream: 1, token: Pushes.token, body: Pushes.body))
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            #expect(H2.parse(outcome.received).compactMap(\.goaway).first?.errorCode == HTTP2ErrorCode.streamClosed.rawValue)
            try await Hostile.expectHealthy(mock, residentBefore: before)
        }
    }

    // MARK: Floods that already met their limits (kept as regressions)

    /// CVE-2023-44487: streams opened and reset at once, by the thousand. nghttp2's reset rate
    /// limit ends the connection; memory stays flat.
    @Test func rapidReset() async throws {
        try await ServerProcess.withRunning { mock in
            let before = mock.residentKiB
            let client = try await Hostile.tlsClient(mock)
            try await client.send(H2.preface + H2.settings())
            var stream: UInt32 = 1
            for _ in 0..<50 {
                var batch: [UInt8] = []
                for _ in 0..<200 {
                    batch += H2.headers(stream: stream, Hostile.postHeaders, endStream: false)
                    batch += H2.frame(.rstStream, stream: stream, payload: H2.be32(HTTP2ErrorCode.cancel.rawValue))
                    stream += 2
                }
                guard (try? await client.send(batch)) != nil else { break }
            }
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            try await Hostile.expectHealthy(mock, residentBefore: before)
        }
    }

    /// CVE-2024-27316 style: a header block that never ends, CONTINUATION after CONTINUATION.
    @Test func continuationFlood() async throws {
        try await ServerProcess.withRunning { mock in
            let before = mock.residentKiB
            let client = try await Hostile.tlsClient(mock)
            var bytes = H2.preface + H2.settings()
            bytes += H2.frame(.headers, stream: 1, payload: H2.headerBlock(Array(Hostile.postHeaders.prefix(4))))
            for index in 0..<20_000 {
                bytes += H2.frame(.continuation, stream: 1, payload: H2.headerBlock([("x-flood-\(index % 100)", "v")]))
            }
            try? await client.send(bytes)
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            try await Hostile.expectHealthy(mock, residentBefore: before)
        }
    }

    /// HPACK bomb: one 4 KB field put in the dynamic table, then referenced by a one-byte index
    /// thousands of times. The header-list limit answers the stream 431 (the rest of the block is
    /// decoded and dropped, nothing kept); the connection carries on.
    @Test func hpackBomb() async throws {
        // Two streams before the first answer: allowed more than APNs' one pre-auth stream.
        try await ServerProcess.withRunning(yaml: "server: { streamsBeforeAuthentication: 10 }\n") { mock in
            let before = mock.residentKiB
            let client = try await Hostile.tlsClient(mock)
            var block = H2.headerBlock(Array(Hostile.postHeaders.prefix(4)))
            // Literal with incremental indexing, new name (0x40): lands at dynamic index 62.
            let name = Array("x-bomb".utf8)
            let value = [UInt8](repeating: 0x62, count: 4000)
            block += [0x40, UInt8(name.count)] + name + [0x7F] + Self.hpackLength(value.count - 127) + value
            block += [UInt8](repeating: 0x80 | 62, count: 10_000)
            try await client.send(
                H2.preface + H2.settings() + H2.frame(.headers, flags: H2.endHeaders | H2.endStream, stream: 1, payload: block)
                    + H2.request(stream: 3, token: Pushes.token, body: Pushes.body))
            let received = await client.waitUntil {
                Hostile.hasResponse(H2.parse($0), stream: 3) && Hostile.hasResponse(H2.parse($0), stream: 1)
            }
            let frames = H2.parse(received)
            #expect(!frames.contains { $0.stream == 1 && $0.type == H2.FrameType.rstStream.rawValue })
            #expect(Hostile.hasResponse(frames, stream: 1), "431")
            #expect(Hostile.hasResponse(frames, stream: 3))
            await client.close()
            try await Hostile.expectHealthy(mock, residentBefore: before)
        }
    }

    static func hpackLength(_ remainder: Int) -> [UInt8] {
        var out: [UInt8] = []
        var value = remainder
        while value >= 128 {
            out.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        out.append(UInt8(value))
        return out
    }

    /// PING after PING from a client that never reads the answers: nghttp2 stops at its limit of
    /// queued acknowledgements and the connection ends, instead of queueing without bound.
    @Test func pingFlood() async throws {
        try await ServerProcess.withRunning { mock in
            let before = mock.residentKiB
            let client = try await Hostile.tlsClient(mock)
            try await client.send(H2.preface + H2.settings())
            try await client.stopReading()
            let ping = H2.frame(.ping, stream: 0, payload: [UInt8](repeating: 7, count: 8))
            let batch = Array([[UInt8]](repeating: ping, count: 1000).joined())
            for _ in 0..<200 {
                guard client.isWritable else { break }
                client.enqueue(batch)
                await Task.yield()
            }
            try? await client.resumeReading()
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            try await Hostile.expectHealthy(mock, residentBefore: before)
        }
    }

    /// Random bytes where frames belong: GOAWAY and close.
    @Test func garbageAfterThePreface() async throws {
        try await ServerProcess.withRunning { mock in
            let before = mock.residentKiB
            let client = try await Hostile.tlsClient(mock)
            var generator = SystemRandomNumberGenerator()
            try? await client.send(H2.preface + H2.settings() + (0..<65_536).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let outcome = await client.waitForClose()
            #expect(outcome.closed)
            try await Hostile.expectHealthy(mock, residentBefore: before)
        }
    }
}
