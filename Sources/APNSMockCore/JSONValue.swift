/// A parsed JSON document (RFC 8259), kept close to what was written.
///
/// Objects keep their members in order with duplicates, and numbers keep their literal, so nothing
/// the sender wrote is lost (Foundation's `JSONSerialization` drops repeated keys, and Linux's
/// `NSNumber` blurs `true` and `1`). The tree is for places that want one, such as admin API bodies;
/// the per-request lint reads a ``JSONTape`` instead, which allocates no strings.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's literal exactly as written (e.g. `1`, `-0.5e3`); see ``doubleValue`` and
    /// ``integerValue``.
    case number(String)
    case string(String)
    case array([JSONValue])
    /// Members in document order; a repeated key appears once per occurrence.
    case object([Member])

    /// One `"key": value` of an object.
    public struct Member: Sendable, Equatable {
        public var key: String
        public var value: JSONValue

        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    /// The value of the first member named `key`, if this is an object that has one.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    /// The members, if this is an object.
    public var members: [Member]? {
        if case .object(let members) = self { return members }
        return nil
    }

    public var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let bool) = self { return bool }
        return nil
    }

    public var isNull: Bool { self == .null }

    /// Whether this is an array or an object.
    public var isContainer: Bool {
        switch self {
        case .array, .object: return true
        default: return false
        }
    }

    /// The number's value, if this is a number.
    public var doubleValue: Double? {
        if case .number(let literal) = self { return Double(literal) }
        return nil
    }

    /// The number's value if it is a whole number that fits 64 bits, however it was written
    /// (`3`, `3.0` and `3e0` are all 3), since Apple's decoder reads numbers by value.
    public var integerValue: Int64? {
        guard case .number(let literal) = self else { return nil }
        return JSONTape.integer(fromLiteral: literal)
    }

    /// A short name of the value's kind for messages: "object", "string", …
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    /// Deepest nesting of arrays and objects the parser follows. Real payloads nest a handful of
    /// levels; the cap keeps recursion far from the stack limit of a small thread.
    public static let maximumDepth = 64

    /// Parses one JSON text: UTF-8, optional surrounding whitespace, nothing after the value.
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        let tape = try JSONTape(bytes)
        return JSONValue(tape: tape, index: tape.root)
    }

    /// The value at token `index` of `tape`, with its strings decoded.
    init(tape: JSONTape, index: Int) {
        switch tape.kind(index) {
        case .object:
            self = .object(tape.members(index).map { member in
                Member(key: tape.string(member.key), value: JSONValue(tape: tape, index: member.value))
            })
        case .array:
            self = .array(tape.elements(index).map { JSONValue(tape: tape, index: $0) })
        case .string:
            self = .string(tape.string(index))
        case .number:
            self = .number(tape.literal(index))
        case .true:
            self = .bool(true)
        case .false:
            self = .bool(false)
        case .null:
            self = .null
        }
    }

    /// Parses the UTF-8 of `text`.
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }
}

/// Why a text is not JSON the lint can read.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// Not JSON: bad syntax, bad UTF-8, trailing garbage.
        case syntax
        /// Valid so far but nested deeper than ``JSONValue/maximumDepth``.
        case tooDeep
    }

    public var kind: Kind
    /// Byte offset where reading stopped.
    public var offset: Int
    public var problem: String

    public var description: String { "\(problem) at byte \(offset)" }
}

extension UInt8 {
    var isDecimalDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
}
