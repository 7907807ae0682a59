import APNSMockCore
import Foundation
import Testing

/// ``BroadcastValidator`` walks ``BroadcastStep``'s two orders: each step answers its own reasons,
/// the earlier of two failing steps decides, and docs/broadcast.md's tables list the same steps in
/// the same order.
@Suite("Broadcast validation steps")
struct BroadcastValidatorTests {
    static let channelID = "dHN0LTEyMzQ1Njc4OTBhYmNkZWY="
    static let noStorageChannelID = "bm8tc3RvcmFnZS1jaGFubmVsMDA="
    static let payload = Array(#"{"aps":{"event":"update","content-state":{},"timestamp":1}}"#.utf8)

    static func context(_ change: (inout BroadcastContext) -> Void = { _ in }) -> BroadcastContext {
        var context = BroadcastContext(
            environment: .sandbox,
            channels: ChannelRegistry([
                BroadcastChannel(bundleID: "com.example.app", environment: .sandbox, id: channelID, storagePolicy: .mostRecentMessageStored),
                BroadcastChannel(bundleID: "com.example.app", environment: .sandbox, id: noStorageChannelID, storagePolicy: .noMessageStored),
            ]))
        change(&context)
        return context
    }

    /// A broadcast every step passes.
    static func broadcast(_ change: (inout PushRequest) -> Void = { _ in }) -> PushRequest {
        var request = PushRequest()
        request.method = "POST"
        request.path = "/4/broadcasts/apps/com.example.app"
        request.channelID = channelID
        request.pushType = "liveactivity"
        request.expiration = "1893456000"
        request.body = payload
        request.bodyLength = payload.count
        change(&request)
        return request
    }

    static func decide(_ request: PushRequest, _ context: BroadcastContext = context()) -> BroadcastVerdict {
        var memo = ValidationMemo()
        return BroadcastValidator().decideBroadcast(request, context: context, memo: &memo)
    }

    @Test func aWellFormedBroadcastIsAccepted() throws {
        let verdict = Self.decide(Self.broadcast())
        guard case .accepted(let accepted) = verdict.outcome else { Issue.record("\(verdict)"); return }
        #expect(accepted.channel.id == Self.channelID && accepted.priority == 10 && accepted.expiration == 1_893_456_000)
        #expect(verdict.bundleID == "com.example.app")
    }

    /// One failing request per step of ``BroadcastStep/broadcastOrder``, and the reason it gets.
    static var stepRows: [(BroadcastStep, Reason, PushRequest, BroadcastContext)] {
        [
            (.broadcastRoute, .badPath, Self.broadcast { $0.path = "/4/broadcasts/apps/com.example.app/x" }, Self.context()),
            (.broadcastRoute, .methodNotAllowed, Self.broadcast { $0.method = "GET" }, Self.context()),
            (.messageID, .badMessageId, Self.broadcast { $0.apnsID = "not-a-uuid" }, Self.context()),
            (.bundle, .topicDisallowed, Self.broadcast { $0.path = "/4/broadcasts/apps/com.example.app.voip" }, Self.context()),
            (.requestID, .badMessageId, Self.broadcast { $0.requestID = "nope" }, Self.context()),
            (.authentication, .missingProviderToken, Self.broadcast(), Self.context { $0.authenticationFailure = Rejection(.missingProviderToken) }),
            (.topicMismatch, .topicMismatch, Self.broadcast(), Self.context { $0.allowedTopics = .bundleIDs(["com.example.other"]) }),
            (.featureEnabled, .featureNotEnabled, Self.broadcast(), Self.context { $0.settings.disabledApps = ["com.example.app"] }),
            (.channelID, .missingChannelId, Self.broadcast { $0.channelID = nil }, Self.context()),
            (.channelID, .badChannelId, Self.broadcast { $0.channelID = "!!" }, Self.context()),
            (.pushType, .missingPushType, Self.broadcast { $0.pushType = nil }, Self.context()),
            (.pushType, .invalidPushType, Self.broadcast { $0.pushType = "alert" }, Self.context()),
            (.expiration, .badExpirationDate, Self.broadcast { $0.expiration = nil }, Self.context()),
            (.expiration, .badExpirationDate, Self.broadcast { $0.expiration = "soon" }, Self.context()),
            (.priority, .badPriority, Self.broadcast { $0.priority = "7" }, Self.context()),
            (.priority, .badPriority, Self.broadcast { $0.priority = "1" }, Self.context { $0.settings.allowPriority1 = false }),
            (.channelRegistered, .channelNotRegistered, Self.broadcast { $0.channelID = "AAAAAAAAAAAAAAAAAAAAAA==" }, Self.context()),
            (.expirationForStoragePolicy, .badExpirationDate, Self.broadcast { $0.channelID = Self.noStorageChannelID }, Self.context()),
            (.payloadSize, .payloadEmpty, Self.broadcast { $0.body = []; $0.bodyLength = 0 }, Self.context()),
            (.payloadSize, .payloadTooLarge, Self.broadcast { $0.bodyLength = 5121 }, Self.context()),
            (.strictLint, .payloadEmpty, Self.broadcast { $0.body = Array(#"{"aps":{"event":"start"}}"#.utf8); $0.bodyLength = $0.body.count },
             Self.context { $0.validation.strictLint = true }),
        ]
    }

    @Test func eachBroadcastStepAnswersItsReason() {
        let rows = Self.stepRows
        for (step, reason, request, context) in rows {
            #expect(step.reasons.contains(reason), "\(step) does not list \(reason)")
            #expect(Self.decide(request, context).rejection?.reason == reason, "\(step): expected \(reason)")
        }
        #expect(Set(rows.map(\.0)) == Set(BroadcastStep.broadcastOrder), "every step of the order has a row")
    }

    /// A connection's memo never changes a decision: each row, and a well-formed broadcast, decided
    /// after a passing broadcast and after itself on one memo (with the row's settings, which a
    /// memo's connection keeps), decides as a fresh walk of every step does; so does a broadcast
    /// whose header fault comes after a credentials fault.
    @Test func memoisedBroadcastsDecideAsFreshOnes() {
        var rows = Self.stepRows.map { ($0.2, $0.3) }
        rows.append((Self.broadcast(), Self.context()))
        rows.append((Self.broadcast { $0.priority = "7" }, Self.context { $0.authenticationFailure = Rejection(.invalidProviderToken) }))
        rows.append((Self.broadcast { $0.priority = "7" }, Self.context { $0.allowedTopics = .bundleIDs(["com.example.other"]) }))
        for (request, context) in rows {
            let fresh = Self.decide(request, context)
            var memo = ValidationMemo()
            for first in [Self.broadcast(), request, Self.broadcast()] {
                _ = BroadcastValidator().decideBroadcast(first, context: context, memo: &memo)
                #expect(BroadcastValidator().decideBroadcast(request, context: context, memo: &memo) == fresh, "\(fresh)")
            }
        }
    }

    /// The remembered channel look-up follows the registry: a channel deleted (a new version) is
    /// no longer found, and without a version every broadcast looks it up again.
    @Test func theChannelMemoFollowsTheRegistrysVersion() {
        var memo = ValidationMemo()
        let validator = BroadcastValidator()
        var context = Self.context { $0.channelsVersion = 1 }
        #expect(validator.decideBroadcast(Self.broadcast(), context: context, memo: &memo).rejection == nil)
        var emptied = ChannelRegistry()
        emptied.insert(BroadcastChannel(
            bundleID: "com.example.app", environment: .sandbox, id: Self.noStorageChannelID, storagePolicy: .noMessageStored))
        context.channels = emptied
        context.channelsVersion = 2
        #expect(validator.decideBroadcast(Self.broadcast(), context: context, memo: &memo).rejection?.reason == .channelNotRegistered)
        context.channels = Self.context().channels
        context.channelsVersion = nil
        #expect(validator.decideBroadcast(Self.broadcast(), context: context, memo: &memo).rejection == nil)
        context.channels = emptied
        #expect(validator.decideBroadcast(Self.broadcast(), context: context, memo: &memo).rejection?.reason == .channelNotRegistered)
    }

    /// With two faults, the step earlier in the order decides.
    @Test func theEarlierStepDecides() {
        let both = Self.broadcast { $0.channelID = nil; $0.pushType = nil }
        #expect(Self.decide(both).rejection?.reason == .missingChannelId)
        let messageIDFirst = Self.broadcast { $0.apnsID = "x"; $0.path = "/4/broadcasts/apps/com.example.app.voip" }
        #expect(Self.decide(messageIDFirst).rejection?.reason == .badMessageId)
        let authBeforeChannel = Self.broadcast { $0.channelID = nil }
        #expect(Self.decide(authBeforeChannel, Self.context { $0.authenticationFailure = Rejection(.invalidProviderToken) })
            .rejection?.reason == .invalidProviderToken)
    }

    @Test func aRouteFailureNamesNoBundleButAMethodFailureDoes() {
        #expect(Self.decide(Self.broadcast { $0.path = "/elsewhere" }).bundleID == nil)
        #expect(Self.decide(Self.broadcast { $0.method = "PUT" }).bundleID == "com.example.app")
    }

    static func management(_ method: String, _ path: String, _ change: (inout PushRequest) -> Void = { _ in }) -> PushRequest {
        var request = PushRequest()
        request.method = method
        request.path = path
        change(&request)
        return request
    }

    static func create(_ body: String) -> PushRequest {
        management("POST", "/1/apps/com.example.app/channels") {
            $0.body = Array(body.utf8)
            $0.bodyLength = $0.body.count
        }
    }

    @Test func eachManagementStepAnswersItsReason() {
        let validator = BroadcastValidator()
        let rows: [(BroadcastStep, Reason, PushRequest, BroadcastContext)] = [
            (.managementRoute, .badPath, Self.management("GET", "/1/apps/com.example.app/other"), Self.context()),
            (.managementRoute, .methodNotAllowed, Self.management("PUT", "/1/apps/com.example.app/channels"), Self.context()),
            (.managementRoute, .methodNotAllowed, Self.management("POST", "/1/apps/com.example.app/all-channels"), Self.context()),
            (.bundle, .topicDisallowed, Self.management("GET", "/1/apps/com.example.app.push-type.liveactivity/all-channels"), Self.context()),
            (.requestID, .badMessageId, Self.management("GET", "/1/apps/com.example.app/all-channels") { $0.requestID = "x" }, Self.context()),
            (.authentication, .expiredProviderToken, Self.management("GET", "/1/apps/com.example.app/all-channels"),
             Self.context { $0.authenticationFailure = Rejection(.expiredProviderToken) }),
            (.topicMismatch, .topicMismatch, Self.management("GET", "/1/apps/com.example.app/all-channels"),
             Self.context { $0.allowedTopics = .bundleIDs(["com.example.other"]) }),
            (.featureEnabled, .featureNotEnabled, Self.management("GET", "/1/apps/com.example.app/all-channels"),
             Self.context { $0.settings.disabledApps = ["com.example.app"] }),
            (.channelID, .missingChannelId, Self.management("GET", "/1/apps/com.example.app/channels"), Self.context()),
            (.channelID, .badChannelId, Self.management("DELETE", "/1/apps/com.example.app/channels") { $0.channelID = "@" }, Self.context()),
            (.channelRegistered, .channelNotRegistered,
             Self.management("GET", "/1/apps/com.example.app/channels") { $0.channelID = "AAAAAAAAAAAAAAAAAAAAAA==" }, Self.context()),
            (.createBody, .payloadEmpty, Self.create(""), Self.context()),
            (.createBody, .badRequestPayload, Self.create("[1]"), Self.context()),
            (.createBody, .badRequestParams, Self.create(#"{"message-storage-policy":2,"push-type":"LiveActivity"}"#), Self.context()),
            (.createBody, .missingPushType, Self.create(#"{"message-storage-policy":1}"#), Self.context()),
            (.createBody, .invalidPushType, Self.create(#"{"message-storage-policy":1,"push-type":"alert"}"#), Self.context()),
        ]
        for (step, reason, request, context) in rows {
            #expect(step.reasons.contains(reason), "\(step) does not list \(reason)")
            #expect(validator.decideManagement(request, context: context).rejection?.reason == reason, "\(step): expected \(reason)")
        }
        #expect(Set(rows.map(\.0)) == Set(BroadcastStep.managementOrder))

        let created = validator.decideManagement(Self.create(#"{"message-storage-policy":0,"push-type":"LiveActivity"}"#), context: Self.context())
        #expect(created.outcome == .create(.noMessageStored) && created.operation == .create)
        let read = validator.decideManagement(
            Self.management("GET", "/1/apps/com.example.app/channels") { $0.channelID = Self.channelID }, context: Self.context())
        #expect(read.outcome == .read(Self.context().channels.channel(id: Self.channelID)!))
        let list = validator.decideManagement(Self.management("GET", "/1/apps/com.example.app/all-channels"), context: Self.context())
        guard case .list(let channels) = list.outcome else { Issue.record("\(list)"); return }
        #expect(channels.count == 2)
        #expect(validator.decideManagement(Self.management("GET", "/nowhere"), context: Self.context()).bundleID == nil)
    }

    /// docs/broadcast.md's two "Checks, in order" tables name the steps of the two orders.
    @Test func theDocumentedTablesAreTheOrders() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/broadcast.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        var tables: [[String]] = []
        var current: [String]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("| step |") { current = []; continue }
            guard current != nil else { continue }
            if line.hasPrefix("|---") { continue }
            if line.hasPrefix("| `") {
                let cell = line.dropFirst(3).prefix { $0 != "`" }
                current?.append(String(cell))
            } else {
                tables.append(current ?? [])
                current = nil
            }
        }
        #expect(tables == [
            BroadcastStep.managementOrder.map(\.rawValue), BroadcastStep.broadcastOrder.map(\.rawValue),
        ])
    }
}
