/// A JSON document read into one flat list of tokens that point into the document's bytes.
///
/// The lint runs on every request, so reading a payload must not cost a string per key and an
/// array per object. The tape validates the whole document (syntax and UTF-8) in one pass and
/// allocates only its token list; strings are decoded only when someone asks for one (a message, a
/// key with escapes). ``JSONValue`` is built from a tape when a tree is wanted.
///
/// Layout: a container's token is followed by its children; in an object each member is its key
/// token (a string) followed by its value's tokens. Every token knows the index just past its
/// subtree (``Token/next``), so siblings are reached by skipping, and its parent, so a path can be
/// rebuilt for a message.
struct JSONTape {
    enum Kind: UInt8 {
        case object, array, string, number, `true`, `false`, null
    }

    struct Token {
        var kind: Kind
        /// For strings: whether the text has escapes, so its bytes are not its value.
        var hasEscapes: Bool
        /// For strings, the bytes between the quotes; for numbers, the literal; for containers,
        /// from the opening bracket to just past the closing one.
        var start: Int32
        var end: Int32
        /// Index of the first token after this value (and its children).
        var next: Int32
        /// Index of the enclosing container's token, -1 for the root.
        var parent: Int32
    }

    let bytes: [UInt8]
    private(set) var tokens: [Token]

    /// Reads `bytes`, which the tape keeps (the array's storage is shared, not copied).
    init(_ bytes: [UInt8]) throws(JSONParseError) {
        self.bytes = bytes
        var tokens: [Token] = []
        tokens.reserveCapacity(bytes.count / 4 + 4)
        var parser = TapeParser(bytes: bytes, tokens: tokens)
        try parser.parseDocument()
        self.tokens = parser.tokens
    }

    var root: Int { 0 }

    func kind(_ index: Int) -> Kind { tokens[index].kind }

    /// The (key, value) token indexes of an object's members, in order.
    func members(_ object: Int) -> MemberIterator {
        MemberIterator(tape: self, position: object + 1, end: Int(tokens[object].next))
    }

    /// The token indexes of an array's elements.
    func elements(_ array: Int) -> ElementIterator {
        ElementIterator(tape: self, position: array + 1, end: Int(tokens[array].next))
    }

    struct MemberIterator: Sequence, IteratorProtocol {
        let tape: JSONTape
        var position: Int
        let end: Int

        mutating func next() -> (key: Int, value: Int)? {
            guard position < end else { return nil }
            let key = position
            let value = position + 1
            position = Int(tape.tokens[value].next)
            return (key, value)
        }
    }

    struct ElementIterator: Sequence, IteratorProtocol {
        let tape: JSONTape
        var position: Int
        let end: Int

        mutating func next() -> Int? {
            guard position < end else { return nil }
            defer { position = Int(tape.tokens[position].next) }
            return position
        }
    }

    /// The value of `object`'s first member whose key is `name`.
    func member(_ object: Int, _ name: StaticString) -> Int? {
        for (key, value) in members(object) where keyEquals(key, name) {
            return value
        }
        return nil
    }

    /// Whether string token `index` has the value `name`, compared without decoding when the
    /// string has no escapes.
    func keyEquals(_ index: Int, _ name: StaticString) -> Bool {
        let token = tokens[index]
        if token.hasEscapes {
            return string(index) == name.description
        }
        let count = Int(token.end - token.start)
        guard count == name.utf8CodeUnitCount else { return false }
        let start = Int(token.start)
        for offset in 0..<count where bytes[start + offset] != name.utf8Start[offset] {
            return false
        }
        return true
    }

    /// Whether string tokens `a` and `b` have the same value.
    func stringsEqual(_ a: Int, _ b: Int) -> Bool {
        let first = tokens[a]
        let second = tokens[b]
        if first.hasEscapes || second.hasEscapes {
            return string(a) == string(b)
        }
        let count = Int(first.end - first.start)
        guard count == Int(second.end - second.start) else { return false }
        return bytes[Int(first.start)..<Int(first.end)].elementsEqual(bytes[Int(second.start)..<Int(second.end)])
    }

    /// The decoded value of string token `index`.
    func string(_ index: Int) -> String {
        let token = tokens[index]
        let raw = bytes[Int(token.start)..<Int(token.end)]
        guard token.hasEscapes else { return String(decoding: raw, as: UTF8.self) }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(raw.count)
        var position = raw.startIndex
        while position < raw.endIndex {
            let byte = raw[position]
            position += 1
            guard byte == UInt8(ascii: "\\") else {
                decoded.append(byte)
                continue
            }
            let escape = raw[position]
            position += 1
            switch escape {
            case UInt8(ascii: "b"): decoded.append(0x08)
            case UInt8(ascii: "f"): decoded.append(0x0C)
            case UInt8(ascii: "n"): decoded.append(0x0A)
            case UInt8(ascii: "r"): decoded.append(0x0D)
            case UInt8(ascii: "t"): decoded.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(raw, at: position)
                position += 4
                if (0xD800..<0xDC00).contains(scalar), position + 6 <= raw.endIndex,
                   raw[position] == UInt8(ascii: "\\"), raw[position + 1] == UInt8(ascii: "u") {
                    let low = hex4(raw, at: position + 2)
                    if (0xDC00..<0xE000).contains(low) {
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        position += 6
                    }
                }
                // A lone surrogate is legal JSON syntax but no character; like most decoders,
                // the tape substitutes U+FFFD rather than refusing the document.
                UTF8.encode(Unicode.Scalar(scalar) ?? "\u{FFFD}") { decoded.append($0) }
            default:
                decoded.append(escape)  // \" \\ \/
            }
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    /// Four hex digits the parser already checked.
    private func hex4(_ raw: ArraySlice<UInt8>, at position: Int) -> UInt32 {
        var value: UInt32 = 0
        for byte in raw[position..<position + 4] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            default: digit = byte - UInt8(ascii: "A") + 10
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// The literal text of a number token (or any token's bytes).
    func literal(_ index: Int) -> String {
        let token = tokens[index]
        return String(decoding: bytes[Int(token.start)..<Int(token.end)], as: UTF8.self)
    }

    /// A number token's value if it is a whole number that fits 64 bits, however it was written
    /// (`3`, `3.0` and `3e0` are all 3), since Apple's decoder reads numbers by value. Plain
    /// integers, the usual case, are read from the bytes without making a string.
    func integer(_ index: Int) -> Int64? {
        let token = tokens[index]
        guard token.kind == .number else { return nil }
        var position = Int(token.start)
        let end = Int(token.end)
        let negative = bytes[position] == UInt8(ascii: "-")
        if negative { position += 1 }
        var value: Int64 = 0
        while position < end, bytes[position].isDecimalDigit {
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = shifted.addingReportingOverflow(Int64(bytes[position] - UInt8(ascii: "0")))
            if overflow1 || overflow2 { return JSONTape.integer(fromLiteral: literal(index)) }
            value = sum
            position += 1
        }
        if position == end { return negative ? -value : value }
        return JSONTape.integer(fromLiteral: literal(index))
    }

    static func integer(fromLiteral literal: String) -> Int64? {
        if let exact = Int64(literal) { return exact }
        guard let double = Double(literal), double.rounded() == double,
              double >= -9_223_372_036_854_775_808, double < 9_223_372_036_854_775_808 else { return nil }
        return Int64(double)
    }

    /// Where token `index` is, as `aps.alert.title` or `items[2]`, for messages.
    func path(_ index: Int) -> String {
        var components: [String] = []
        var child = index
        var parent = Int(tokens[child].parent)
        while parent >= 0 {
            if tokens[parent].kind == .object {
                components.append(string(child - 1))
            } else {
                var position = 0
                for element in elements(parent) {
                    if element == child { break }
                    position += 1
                }
                components.append("[\(position)]")
            }
            child = parent
            parent = Int(tokens[child].parent)
        }
        var path = ""
        for component in components.reversed() {
            if !path.isEmpty, !component.hasPrefix("[") { path += "." }
            path += component
        }
        return path
    }
}

/// A recursive-descent reader that writes the tape.
private struct TapeParser {
    let bytes: [UInt8]
    var tokens: [JSONTape.Token]
    var position = 0
    var depth = 0

    init(bytes: [UInt8], tokens: [JSONTape.Token]) {
        self.bytes = bytes
        self.tokens = tokens
    }

    mutating func parseDocument() throws(JSONParseError) {
        skipWhitespace()
        try parseValue(parent: -1)
        skipWhitespace()
        if position != bytes.count {
            throw fail("unexpected text after the JSON value")
        }
    }

    func fail(_ problem: String, kind: JSONParseError.Kind = .syntax) -> JSONParseError {
        JSONParseError(kind: kind, offset: position, problem: problem)
    }

    var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                position += 1
            default:
                return
            }
        }
    }

    /// Appends a token for a value that has no children.
    mutating func appendLeaf(_ kind: JSONTape.Kind, start: Int, end: Int, parent: Int, hasEscapes: Bool = false) {
        tokens.append(.init(
            kind: kind, hasEscapes: hasEscapes, start: Int32(start), end: Int32(end),
            next: Int32(tokens.count + 1), parent: Int32(parent)))
    }

    mutating func parseValue(parent: Int) throws(JSONParseError) {
        guard let byte = current else {
            throw fail(position == 0 ? "empty document" : "unexpected end of document")
        }
        switch byte {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            try parseContainer(isObject: byte == UInt8(ascii: "{"), parent: parent)
        case UInt8(ascii: "\""):
            try parseString(parent: parent)
        case UInt8(ascii: "t"):
            try expectLiteral("true", kind: .true, parent: parent)
        case UInt8(ascii: "f"):
            try expectLiteral("false", kind: .false, parent: parent)
        case UInt8(ascii: "n"):
            try expectLiteral("null", kind: .null, parent: parent)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try parseNumber(parent: parent)
        default:
            throw fail("unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString, kind: JSONTape.Kind, parent: Int) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - position >= count else { throw fail("unexpected end of document") }
        for index in 0..<count where bytes[position + index] != literal.utf8Start[index] {
            throw fail("unexpected character")
        }
        appendLeaf(kind, start: position, end: position + count, parent: parent)
        position += count
    }

    mutating func parseContainer(isObject: Bool, parent: Int) throws(JSONParseError) {
        depth += 1
        if depth > JSONValue.maximumDepth {
            throw fail("nested deeper than \(JSONValue.maximumDepth) levels", kind: .tooDeep)
        }
        let index = tokens.count
        let start = position
        appendLeaf(isObject ? .object : .array, start: start, end: start, parent: parent)
        let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
        position += 1
        skipWhitespace()
        if current == close {
            position += 1
        } else {
            while true {
                skipWhitespace()
                if isObject {
                    guard current == UInt8(ascii: "\"") else { throw fail("expected a string key") }
                    try parseString(parent: index)
                    skipWhitespace()
                    guard current == UInt8(ascii: ":") else { throw fail("expected ':' after a key") }
                    position += 1
                    skipWhitespace()
                }
                try parseValue(parent: index)
                skipWhitespace()
                if current == UInt8(ascii: ",") {
                    position += 1
                } else if current == close {
                    position += 1
                    break
                } else {
                    throw fail(isObject ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array")
                }
            }
        }
        tokens[index].end = Int32(position)
        tokens[index].next = Int32(tokens.count)
        depth -= 1
    }

    /// Checks a string from its opening quote: escapes well formed, no raw control characters,
    /// valid UTF-8. Nothing is decoded.
    mutating func parseString(parent: Int) throws(JSONParseError) {
        position += 1
        let start = position
        var hasEscapes = false
        let count = bytes.count
        while true {
            // Plain ASCII text is nearly all of any payload: skip it with one comparison per byte.
            while position < count {
                let byte = bytes[position]
                guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else { break }
                position += 1
            }
            guard position < count else { throw fail("unterminated string") }
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                appendLeaf(.string, start: start, end: position, parent: parent, hasEscapes: hasEscapes)
                position += 1
                return
            case UInt8(ascii: "\\"):
                hasEscapes = true
                position += 1
                try skipEscape()
            case 0..<0x20:
                throw fail("control character in a string")
            case 0x80...:
                try skipUTF8Sequence()
            default:
                position += 1
            }
        }
    }

    mutating func skipEscape() throws(JSONParseError) {
        guard let byte = current else { throw fail("unterminated string") }
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
             UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            position += 1
        case UInt8(ascii: "u"):
            position += 1
            guard bytes.count - position >= 4 else { throw fail("unterminated \\u escape") }
            for _ in 0..<4 {
                guard bytes[position].isHexDigit else { throw fail("invalid \\u escape") }
                position += 1
            }
        default:
            throw fail("invalid escape")
        }
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

    mutating func parseNumber(parent: Int) throws(JSONParseError) {
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
        appendLeaf(.number, start: start, end: position, parent: parent)
    }

    mutating func skipDigits() {
        while position < bytes.count, bytes[position].isDecimalDigit { position += 1 }
    }
}
