/// A parsed JSON document (RFC 8259), kept close to what was written.
///
/// The lint has to know more than Foundation's `JSONSerialization` says: whether an object repeats
/// a key, whether `1` was written as `true`, `1` or `1.0` (Linux's `NSNumber` blurs `true` and `1`).
/// So objects keep their members in order with duplicates, and numbers keep their literal. Payloads
/// are at most a few kilobytes, so a small tree is cheap; parsing is one pass over the bytes.
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
        if let exact = Int64(literal) { return exact }
        guard let double = Double(literal), double.rounded() == double,
              double >= -9_223_372_036_854_775_808, double < 9_223_372_036_854_775_808 else { return nil }
        return Int64(double)
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
        let result: Result<JSONValue, JSONParseError> = bytes.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(buffer)
            do throws(JSONParseError) {
                return .success(try parser.parseDocument())
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
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

/// A recursive-descent reader over the document's bytes.
private struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0
    var depth = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if position != bytes.count {
            throw fail("unexpected text after the JSON value")
        }
        return value
    }

    func fail(_ problem: String, kind: JSONParseError.Kind = .syntax) -> JSONParseError {
        JSONParseError(kind: kind, offset: position, problem: problem)
    }

    var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    mutating func skipWhitespace() {
        while let byte = current,
              byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r")
                || byte == UInt8(ascii: "\t") {
            position += 1
        }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard let byte = current else { throw fail(position == 0 ? "empty document" : "unexpected end of document") }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - position >= count else { throw fail("unexpected end of document") }
        for index in 0..<count where bytes[position + index] != literal.utf8Start[index] {
            throw fail("unexpected character")
        }
        position += count
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > JSONValue.maximumDepth {
            throw fail("nested deeper than \(JSONValue.maximumDepth) levels", kind: .tooDeep)
        }
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enter()
        position += 1
        var members: [JSONValue.Member] = []
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            position += 1
            depth -= 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw fail("expected ':' after a key") }
            position += 1
            skipWhitespace()
            let value = try parseValue()
            members.append(.init(key: key, value: value))
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","):
                position += 1
            case UInt8(ascii: "}"):
                position += 1
                depth -= 1
                return .object(members)
            default:
                throw fail("expected ',' or '}' in an object")
            }
        }
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        position += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            position += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","):
                position += 1
            case UInt8(ascii: "]"):
                position += 1
                depth -= 1
                return .array(elements)
            default:
                throw fail("expected ',' or ']' in an array")
            }
        }
    }

    /// Reads a string starting at its opening quote. Strings without escapes (nearly all of them)
    /// are decoded straight from the document's bytes after their UTF-8 was checked.
    mutating func parseString() throws(JSONParseError) -> String {
        position += 1
        let start = position
        var decoded: [UInt8]? = nil
        while true {
            guard let byte = current else { throw fail("unterminated string") }
            switch byte {
            case UInt8(ascii: "\""):
                let end = position
                position += 1
                if let decoded {
                    return String(decoding: decoded, as: UTF8.self)
                }
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
            case UInt8(ascii: "\\"):
                if decoded == nil {
                    decoded = Array(bytes[start..<position])
                }
                position += 1
                try parseEscape(into: &decoded!)
            case 0..<0x20:
                throw fail("control character in a string")
            case 0x80...:
                let sequenceStart = position
                try skipUTF8Sequence()
                decoded?.append(contentsOf: bytes[sequenceStart..<position])
            default:
                decoded?.append(byte)
                position += 1
            }
        }
    }

    /// Reads what follows a backslash and appends its UTF-8.
    mutating func parseEscape(into output: inout [UInt8]) throws(JSONParseError) {
        guard let byte = current else { throw fail("unterminated string") }
        position += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): output.append(byte)
        case UInt8(ascii: "b"): output.append(0x08)
        case UInt8(ascii: "f"): output.append(0x0C)
        case UInt8(ascii: "n"): output.append(0x0A)
        case UInt8(ascii: "r"): output.append(0x0D)
        case UInt8(ascii: "t"): output.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try parseHex4()
            if (0xD800..<0xDC00).contains(scalar), current == UInt8(ascii: "\\"),
               position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "u") {
                let save = position
                position += 2
                let low = try parseHex4()
                if (0xDC00..<0xE000).contains(low) {
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    position = save
                }
            }
            // A lone surrogate is legal JSON syntax but no character; like most decoders, the
            // reader substitutes U+FFFD rather than refusing the document.
            let character = Unicode.Scalar(scalar) ?? "\u{FFFD}"
            UTF8.encode(character) { output.append($0) }
        default:
            position -= 1
            throw fail("invalid escape")
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard bytes.count - position >= 4 else { throw fail("unterminated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail("invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    /// Checks one multi-byte UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, nothing
    /// above U+10FFFF) and moves past it.
    mutating func skipUTF8Sequence() throws(JSONParseError) {
        let lead = bytes[position]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: throw fail("invalid UTF-8")
        }
        guard bytes.count - position >= length else { throw fail("invalid UTF-8") }
        let second = bytes[position + 1]
        guard second >= low, second <= high else { throw fail("invalid UTF-8") }
        for offset in 2..<length {
            let continuation = bytes[position + offset]
            guard continuation >= 0x80, continuation <= 0xBF else { throw fail("invalid UTF-8") }
        }
        position += length
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = position
        if current == UInt8(ascii: "-") { position += 1 }
        guard let first = current, first.isDecimalDigit else { throw fail("invalid number") }
        position += 1
        if first != UInt8(ascii: "0") {
            skipDigits()
        }
        if current == UInt8(ascii: ".") {
            position += 1
            guard current?.isDecimalDigit == true else { throw fail("invalid number") }
            skipDigits()
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            guard current?.isDecimalDigit == true else { throw fail("invalid number") }
            skipDigits()
        }
        return .number(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self))
    }

    mutating func skipDigits() {
        while current?.isDecimalDigit == true { position += 1 }
    }
}

extension UInt8 {
    var isDecimalDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
}
