@testable import APNSMock
import APNSMockCore
import FuzzDriver

/// libFuzzer target: the HTTP/2 session fed raw bytes without TLS (sans-I/O, as
/// HTTP2SessionTests drives it), after the client preface. The first byte sets how the input is
/// cut into reads; between reads the session's output is drained. Streams are answered at once,
/// answered with a body, left for later, or reset, by their id, so every phase is reached; the
/// ones left are answered after the next read. Nothing may trap or leak past the input.
final class Answers: HTTP2SessionDelegate {
    var session: HTTP2Session?
    var later: [(stream: HTTP2Stream, id: Int32)] = []
    /// The APIs' own responses, so their header fields are laid out as in the server: generated
    /// and echoed ids, a unique id, a channel ID as text, error bodies.
    static let generated = UUIDValue(high: 0x0123_4567_89AB_4CDE, low: 0x8123_4567_89AB_CDEF)
    static let accepted = APNSResponse.accepted(apnsID: .generated(generated), uniqueID: generated)
    static let rejected = APNSResponse.rejected(
        Rejection(.badDeviceToken), apnsID: .echoed("0A1B2C3D-0000-4000-8000-00000000000A"))
    static let created = BroadcastResponse(status: 201, requestID: .generated(generated), channelID: "dHN0LTEyMzQ1Njc4OTAxMjM0NQ==")
    static let unregistered = APNSResponse.rejected(Rejection(.unregistered, timestamp: 1), apnsID: .generated(generated))

    func session(_ session: HTTP2Session, didReceive stream: HTTP2Stream) {
        switch stream.id % 16 {
        case 1, 9: session.submit(Self.accepted, on: stream, id: stream.id)
        case 3: session.submit(Self.rejected, on: stream, id: stream.id)
        case 7: session.submit(Self.created, on: stream, id: stream.id)
        case 5, 13: later.append((stream, stream.id))
        default: session.reset(stream, id: stream.id, code: .internalError)
        }
    }

    func session(_ session: HTTP2Session, heldStreamClosed id: Int32) {}

    func answerLater() {
        guard let session else { return }
        for (stream, id) in later {
            session.submit(Self.unregistered, on: stream, id: id)
        }
        later.removeAll()
    }
}

let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP2Session(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: start, count: count))
    guard let selector = bytes.first else { return 0 }
    let answers = Answers()
    var settings = HTTP2Settings()
    settings.maxConcurrentStreams = 100
    guard let session = try? HTTP2Session(settings: settings, delegate: answers) else { return 0 }
    answers.session = session
    let input = preface + bytes.dropFirst()
    let chunk = max(1, Int(selector) * 7)
    var offset = 0
    while offset < input.count {
        let end = min(input.count, offset + chunk)
        let failed = input[offset..<end].withUnsafeBytes { session.receive($0) } != nil
        _ = session.send { _ in true }
        answers.answerLater()
        _ = session.send { _ in true }
        if failed || (!session.wantsRead && !session.wantsWrite) { break }
        offset = end
    }
    _ = session.inspectStreams(now: 1_000_000_000, receiving: 1, answering: 1)
    answers.session = nil
    return 0
}

/// The executable's entry point (SwiftPM's `FuzzHTTP2Session_main`, which `main` is aliased to): libFuzzer's
/// driver with ``fuzzHTTP2Session(_:_:)``.
@_cdecl("FuzzHTTP2Session_main")
public func entry(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzDriver_run(argc, argv, { data, size in fuzzHTTP2Session(data, size) })
}
