import APNSMockCore
import FuzzDriver

/// libFuzzer target: a configuration file (docs/configuration.md) through
/// `Configuration.parse(yaml:file:)`. Any text must give a configuration or a ConfigurationError
/// naming a field, never a trap.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfiguration(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    do {
        _ = try Configuration.parse(yaml: text, file: "fuzz.yaml")
    } catch {
        _ = error.description
    }
    return 0
}

/// The executable's entry point (SwiftPM's `FuzzConfiguration_main`, which `main` is aliased to): libFuzzer's
/// driver with ``fuzzConfiguration(_:_:)``.
@_cdecl("FuzzConfiguration_main")
public func entry(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzDriver_run(argc, argv, { data, size in fuzzConfiguration(data, size) })
}
