internal import COpenSSL

/// A failed OpenSSL call, with the library's error queue drained into readable entries.
///
/// OpenSSL reports errors through a thread-local queue; every call site clears it before the call
/// (``OpenSSLError/clearQueue()``) and, on failure, turns what is queued into this typed error so
/// nothing stale leaks into the next call and nothing is printed.
public struct OpenSSLError: Error, CustomStringConvertible, Sendable {
    /// What the mock was doing, e.g. "loading the server certificate".
    public var operation: String
    /// OpenSSL's own messages, oldest first.
    public var details: [String]

    init(_ operation: String, details: [String]) {
        self.operation = operation
        self.details = details
    }

    public var description: String {
        details.isEmpty ? operation : "\(operation): \(details.joined(separator: "; "))"
    }

    /// Drains OpenSSL's error queue into an error describing `operation`.
    static func drain(_ operation: String) -> OpenSSLError {
        OpenSSLError(operation, details: drainQueue())
    }

    static func drainQueue() -> [String] {
        var details: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            let text = buffer.withUnsafeMutableBufferPointer { pointer -> String in
                ERR_error_string_n(code, pointer.baseAddress, pointer.count)
                return String(cString: pointer.baseAddress!)
            }
            details.append(text)
        }
        return details
    }

    static func clearQueue() {
        ERR_clear_error()
    }
}
