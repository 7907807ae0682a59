import APNSMock
import APNSMockCore
import FuzzDriver

/// libFuzzer target: what the admin API decodes from a request (docs/admin-api.md). The first
/// byte picks the decoder: a fault rule (`FaultRule.decode(json:)`), a device entry
/// (`DeviceEntry.decode`), or query parameters (`RecordQuery(parameters:)`, the rest of the
/// input read as `name=value` lines). Every input must decode or be refused with an error.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAdminRequests(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: start, count: count))
    guard let selector = bytes.first else { return 0 }
    let rest = Array(bytes.dropFirst())
    switch selector % 3 {
    case 0:
        if let json = try? JSONValue.parse(rest) {
            _ = try? FaultRule.decode(json: json)
            _ = try? FaultRule.decode(json: json, maxConcurrentStreams: 1000)
        }
    case 1:
        if let json = try? JSONValue.parse(rest) {
            _ = try? DeviceEntry.decode(json: json)
            _ = try? DeviceEntry.decode(json: json, strictTokens: true, knownApps: ["com.example.app"])
        }
    default:
        var parameters: [String: String] = [:]
        for line in String(decoding: rest, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            parameters[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        _ = try? RecordQuery(parameters: parameters)
        _ = try? RecordQuery(parameters: parameters, extra: ["count", "timeout"])
    }
    return 0
}

/// The executable's entry point (SwiftPM's `FuzzAdminRequests_main`, which `main` is aliased to): libFuzzer's
/// driver with ``fuzzAdminRequests(_:_:)``.
@_cdecl("FuzzAdminRequests_main")
public func entry(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzDriver_run(argc, argv, { data, size in fuzzAdminRequests(data, size) })
}
