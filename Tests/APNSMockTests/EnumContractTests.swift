@testable import APNSMock
import APNSMockCore
import Foundation
import Testing

/// The lists that live outside Swift — the OpenAPI document's enums, the inbox page's lists and
/// options, the Node and Go clients' types — held to the Swift enums they copy, so that a new
/// reason, push type, fault action or cause cannot be added in Swift and forgotten there (or the
/// other way round). Each row names the Swift enum it follows; order matters where users see it.
@Suite("Lists outside Swift follow the Swift enums")
struct EnumContractTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    static func document() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(OpenAPIDocument.bytes)) as? [String: Any])
    }

    /// The string enum at a path of the document (keys separated by ` > `, since paths hold `/`; a
    /// number indexes a list),
    /// without the `null` a nullable enum adds.
    static func openAPIEnum(_ path: String) throws -> [String] {
        var node: Any = try document()
        for key in path.components(separatedBy: " > ") {
            if let index = Int(key), let list = node as? [Any] {
                node = try #require(index < list.count ? list[index] : nil, "\(path): no item \(index)")
            } else {
                let object = try #require(node as? [String: Any], "\(path): \(key) is not under an object")
                node = try #require(object[String(key)], "\(path): no \(key)")
            }
        }
        let object = try #require(node as? [String: Any], "\(path) is not a schema")
        let values = try #require(object["enum"] as? [Any], "\(path) has no enum")
        return values.compactMap { $0 as? String }
    }

    /// Every enum of the document, by path, so that a new one is not left out of the rows below.
    static func allEnumPaths() throws -> [String] {
        var paths: [String] = []
        func walk(_ node: Any, _ path: String) {
            if let object = node as? [String: Any] {
                if object["enum"] != nil { paths.append(path) }
                for (key, value) in object { walk(value, path.isEmpty ? key : "\(path) > \(key)") }
            } else if let list = node as? [Any] {
                for (index, value) in list.enumerated() { walk(value, "\(path) > \(index)") }
            }
        }
        walk(try document(), "")
        return paths.sorted()
    }

    /// Apple's reasons, and the second spelling of one that a client library reports
    /// (`validation.badEnvironmentKeyReason`), which a fault rule and a query may name too.
    static let reasons = Reason.allCases.map(\.rawValue) + [EnvironmentKeyReasonSpelling.observed.rawValue]
    static let pushTypes = PushType.allCases.map(\.rawValue)
    static let actions = FaultRule.Action.Name.allCases.map(\.rawValue)
    static let kinds = RecordKind.allCases.map(\.rawValue)
    static let environments = APNSEnvironment.allCases.map(\.rawValue)
    static let unregistrationReasons = UnregistrationReason.allCases.map(\.rawValue)

    /// Each enum of the OpenAPI document and the Swift cases it must list, in the same order.
    static let openAPIRows: [(path: String, cases: [String])] = [
        ("components > parameters > reason > schema", reasons),
        ("components > schemas > FaultRule > properties > respond > anyOf > 0 > properties > reason", reasons),
        ("components > schemas > FaultRule > properties > match > anyOf > 0 > properties > pushType > anyOf > 0", pushTypes),
        ("components > schemas > FaultRule > properties > action > anyOf > 0", actions),
        ("components > schemas > Fault > properties > action", actions),
        ("components > schemas > NotificationRecord > properties > action", actions),
        ("components > schemas > FaultRule > properties > goawayCode > anyOf > 0", FaultRule.GoAway.Code.allCases.map(\.rawValue)),
        ("components > schemas > FaultRule > properties > match > anyOf > 0 > properties > kind > anyOf > 0", kinds),
        ("components > schemas > NotificationRecord > properties > kind", kinds),
        ("components > parameters > kind > schema", kinds),
        ("components > schemas > NotificationRecord > properties > operation", ChannelOperation.allCases.map(\.rawValue)),
        ("components > schemas > NotificationRecord > properties > payloadEncoding", NotificationRecord.PayloadEncoding.allCases.map(\.rawValue)),
        ("components > schemas > Auth > properties > method", AuthSummary.Method.allCases.map(\.rawValue)),
        ("components > schemas > Auth > properties > iatForm", ProviderToken.IssuedAtForm.allCases.map(\.rawValue)),
        ("components > schemas > Auth > properties > signatureForm", ProviderToken.SignatureForm.allCases.map(\.rawValue)),
        ("components > schemas > Statistics > properties > goaways > properties > byCause > propertyNames", GoAwayCause.allCases.map(\.rawValue)),
        ("components > parameters > outcome > schema", RecordFilter.Outcome.allCases.map(\.rawValue)),
        ("components > schemas > Device > properties > environment", environments),
        ("components > schemas > DeviceInput > properties > environment > anyOf > 0", environments),
        ("components > schemas > Channel > properties > environment", environments),
        ("components > schemas > ChannelInput > properties > environment > anyOf > 0", environments),
        ("paths > /v1/channels > get > parameters > 1 > schema", environments),
        ("components > schemas > Device > properties > reason", unregistrationReasons),
        ("components > schemas > DeviceInput > properties > reason > anyOf > 0", unregistrationReasons),
        ("components > schemas > Unregistration > properties > reason > anyOf > 0", unregistrationReasons),
        ("components > schemas > DeviceList > properties > policy", DevicePolicy.allCases.map(\.rawValue)),
        ("components > schemas > Team > properties > devices > anyOf > 0 > properties > policy > anyOf > 0", DevicePolicy.allCases.map(\.rawValue)),
        ("components > schemas > TeamView > properties > devices > properties > policy", DevicePolicy.allCases.map(\.rawValue)),
        ("components > schemas > TeamKey > properties > environment > anyOf > 0", Configuration.KeyEnvironment.allCases.map(\.rawValue)),
        ("components > schemas > TeamView > properties > keys > items > properties > environment", Configuration.KeyEnvironment.allCases.map(\.rawValue)),
        // TeamSpace.Source is not CaseIterable: its cases written out.
        ("components > schemas > TeamView > properties > source", [TeamSpace.Source.configuration, .api].map(\.rawValue)),
    ]

    /// Enums of the document that follow no Swift enum, and why.
    static let openAPIOwnEnums: Set<String> = [
        // The health answer's status: four literals in AdminAPI's health route.
        "components > schemas > Health > properties > status",
        // The goaway fault's debugData and lastStreamId forms: parsed from these literals by
        // FaultRule.decode, which names them in its error messages.
        "components > schemas > FaultRule > properties > debugData > anyOf > 0",
        "components > schemas > Fault > properties > debugData",
        "components > schemas > FaultRule > properties > lastStreamId > anyOf > 0 > anyOf > 0",
        "components > schemas > Fault > properties > lastStreamId > anyOf > 0",
        // Apple's message-storage-policy numbers.
        "components > schemas > Channel > properties > messageStoragePolicy",
        "components > schemas > ChannelInput > properties > messageStoragePolicy > anyOf > 0",
    ]

    @Test(arguments: openAPIRows.map(\.path))
    func theOpenAPIEnumListsTheSwiftCases(path: String) throws {
        let cases = try #require(Self.openAPIRows.first { $0.path == path }).cases
        #expect(try Self.openAPIEnum(path) == cases)
    }

    @Test func everyEnumOfTheDocumentIsHeldToSwiftOrSaysWhyNot() throws {
        let held = Set(Self.openAPIRows.map(\.path)).union(Self.openAPIOwnEnums)
        let found = Set(try Self.allEnumPaths())
        #expect(found.subtracting(held).sorted() == [], "enums of openapi.json no row holds: add a row or say why not")
        #expect(held.subtracting(found).sorted() == [], "rows for enums the document no longer has")
    }

    // MARK: The inbox page

    /// The items of a JavaScript array literal `const NAME = [ … ];` in inbox.js.
    static func scriptList(_ name: String) throws -> [String] {
        let script = try text("Sources/APNSMock/Admin/Inbox/inbox.js")
        let start = try #require(script.range(of: "const \(name) = ["), "inbox.js has no \(name)")
        let end = try #require(script.range(of: "];", range: start.upperBound..<script.endIndex))
        return script[start.upperBound..<end.lowerBound].split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespacesAndNewlines).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }.filter { !$0.isEmpty }
    }

    /// The option values of `<select id="ID">` in inbox.html, in order.
    static func options(_ id: String) throws -> [String] {
        let html = try text("Sources/APNSMock/Admin/Inbox/inbox.html")
        let start = try #require(html.range(of: #"<select id="\#(id)">"#), "inbox.html has no select \(id)")
        let end = try #require(html.range(of: "</select>", range: start.upperBound..<html.endIndex))
        return html[start.upperBound..<end.lowerBound].components(separatedBy: #"value=""#).dropFirst().map {
            String($0.prefix { $0 != "\"" })
        }
    }

    @Test func theInboxKnowsEveryPushType() throws {
        #expect(try Self.scriptList("PUSH_TYPES") == Self.pushTypes)
    }

    @Test func theInboxFiltersAreQueryParameters() throws {
        // Each filter field of the page is a parameter of GET /v1/notifications.
        let parameters = try #require((try Self.document()["components"] as? [String: Any])?["parameters"] as? [String: Any])
        let names = Set(parameters.values.compactMap { ($0 as? [String: Any])?["name"] as? String })
        for filter in try Self.scriptList("FILTERS") {
            #expect(names.contains(filter), "the inbox filters on \(filter), which the query API does not take")
        }
    }

    @Test func theInboxSelectsOfferTheSwiftCases() throws {
        #expect(try Self.options("f-kind") == [""] + Self.kinds)
        #expect(try Self.options("f-outcome") == RecordFilter.Outcome.allCases.map(\.rawValue).sorted { lhs, rhs in
            // The page offers "all" first, then the outcomes.
            (lhs == "all" ? 0 : 1, lhs) < (rhs == "all" ? 0 : 1, rhs)
        })
        #expect(try Self.options("device-reason") == Self.unregistrationReasons)
    }

    @Test func theInboxNamesEveryRefusalCause() throws {
        // The refused-streams notice describes each cause; a new cause must get its sentence.
        let script = try Self.text("Sources/APNSMock/Admin/Inbox/inbox.js")
        for cause in RefusedStreamCause.allCases where cause != .overLimit {
            #expect(script.contains("notice.cause === \"\(cause.rawValue)\""), "inbox.js does not describe \(cause.rawValue)")
        }
    }

    // MARK: The clients

    /// The string literals of a TypeScript union `NAME?: 'a' | 'b' …;` in the Node client's types.
    static func typeScriptUnion(_ property: String, in declarations: String) throws -> [String] {
        let start = try #require(declarations.range(of: "  \(property)?: '"), "index.d.ts has no \(property) union")
        let line = declarations[declarations.index(before: start.upperBound)...].prefix { $0 != ";" && $0 != "\n" }
        return line.split(separator: "|").map {
            $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "'"))
        }.filter { $0 != "null" }
    }

    @Test func theNodeClientsTypesFollowTheSwiftEnums() throws {
        let declarations = try Self.text("clients/node/index.d.ts")
        #expect(Set(try Self.typeScriptUnion("action", in: declarations)) == Set(Self.actions))
        #expect(Set(try Self.typeScriptUnion("reason", in: declarations)) == Set(Self.unregistrationReasons))
        #expect(Set(try Self.typeScriptUnion("kind", in: declarations)) == Set(Self.kinds))
        #expect(Set(try Self.typeScriptUnion("environment", in: declarations)) == Set(Self.environments))
    }
}
