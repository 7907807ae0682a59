import Foundation
import Testing

/// The README's "Asserting from your tests" shows files the suite runs (pytest, node --test,
/// go test, swift test): each code block that follows an `<!-- example: <path> -->` line must be
/// that file, byte for byte, so the README cannot show code that does not work.
@Test func readmeExamplesAreTheFilesTheSuiteRuns() throws {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
    let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
    let lines = readme.components(separatedBy: "\n")
    var examples: [String: String] = [:]
    var index = 0
    while index < lines.count {
        let line = lines[index]
        index += 1
        guard line.hasPrefix("<!-- example: "), line.hasSuffix(" -->") else { continue }
        let path = String(line.dropFirst("<!-- example: ".count).dropLast(" -->".count))
        guard index < lines.count, lines[index].hasPrefix("```") else {
            Issue.record("\(path): no code block after its marker")
            continue
        }
        index += 1
        var block: [String] = []
        while index < lines.count, lines[index] != "```" {
            block.append(lines[index])
            index += 1
        }
        examples[path] = block.joined(separator: "\n") + "\n"
    }
    #expect(Set(examples.keys) == [
        "clients/python/examples/test_readme_example.py", "clients/node/examples/readme.test.js",
        "clients/go/example_readme_test.go", "Tests/APNSMockTests/ReadmeExampleTests.swift",
    ])
    for (path, block) in examples {
        let file = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        #expect(block == file, "README's example differs from \(path)")
    }
}
