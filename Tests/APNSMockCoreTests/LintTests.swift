import Testing
@testable import APNSMockCore

/// A payload, the push type it is sent as, and the finding codes the lint must report, in order.
struct LintRow: Sendable, CustomTestStringConvertible {
    let payload: String
    let pushType: PushType?
    let expected: [LintFinding.Code]

    init(_ payload: String, _ pushType: PushType?, _ expected: [LintFinding.Code]) {
        self.payload = payload
        self.pushType = pushType
        self.expected = expected
    }

    var testDescription: String { "\(pushType?.rawValue ?? "unknown type"): \(payload.prefix(60))" }
}

let lintRows: [LintRow] = [
    LintRow(#"{"aps":{"alert":"hi"}}"#, .alert, []),
    // widgets and controls (iOS 26): Apple's payloads carry "content-changed": true.
    LintRow(#"{"aps":{"content-changed":true}}"#, .widgets, []),
    LintRow(#"{"aps":{"content-changed":true}}"#, .controls, []),
    LintRow(#"{"aps":{}}"#, .widgets, [.contentChangedMissing]),
    LintRow(#"{"aps":{"content-changed":1}}"#, .controls, [.contentChangedMissing]),
    LintRow(#"{"aps":{"content-changed":false}}"#, .widgets, [.contentChangedMissing]),
    LintRow(#"{"aps":{"alert":{"title":"t","body":"b"},"badge":3,"sound":"default"},"custom":1}"#, .alert, []),
    LintRow("not json", .alert, [.invalidJSON]),
    LintRow(#"{"aps":{"alert":"hi"}"#, .alert, [.invalidJSON]),
    LintRow(#"{"aps":{"alert":"hi"}} x"#, .alert, [.invalidJSON]),
    LintRow("\u{FEFF}{}", .alert, [.invalidJSON]),
    LintRow(#"[1,2]"#, .alert, [.notAnObject]),
    LintRow(#""aps""#, .alert, [.notAnObject]),
    LintRow(#"{"custom":1}"#, .alert, [.missingAPS]),
    // A request object serialised as the body: flagged whatever the push type, even where the
    // payload is otherwise ignored (location, file provider).
    LintRow(#"{"priority":{"rawValue":10},"topic":"com.example.app.location-query"}"#, .location, [.requestFieldsInPayload]),
    LintRow(#"{"priority":{"rawValue":10},"topic":"com.example.app.pushkit.fileprovider"}"#, .fileprovider, [.requestFieldsInPayload]),
    LintRow(#"{"priority":{"rawValue":10},"topic":"com.example.app"}"#, .alert, [.missingAPS, .requestFieldsInPayload]),
    LintRow(#"{}"#, .location, []),
    LintRow(#"{"custom":1}"#, .fileprovider, []),
    LintRow(#"{"aps":{"alert":"x"},"priority":"high"}"#, .alert, []),
    LintRow(#"{"aps":1}"#, .alert, [.apsNotAnObject]),
    LintRow(#"{"aps":{"alert":"hi","colour":"red"}}"#, .alert, [.unknownAPSKey]),
    LintRow(#"{"aps":{"alert":"a","alert":"b"}}"#, .alert, [.duplicateKey]),
    LintRow(#"{"aps":{"alert":"a"},"k":{"x":1,"x":2,"x":3}}"#, .alert, [.duplicateKey]),
    LintRow(#"{"aps":{"alert":5}}"#, .alert, [.alertWrongType]),
    LintRow(#"{"aps":{"alert":"x","sound":true}}"#, .alert, [.soundWrongType]),
    LintRow(#"{"aps":{"badge":-1}}"#, .alert, [.badgeNotInteger]),
    LintRow(#"{"aps":{"badge":"3"}}"#, .alert, [.badgeNotInteger]),
    LintRow(#"{"aps":{"badge":2.0}}"#, .alert, []),
    LintRow(#"{"aps":{"alert":"x","mutable-content":2}}"#, .alert, [.mutableContentNot1]),
    LintRow(#"{"aps":{"content-available":1}}"#, .alert, [.alertWithoutContent]),
    LintRow(#"{"aps":{"content-available":1}}"#, .background, []),
    LintRow(#"{"aps":{"content-available":1,"alert":"x"}}"#, .background, [.backgroundWithAlert]),
    LintRow(#"{"aps":{"content-available":1,"sound":"x"}}"#, .background, [.backgroundWithSound]),
    LintRow(#"{"aps":{"content-available":1,"badge":1}}"#, .background, [.backgroundWithBadge]),
    LintRow(#"{"aps":{}}"#, .background, [.backgroundMissingContentAvailable]),
    LintRow(#"{"aps":{"content-available":true}}"#, .background, [.contentAvailableNot1]),
    LintRow(#"{"aps":{"content-available":"1"}}"#, .background, [.contentAvailableNot1]),
    LintRow(#"{"aps":{"event":"update","timestamp":1767225600,"content-state":{"score":1}}}"#, .liveactivity, []),
    LintRow(#"{"aps":{"event":"end","timestamp":1767225600,"dismissal-date":1767229200}}"#, .liveactivity, []),
    LintRow(#"{"aps":{"content-state":{}}}"#, .liveactivity, [.liveActivityMissingEvent, .liveActivityMissingTimestamp]),
    LintRow(#"{"aps":{"event":"stop","timestamp":1}}"#, .liveactivity, [.liveActivityInvalidEvent]),
    LintRow(#"{"aps":{"event":"end","timestamp":"now"}}"#, .liveactivity, [.liveActivityInvalidTimestamp]),
    LintRow(#"{"aps":{"event":"update","timestamp":1}}"#, .liveactivity, [.liveActivityMissingContentState]),
    LintRow(#"{"aps":{"event":"start","timestamp":1,"content-state":{},"alert":"a"}}"#, .liveactivity, [.liveActivityStartMissingAttributes]),
    LintRow(#"{"aps":{"event":"start","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{}}}"#, .liveactivity, [.liveActivityStartMissingAlert]),
    LintRow(#"{"aps":{"event":"start","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{},"alert":{"title":"t","body":"b"}}}"#, .liveactivity, []),
    LintRow(#"{"aps":{"event":"update","timestamp":1,"content-state":{},"stale-date":"soon","dismissal-date":1}}"#, .liveactivity, [.liveActivityDateNotNumber]),
    LintRow(#"{"aps":{"event":"end","timestamp":1,"dismissal-date":"now"}}"#, .liveactivity, [.liveActivityDateNotNumber]),
    LintRow(#"{"aps":{"event":"start","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{},"alert":"a","input-push-token":1}}"#, .liveactivity, []),
    LintRow(#"{"aps":{"event":"start","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{},"alert":"a","input-push-token":true}}"#, .liveactivity, [.liveActivityInputPushTokenNot1]),
    LintRow(#"{"aps":{"event":"start","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{},"alert":"a","input-push-channel":7}}"#, .liveactivity, [.liveActivityUnknownChannel]),
    LintRow(#"{"mdm":"7F8B2C1A-0000-4000-8000-000000000000"}"#, .mdm, []),
    LintRow(#"{}"#, .mdm, [.mdmMissingPushMagic]),
    LintRow(#"{}"#, .location, []),
    LintRow(#"{"container-identifier":"NSFileProviderWorkingSetContainerItemIdentifier"}"#, .fileprovider, []),
    LintRow(#"{"aps":{"content-changed":true}}"#, .widgets, []),
    LintRow(#"{"aps":{"alert":"x"}}"#, nil, []),
    LintRow(#"{}"#, nil, [.missingAPS]),
    LintRow(String(repeating: "[", count: 70) + String(repeating: "]", count: 70), .alert, [.nestingTooDeep]),
]

@Test("lint findings", arguments: lintRows)
func lint(row: LintRow) {
    let findings = Lint.findings(payload: Array(row.payload.utf8), pushType: row.pushType)
    #expect(findings.map(\.code) == row.expected, "\(findings.map(\.message))")
    #expect(findings.allSatisfy { !$0.message.isEmpty })
}

@Test func invalidUTF8IsInvalidJSON() {
    let bytes: [UInt8] = Array(#"{"aps":{"alert":""#.utf8) + [0xC3, 0x28] + Array(#""}}"#.utf8)
    #expect(Lint.findings(payload: bytes, pushType: .alert).map(\.code) == [.invalidJSON])
}

@Test func findingCodesAreStableStrings() {
    #expect(LintFinding.Code.invalidJSON.rawValue == "invalid-json")
    #expect(LintFinding.Code.backgroundWithAlert.rawValue == "background-with-alert")
    #expect(LintFinding.Code.contentAvailableNot1.rawValue == "content-available-not-1")
    #expect(LintFinding.Code.liveActivityMissingEvent.rawValue == "liveactivity-missing-event")
    #expect(Set(LintFinding.Code.allCases.map(\.rawValue)).count == LintFinding.Code.allCases.count)
}

@Test func duplicateKeyMessageNamesThePath() {
    let findings = Lint.findings(payload: Array(#"{"aps":{"alert":{"title":"a","title":"b"}}}"#.utf8), pushType: .alert)
    #expect(findings.map(\.code) == [.duplicateKey])
    #expect(findings.first?.message.contains("aps.alert.title") == true)
}

@Test func escapedKeysAreReadByValue() {
    let escapedAlert = Lint.findings(payload: Array(#"{"aps":{"\u0061lert":"x"}}"#.utf8), pushType: .alert)
    #expect(escapedAlert.isEmpty, "\(escapedAlert.map(\.message))")
    let escapedDuplicate = Lint.findings(payload: Array(#"{"aps":{"alert":"x"},"k":1,"\u006b":2}"#.utf8), pushType: .alert)
    #expect(escapedDuplicate.map(\.code) == [.duplicateKey])
}

@Test func duplicateKeyPathsThroughArrays() {
    let findings = Lint.findings(
        payload: Array(#"{"aps":{"alert":"x"},"items":[1,{"k":1,"k":2}]}"#.utf8), pushType: .alert)
    #expect(findings.map(\.code) == [.duplicateKey])
    #expect(findings.first?.message.contains("\"items[1].k\"") == true, "\(findings.map(\.message))")
}

@Test func duplicatesInLargeObjectsAreFoundToo() {
    var members = (0..<40).map { #""key\#($0)":\#($0)"# }
    members.append(#""key7":0"#)
    members.append(#""key7":1"#)
    let payload = #"{"aps":{"alert":"x"},"big":{"# + members.joined(separator: ",") + "}}"
    let findings = Lint.findings(payload: Array(payload.utf8), pushType: .alert)
    #expect(findings.map(\.code) == [.duplicateKey])
    #expect(findings.first?.message.contains("big.key7") == true)
}

@Test func locationOverACertificateIsAFindingOfTheRecord() {
    let certificate = AuthSummary(method: .certificate, teamId: "DEMOTEAM01")
    #expect(LintFinding.authentication(certificate, pushType: .location).map(\.code) == [.locationOverCertificate])
    #expect(LintFinding.authentication(certificate, pushType: .alert).isEmpty)
    #expect(LintFinding.authentication(AuthSummary(method: .token), pushType: .location).isEmpty)
}
