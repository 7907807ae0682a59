import APNSMockCore

/// The last value of each header on one connection, handed out again when a request repeats it,
/// and the connection's repeat generation (``RepeatKey``).
///
/// Providers (and load tests) send the same path, topic and token over and over: a value whose
/// bytes equal the cached one is neither checked against RFC 9113 again nor decoded into a new
/// String, and requests that repeat it hold the same String object, which lets memos compare
/// values by identity.
///
/// Contract: a value handed out was valid for its field when it was cached; ``generation`` moves
/// whenever a value handed out is not the last one handed out for its field (the per-request
/// fields aside), so two requests that end their header blocks at the same generation and carry
/// the same fields carry the same values.
final class HeaderValueCache {
    /// Indexed by `KnownHeader.rawValue`. Fixed storage rather than an Array, whose every mutation
    /// checks uniqueness.
    private let known: UnsafeMutablePointer<String?>
    private static let knownCount = KnownHeader.allCases.count

    /// Other header names seen on this connection (user-agent, content-length…), each with its
    /// role and last valid value. Only well-formed names are kept, at most ``otherLimit``.
    // Searched and written per header field, from the session's header callback, while the value
    // check is called; only the connection's event loop touches the cache and that check does not
    // reach it, so the run-time exclusivity check is skipped.
    @exclusivity(unchecked) private var others: [(name: String, role: RequestFieldRules.Role, value: String?)] = []
    /// Every cached field has a bit in a ``RepeatKey``: known headers first, then these.
    static let otherLimit = RepeatKey.fieldCapacity - knownCount

    /// See ``RepeatKey``.
    // Read at every header block's end and moved by a new value, from callbacks (as ``others``).
    @exclusivity(unchecked) private(set) var generation: UInt64 = 0

    init() {
        known = .allocate(capacity: Self.knownCount)
        known.initialize(repeating: nil, count: Self.knownCount)
    }

    deinit {
        known.deinitialize(count: Self.knownCount)
        known.deallocate()
    }

    /// The value of a known header as a String if it is valid: the cached one when the bytes
    /// repeat it, else a new one once `isValid` accepts the bytes. `fresh` is set when the value
    /// was not the cached one.
    func value(
        of header: KnownHeader, _ bytes: UnsafeBufferPointer<UInt8>, fresh: inout Bool,
        isValid: (UnsafeBufferPointer<UInt8>) -> Bool
    ) -> String? {
        Self.validated(&known[header.rawValue], bytes, fresh: &fresh, isValid)
    }

    /// A header that is neither a pseudo-header nor a ``KnownHeader``: its name, role and value,
    /// and its index among the cached names (`nil` past ``otherLimit``); `nil` when the name or
    /// the value breaks the rules. `fresh` is set unless both name and value were the cached ones.
    func other(
        _ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>, fresh: inout Bool
    ) -> (name: String, role: RequestFieldRules.Role, value: String, index: Int?)? {
        for index in others.indices where others[index].name.hasSameBytes(as: name) {
            let role = others[index].role
            guard let text = Self.validated(
                &others[index].value, value, fresh: &fresh, { RequestFieldRules.isValid($0, for: role) })
            else { return nil }
            return (others[index].name, role, text, index)
        }
        let role = RequestFieldRules.role(ofName: name)
        guard role != .malformed, role != .connectionSpecific, RequestFieldRules.isValid(value, for: role) else {
            return nil
        }
        fresh = true
        let name = String(decoding: name, as: UTF8.self), text = String(decoding: value, as: UTF8.self)
        guard others.count < Self.otherLimit else {
            return (name, role, text, nil)
        }
        others.append((name, role, text))
        return (name, role, text, others.count - 1)
    }

    /// The bit of a field in a ``RepeatKey``.
    static func bit(known header: KnownHeader) -> UInt64 { 1 << UInt64(header.rawValue) }
    static func bit(other index: Int) -> UInt64 { 1 << UInt64(knownCount + index) }

    /// Notes that a value handed out was not the cached one.
    func valueChanged() {
        generation &+= 1
    }

    private static func validated(
        _ cached: inout String?, _ bytes: UnsafeBufferPointer<UInt8>, fresh: inout Bool,
        _ isValid: (UnsafeBufferPointer<UInt8>) -> Bool
    ) -> String? {
        if let text = cached, text.hasSameBytes(as: bytes) {
            return text
        }
        guard isValid(bytes) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        cached = text
        fresh = true
        return text
    }
}
