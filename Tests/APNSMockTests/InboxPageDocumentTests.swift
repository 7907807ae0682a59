@testable import APNSMock
import APNSMockCore
import Foundation
import Testing

/// The inbox page's files (Sources/APNSMock/Admin/Inbox/) as the mock serves them: put together
/// into one document, under the response's nonce, with a script that parses and a fault form that
/// offers every action a rule can have. What the page does in a browser is InboxPageTests.
@Suite("Inbox page document")
struct InboxPageDocumentTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/APNSMock/Admin/Inbox")

    static func file(_ name: String) throws -> String {
        try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
    }

    @Test func theServedDocumentIsTheFilesWithTheirStyleAndScriptInPlace() throws {
        let response = InboxPage.parts.joined(separator: "NONCE")
        let css = try Self.file("inbox.css"), script = try Self.file("inbox.js")
        #expect(InboxPage.parts.count == 3, "the nonce goes in two places: the style and the script")
        #expect(response.contains("<style nonce=\"NONCE\">\n" + css + "</style>"))
        #expect(response.contains("<script nonce=\"NONCE\">\n" + script + "</script>"))
        #expect(!response.contains(InboxPage.stylesheetLink) && !response.contains(InboxPage.scriptElement))
        #expect(response.hasPrefix("<!doctype html>"))
    }

    @Test func aDocumentThatNoLongerNamesItsFilesIsNotPutTogether() {
        #expect(InboxPage.assemble(html: "<html></html>", css: "", script: "", nonce: "n") == nil)
        let twice = InboxPage.stylesheetLink + InboxPage.stylesheetLink + InboxPage.scriptElement
        #expect(InboxPage.assemble(html: twice, css: "", script: "", nonce: "n") == nil)
    }

    /// `node --check`: the script parses (Node is installed by scripts/setup for the clients).
    @Test func theScriptParses() async throws {
        let output = try await ExternalTool.run(
            "node", ["--check", Self.directory.appendingPathComponent("inbox.js").path], timeout: 60)
        #expect(output.exitCode == 0, "\(output.stderr)")
    }

    /// The form's action list is every ``FaultRule/Action/Name``, once each, after "none".
    @Test func theFaultFormOffersEveryAction() throws {
        let html = try Self.file("inbox.html")
        let start = try #require(html.range(of: #"<select id="fault-action">"#))
        let end = try #require(html.range(of: "</select>", range: start.upperBound..<html.endIndex))
        let options = html[start.upperBound..<end.lowerBound].split(separator: "\n").compactMap { line -> String? in
            guard let value = line.firstRange(of: #"value=""#) else { return nil }
            let rest = line[value.upperBound...]
            return String(rest.prefix { $0 != "\"" })
        }
        #expect(options.first == "")
        #expect(Set(options.dropFirst()) == Set(FaultRule.Action.Name.allCases.map(\.rawValue)))
        #expect(options.count == FaultRule.Action.Name.allCases.count + 1)
    }
}
