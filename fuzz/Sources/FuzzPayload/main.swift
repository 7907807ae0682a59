import APNSMockCore
import FuzzDriver

/// libFuzzer target: a request body as the device API reads it — the JSON reader
/// (`JSONValue.parse`) and the payload lint (`Lint.findings`) for a push type chosen by the first
/// byte. Nothing may trap, however deep, long or malformed the document.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPayload(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: start, count: count))
    guard let selector = bytes.first else { return 0 }
    let payload = Array(bytes.dropFirst())
    _ = try? JSONValue.parse(payload)
    let types = PushType.allCases
    let pushType: PushType? = Int(selector) < types.count ? types[Int(selector)] : nil
    _ = Lint.findings(payload: payload, pushType: pushType)
    return 0
}

/// The executable's entry point (SwiftPM's `FuzzPayload_main`, which `main` is aliased to): libFuzzer's
/// driver with ``fuzzPayload(_:_:)``.
@_cdecl("FuzzPayload_main")
public func entry(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzDriver_run(argc, argv, { data, size in fuzzPayload(data, size) })
}
