@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Testing

/// The fault store's index: a request is compared only with the rules filed under its own values,
/// and the oldest matching rule still wins, as a scan of every rule in order would pick.
@Suite("Fault rule index")
struct FaultIndexTests {
    static func token(_ number: Int) -> String { String(format: "%064x", number) }
    static func rule(_ match: FaultRule.Match, times: Int? = nil, probability: Double = 1) -> FaultRule {
        FaultRule(match: match, respond: Rejection(.internalServerError), times: times, probability: probability)
    }

    /// Ten thousand rules for other devices (the finding: they made every request scan them all,
    /// 250k req/s down to 5.5k) leave a request nothing to compare with.
    @Test func rulesForOtherDevicesAreNotCandidates() {
        let store = FaultStore([])
        for number in 1...10_000 { store.add(Self.rule(.init(token: Self.token(number)))) }
        for _ in 0..<1_000 { store.add(Self.rule(.init(pushType: .voip))) }
        let facts = FaultRule.Facts(token: Self.token(0), topic: "com.example.app", pushType: .alert)
        #expect(store.candidateCount(facts) == 0)
        #expect(store.apply(facts) == nil)
        // The device's own rule is found, whatever case the request spells its token in.
        store.add(Self.rule(.init(token: Self.token(0))))
        let upper = FaultRule.Facts(token: Self.token(0).uppercased(), topic: "com.example.app", pushType: .alert)
        #expect(store.candidateCount(upper) == 1)
        #expect(store.apply(upper) != nil)
    }

    /// Rules filed under different keys are merged oldest first; `times` removes a rule from its
    /// list; removing by id and reset keep the index in step.
    @Test func oldestMatchingRuleWinsAcrossKeys() throws {
        let store = FaultStore([])
        let byTopic = store.add(FaultRule(match: .init(topic: "com.example.app"), respond: Rejection(.serviceUnavailable), times: 1))
        store.add(Self.rule(.init(token: Self.token(7))))
        store.add(Self.rule(.init()))
        let facts = FaultRule.Facts(token: Self.token(7), topic: "com.example.app", pushType: .alert)
        #expect(store.candidateCount(facts) == 3)
        // The topic rule is oldest: it fires once, then the token rule (second oldest) takes over.
        #expect(store.apply(facts)?.respond?.reason == .serviceUnavailable)
        #expect(store.entries.map(\.id) == ["2", "3"])
        #expect(store.entries.allSatisfy { $0.id != byTopic.id })
        #expect(store.apply(facts)?.match.token == Self.token(7))
        #expect(store.entries.map(\.applied) == [1, 0])
        #expect(store.remove(id: "2"))
        #expect(!store.remove(id: "2"))
        #expect(store.candidateCount(facts) == 1)
        #expect(store.apply(facts)?.match == FaultRule.Match())
        store.removeAll()
        #expect(store.candidateCount(facts) == 0)
        #expect(store.apply(facts) == nil)
    }

    /// A rule that names several fields is filed under one and still checks them all; a rule whose
    /// probability roll fails leaves the next candidate its turn.
    @Test func everyNamedFieldIsStillChecked() {
        let store = FaultStore([], seed: 1)
        store.add(Self.rule(.init(token: Self.token(1), pushType: .voip)))
        store.add(Self.rule(.init(topic: "com.example.app", connection: 2)))
        store.add(Self.rule(.init(kind: .broadcast), probability: 0))
        store.add(Self.rule(.init(kind: .broadcast, afterRequests: 3)))
        let alert = FaultRule.Facts(token: Self.token(1), topic: "com.example.app", pushType: .alert, connection: 1)
        #expect(store.apply(alert) == nil)
        #expect(store.apply(FaultRule.Facts(token: Self.token(1), topic: "com.example.app", pushType: .voip))?.match.pushType == .voip)
        #expect(store.apply(FaultRule.Facts(topic: "com.example.app", connection: 2))?.match.connection == 2)
        #expect(store.apply(FaultRule.Facts(kind: .broadcast, requestNumber: 3)) == nil)
        #expect(store.apply(FaultRule.Facts(kind: .broadcast, requestNumber: 4))?.match.afterRequests == 3)
    }

    /// End to end: 10,000 rules for other devices, then a normal push is answered 200 and the one
    /// rule for its device fires; past ``FaultStore/maxRules`` the admin API refuses, saying why.
    @Test func tenThousandRulesThroughTheAdminAPI() async throws {
        try await MockHarness.withRunningMock { mock in
            // 5,000 rules a request keeps each body under the admin API's 1 MiB.
            func addBatch(_ batch: Int) async throws -> Int {
                let rules = (batch * 5_000 + 1...(batch + 1) * 5_000).map {
                    #"{"match":{"token":"\#(Self.token($0))"},"respond":{"reason":"BadDeviceToken"}}"#
                }
                return try await mock.admin.request("POST", "/v1/faults", body: Data(("[" + rules.joined(separator: ",") + "]").utf8)).status
            }
            #expect(try await addBatch(0) == 201)
            #expect(try await addBatch(1) == 201)
            #expect(try await Pushes.push(mock).status == 200)
            try await mock.admin.addFault(json: #"{"match":{"token":"\#(Pushes.token)"},"respond":{"reason":"Unregistered"}}"#)
            #expect(try await Pushes.push(mock).status == 410)
            #expect(try await mock.admin.faults().faults.count == 10_001)

            for batch in 2..<19 { #expect(try await addBatch(batch) == 201) }
            // 95,001 held: 5,000 more would pass 100,000, and a list is added whole or not at all.
            let refused = try await mock.admin.request(
                "POST", "/v1/faults", body: Data(("[" + Array(repeating: #"{"respond":{"reason":"Shutdown"}}"#, count: 5_000).joined(separator: ",") + "]").utf8))
            #expect(refused.status == 409)
            let message = String(decoding: refused.body, as: UTF8.self)
            #expect(message.contains("at most 100000 rules at once (95001 exist)"), "\(message)")
            #expect(try await mock.admin.faults().faults.count == 95_001)
            #expect(try await mock.admin.request("DELETE", "/v1/faults").status == 204)
            #expect(try await Pushes.push(mock).status == 200)
        }
    }
}
