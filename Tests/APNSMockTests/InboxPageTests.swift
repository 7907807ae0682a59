import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// The inbox page in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`)
/// driven by selenium (pinned in scripts/browser/requirements.txt, installed by scripts/setup into
/// .venv-browser/). scripts/browser/inbox_check.py opens the page of a mock run as users run it (``ServerProcess``), pushes
/// with curl and checks what the page shows; this test runs it and asserts on its report and on
/// the mock's state. Screenshots are kept in .build/inbox-screenshots/.
@Suite("Inbox page in a browser", .serialized, .timeLimit(.minutes(3)))
struct InboxPageTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    struct Report: Decodable {
        struct Check: Decodable {
            var name: String
            var ok: Bool
            var detail: String
        }

        var checks: [Check]
    }

    static let python = repository.appendingPathComponent(".venv-browser/bin/python").path
    static let screenshots = repository.appendingPathComponent(".build/inbox-screenshots").path

    /// Runs scripts/browser/inbox_check.py against `mock` (its scenario named by `arguments`, the
    /// default one without) and holds its report: at least `minimumChecks` checks, every one
    /// passed, and a clean exit.
    static func checkPage(of mock: ServerProcess, arguments: [String], minimumChecks: Int = 25, timeout: Double) async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: python),
            "selenium's venv is missing: run scripts/setup (it installs chromium, chromium-driver and .venv-browser)")
        let script = repository.appendingPathComponent("scripts/browser/inbox_check.py").path
        let output = try await ExternalTool.run(python, [
            script, "--admin", mock.adminURL, "--apns", mock.baseURL, "--ca", mock.caPath,
            "--channels", "https://localhost:\(mock.channelManagementPort(.sandbox))",
            "--authorization", try #require(Curl.demoAuthorization), "--screenshots", screenshots,
        ] + arguments, timeout: timeout)
        let report = try #require(
            try? JSONDecoder().decode(Report.self, from: output.stdout),
            "inbox_check.py exited \(output.exitCode): \(output.text.suffix(2000)) \(output.stderr.suffix(2000))")
        #expect(report.checks.count >= minimumChecks, "\(report.checks.map(\.name))")
        for check in report.checks {
            #expect(check.ok, "\(check.name): \(check.detail)")
        }
        #expect(output.exitCode == 0)
    }

    @Test func pageShowsWhatArrivedAndManagesTheMock() async throws {
        try await ServerProcess.withRunning { mock in
            try await Self.checkPage(of: mock, arguments: [], timeout: 150)

            // What the page did, seen through the admin API.
            let devices = try await mock.admin.devices()
            #expect(devices.devices.first { $0.token == String(repeating: "ab", count: 32) }?.reason == "Unregistered")
            let faults = try await mock.admin.faults()
            #expect(faults.faults.isEmpty, "the page's times:1 rule fired once and was removed")
            let gone = try await mock.admin.notifications(RecordQuery(reason: "Unregistered"))
            #expect(gone.notifications.count == 1)
        }
        #expect(FileManager.default.fileExists(atPath: Self.screenshots + "/inbox.png"))
    }

    /// The page tells the truth at a glance (scripts/browser/inbox_check.py --scenario truth): the
    /// header's counts equal the cards' after a mixed run, after Clear and after `POST /v1/reset`;
    /// after 20,000 pushes (h2load) into a ring of 15,000 it says how many older records it does not
    /// show and that 5,000 are gone, pages back with "Load older", and charts answers per second by
    /// outcome. Screenshots at 0, 10 and 20,000 records go to .build/inbox-screenshots/.
    @Test func pageTellsTheTruthAtAGlance() async throws {
        try await ServerProcess.withRunning(yaml: "recording: { capacity: 15000 }\n") { mock in
            try await Self.checkPage(of: mock, arguments: ["--scenario", "truth"], timeout: 160)
        }
        for name in ["records-0", "records-10", "records-20000", "older"] {
            #expect(FileManager.default.fileExists(atPath: Self.screenshots + "/\(name).png"))
        }
    }

    /// The page for one team (scripts/browser/inbox_check.py --scenario teams): a team added at run
    /// time with a key of its own pushes beside the demo team; `/?team=<teamId>` shows only that
    /// team's records and counts and names it in the header, Clear there forgets only its records,
    /// and the picker (filled from `GET /v1/teams`) opens the page for all teams or another one.
    @Test func pageForOneTeamShowsOnlyItsRecords() async throws {
        try await ServerProcess.withRunning { mock in
            try await Self.checkPage(of: mock, arguments: ["--scenario", "teams"], minimumChecks: 15, timeout: 90)
            // The page's team is gone again, and the demo team's records stayed.
            let teams = try await mock.admin.request("GET", "/v1/teams")
            #expect(teams.status == 200)
            let demo = try await mock.admin.notifications(RecordQuery(outcome: .all))
            #expect(demo.notifications.count == 3)
            #expect(demo.notifications.allSatisfy { $0.auth.teamId == "DEMOTEAM01" })
        }
        #expect(FileManager.default.fileExists(atPath: Self.screenshots + "/team.png"))
    }

    /// With `admin.token` the page asks for the token (a wrong one is refused) and then shows
    /// pushes as without it.
    @Test func pageAsksForTheAdminToken() async throws {
        let python = Self.python
        let script = Self.repository.appendingPathComponent("scripts/browser/inbox_check.py").path
        try #require(FileManager.default.isExecutableFile(atPath: python), "selenium's venv is missing: run scripts/setup")
        try await ServerProcess.withRunning(yaml: "admin: { token: s3cret }\n") { mock in
            let output = try await ExternalTool.run(python, [
                script, "--admin", mock.adminURL, "--apns", mock.baseURL, "--ca", mock.caPath,
                "--channels", "https://localhost:\(mock.channelManagementPort(.sandbox))",
                "--authorization", try #require(Curl.demoAuthorization),
                "--screenshots", Self.screenshots,
                "--admin-token", "s3cret",
            ], timeout: 90)
            let report = try #require(
                try? JSONDecoder().decode(Report.self, from: output.stdout),
                "inbox_check.py exited \(output.exitCode): \(output.text.suffix(2000)) \(output.stderr.suffix(2000))")
            #expect(report.checks.count == 5, "\(report.checks.map(\.name))")
            for check in report.checks {
                #expect(check.ok, "\(check.name): \(check.detail)")
            }
        }
    }
}
