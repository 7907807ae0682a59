import Yams

/// Why a configuration file (or an admin API body of the same shape) was refused: which file,
/// which field, and what is wrong with it.
///
/// The mock refuses to start on any doubt (unknown field, wrong type, contradiction), because a
/// mock that silently ignores a misspelt `strictLint` passes tests it should fail.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        /// Not YAML (or JSON) at all.
        case syntax
        /// A field the schema does not have, e.g. a misspelling.
        case unknownField
        /// A field the schema needs is absent.
        case missingField
        /// A value of the wrong kind: a list where a number belongs, …
        case wrongType
        /// A value of the right kind that is not allowed: port 70000, token "xyz", …
        case invalidValue
        /// A value that must be unique appears twice (device token, team ID, key ID, app).
        case duplicate
        /// Values that are each fine but contradict one another (a key's topic that is not an app
        /// of its team, …).
        case contradiction
    }

    /// The file as the caller named it; `nil` for a document that is not a file (an API body).
    public var file: String?
    /// Where the problem is, as a path of keys and indexes: `devices.tokens[2].token`; empty for
    /// the document as a whole.
    public var field: String
    /// The line of the offending value, when the format knows it (YAML does).
    public var line: Int?
    public var kind: Kind
    /// What is wrong, in words.
    public var problem: String

    public init(file: String?, field: String, line: Int? = nil, kind: Kind, problem: String) {
        self.file = file
        self.field = field
        self.line = line
        self.kind = kind
        self.problem = problem
    }

    /// `config.yaml:14: devices.tokens[2].token: not a hex string`.
    public var description: String {
        var text = file ?? ""
        if let line { text += text.isEmpty ? "line \(line)" : ":\(line)" }
        if !field.isEmpty { text += text.isEmpty ? field : ": \(field)" }
        return text.isEmpty ? problem : "\(text): \(problem)"
    }
}

/// A node of a parsed document, YAML or JSON: what the field decoding needs from either.
protocol DocumentNode {
    /// 1-based line of the node, when known.
    var line: Int? { get }
    /// The entries, if this is a mapping; keys that are not scalars come back as `nil` keys.
    var mappingEntries: [(key: String?, value: Self)]? { get }
    var sequenceElements: [Self]? { get }
    /// The text of a scalar that can stand for a string (YAML: any scalar; JSON: strings only).
    var textValue: String? { get }
    var wholeNumber: Int? { get }
    var realNumber: Double? { get }
    var flag: Bool? { get }
    /// An explicit null (`null`, `~` or an empty value in YAML; `null` in JSON).
    var isNullValue: Bool { get }
    /// What kind of value this is, for messages: "a list", "a string", …
    var kindDescription: String { get }
}

extension Node: DocumentNode {
    var line: Int? { mark?.line }

    var mappingEntries: [(key: String?, value: Node)]? {
        guard case .mapping(let mapping) = self else { return nil }
        return mapping.map { ($0.key.scalar?.string, $0.value) }
    }

    var sequenceElements: [Node]? {
        guard case .sequence(let sequence) = self else { return nil }
        return Array(sequence)
    }

    var textValue: String? {
        guard let scalar, !isNullValue else { return nil }
        return scalar.string
    }

    /// Plain decimal integers only: YAML 1.1's octal, hex and sexagesimal (`1:30` is 90) forms are
    /// surprising in a port number, so they are not numbers here.
    var wholeNumber: Int? {
        guard let scalar, scalar.style == .plain else { return nil }
        return Int(scalar.string)
    }

    var realNumber: Double? {
        guard let scalar, scalar.style == .plain else { return nil }
        return Double(scalar.string)
    }

    var flag: Bool? { bool }

    var isNullValue: Bool { null != nil }

    var kindDescription: String {
        switch self {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        case .scalar:
            if isNullValue { return "null" }
            return "\"\(scalar?.string ?? "")\""
        }
    }
}

extension JSONValue: DocumentNode {
    var line: Int? { nil }

    var mappingEntries: [(key: String?, value: JSONValue)]? {
        members?.map { ($0.key, $0.value) }
    }

    var sequenceElements: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    var textValue: String? { stringValue }

    var wholeNumber: Int? {
        guard case .number(let literal) = self else { return nil }
        return Int(literal)
    }

    var realNumber: Double? { doubleValue }

    var flag: Bool? { boolValue }

    var isNullValue: Bool { isNull }

    var kindDescription: String {
        switch self {
        case .object: return "an object"
        case .array: return "an array"
        case .string(let string): return "the string \"\(string)\""
        case .number(let literal): return "the number \(literal)"
        case .bool(let bool): return bool ? "true" : "false"
        case .null: return "null"
        }
    }
}

/// A node and where it is: the path used in error messages.
struct Field<Node: DocumentNode> {
    let node: Node
    let path: String
    let file: String?

    func error(_ kind: ConfigurationError.Kind, _ problem: String) -> ConfigurationError {
        ConfigurationError(file: file, field: path, line: node.line, kind: kind, problem: problem)
    }

    func child(_ key: String, _ node: Node) -> Field {
        Field(node: node, path: path.isEmpty ? key : "\(path).\(key)", file: file)
    }

    var isNull: Bool { node.isNullValue }

    /// The entries of a mapping whose keys must all be in `allowed`.
    func mapping(allowing allowed: [String]) throws(ConfigurationError) -> Mapping<Node> {
        guard let entries = node.mappingEntries else {
            throw error(.wrongType, "expected a mapping, found \(node.kindDescription)")
        }
        var fields: [String: Field] = [:]
        for entry in entries {
            guard let key = entry.key else {
                throw error(.wrongType, "a key is not a plain name")
            }
            let field = child(key, entry.value)
            guard allowed.contains(key) else {
                throw field.error(.unknownField, "unknown field; expected one of \(allowed.joined(separator: ", "))")
            }
            // YAML refuses repeated keys while parsing; JSON allows them, so check here too rather
            // than let the last one win silently.
            guard fields[key] == nil else {
                throw field.error(.duplicate, "given more than once")
            }
            fields[key] = field
        }
        return Mapping(owner: self, fields: fields)
    }

    func elements() throws(ConfigurationError) -> [Field] {
        guard let elements = node.sequenceElements else {
            throw error(.wrongType, "expected a list, found \(node.kindDescription)")
        }
        return elements.enumerated().map { Field(node: $1, path: "\(path)[\($0)]", file: file) }
    }

    func string() throws(ConfigurationError) -> String {
        guard let value = node.textValue else {
            throw error(.wrongType, "expected a string, found \(node.kindDescription)")
        }
        return value
    }

    /// A string that must not be empty.
    func nonEmptyString() throws(ConfigurationError) -> String {
        let value = try string()
        guard !value.isEmpty else { throw error(.invalidValue, "must not be empty") }
        return value
    }

    func integer(in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard let value = node.wholeNumber else {
            throw error(.wrongType, "expected a whole number, found \(node.kindDescription)")
        }
        guard range.contains(value) else {
            throw error(.invalidValue, "\(value) is out of range \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    func number(in range: ClosedRange<Double>) throws(ConfigurationError) -> Double {
        guard let value = node.realNumber, value.isFinite else {
            throw error(.wrongType, "expected a number, found \(node.kindDescription)")
        }
        guard range.contains(value) else {
            throw error(.invalidValue, "\(value) is out of range \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    func boolean() throws(ConfigurationError) -> Bool {
        guard let value = node.flag else {
            throw error(.wrongType, "expected true or false, found \(node.kindDescription)")
        }
        return value
    }

    /// One of an enumeration's raw values, spelled exactly.
    func oneOf<Value: RawRepresentable & CaseIterable>(_: Value.Type) throws(ConfigurationError) -> Value
    where Value.RawValue == String {
        let text = try string()
        guard let value = Value(rawValue: text) else {
            let choices = Value.allCases.map(\.rawValue).joined(separator: ", ")
            throw error(.invalidValue, "\"\(text)\" is not one of \(choices)")
        }
        return value
    }

    func stringList() throws(ConfigurationError) -> [(value: String, field: Field)] {
        var result: [(value: String, field: Field)] = []
        for element in try elements() {
            result.append((try element.nonEmptyString(), element))
        }
        return result
    }
}

/// A mapping's fields by key, after unknown keys were refused.
struct Mapping<Node: DocumentNode> {
    let owner: Field<Node>
    let fields: [String: Field<Node>]

    /// The field, unless it is absent or explicitly null.
    func optional(_ key: String) -> Field<Node>? {
        guard let field = fields[key], !field.isNull else { return nil }
        return field
    }

    func required(_ key: String) throws(ConfigurationError) -> Field<Node> {
        guard let field = optional(key) else {
            let path = owner.path.isEmpty ? key : "\(owner.path).\(key)"
            throw ConfigurationError(
                file: owner.file, field: path, line: owner.node.line, kind: .missingField, problem: "required field is missing")
        }
        return field
    }
}
