import APNSMockCore
import FuzzDriver

/// libFuzzer target: the `authorization` header's provider token (docs/authentication.md) as a
/// client sends it, `bearer <JWT>`, parsed as the request path parses it, and the base64url
/// decoder under it. Nothing may trap; a parsed token must describe itself consistently.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProviderToken(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: start, count: count))
    let text = String(decoding: bytes, as: UTF8.self)
    _ = ProviderToken.parse(authorization: text)
    if let token = ProviderToken.parse(authorization: "bearer " + text) {
        _ = token.keyID
        _ = token.issuer
    }
    _ = Base64URLDecoding.decode(bytes)
    return 0
}

/// The executable's entry point (SwiftPM's `FuzzProviderToken_main`, which `main` is aliased to): libFuzzer's
/// driver with ``fuzzProviderToken(_:_:)``.
@_cdecl("FuzzProviderToken_main")
public func entry(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzDriver_run(argc, argv, { data, size in fuzzProviderToken(data, size) })
}
