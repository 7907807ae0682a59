/// Writes a ``JSONValue`` back as JSON text: members in their order, numbers exactly as they were
/// written, strings escaped as RFC 8259 requires. Compact (what `apns-mock send` puts on the wire)
/// or indented by two spaces (the `.apns` files the admin API serves).
extension JSONValue {
    public func jsonText(pretty: Bool = false) -> String {
        var out = ""
        write(into: &out, indent: pretty ? 0 : nil)
        return out
    }

    /// `indent` is the current depth when pretty, `nil` when compact.
    private func write(into out: inout String, indent: Int?) {
        switch self {
        case .null: out += "null"
        case .bool(let flag): out += flag ? "true" : "false"
        case .number(let literal): out += literal
        case .string(let text): Self.quote(text, into: &out)
        case .array(let items):
            Self.writeList(items, open: "[", close: "]", into: &out, indent: indent) { item, out, inner in
                item.write(into: &out, indent: inner)
            }
        case .object(let members):
            Self.writeList(members, open: "{", close: "}", into: &out, indent: indent) { member, out, inner in
                Self.quote(member.key, into: &out)
                out += inner == nil ? ":" : ": "
                member.value.write(into: &out, indent: inner)
            }
        }
    }

    private static func writeList<Element>(
        _ elements: [Element], open: String, close: String, into out: inout String, indent: Int?,
        _ writeElement: (Element, inout String, Int?) -> Void
    ) {
        guard let indent else {
            out += open
            for (offset, element) in elements.enumerated() {
                if offset > 0 { out += "," }
                writeElement(element, &out, nil)
            }
            out += close
            return
        }
        guard !elements.isEmpty else { out += open + close; return }
        out += open + "\n"
        for (offset, element) in elements.enumerated() {
            out += String(repeating: "  ", count: indent + 1)
            writeElement(element, &out, indent + 1)
            out += offset == elements.count - 1 ? "\n" : ",\n"
        }
        out += String(repeating: "  ", count: indent) + close
    }

    private static func quote(_ text: String, into out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
