import Testing
@testable import APNSMockCore

@Test("RFC 3339 times", arguments: [
    ("1970-01-01T00:00:00Z", Int64(0)),
    ("2026-01-01T00:00:00Z", 1_767_225_600_000),
    ("2025-06-30T12:00:00.250+02:00", 1_751_277_600_250),
    ("2000-02-29t23:59:59.9999z", 951_868_799_999),
    ("1969-12-31 23:59:59Z", -1000),
])
func rfc3339(text: String, milliseconds: Int64) {
    #expect(Timestamp.milliseconds(rfc3339: text) == milliseconds)
}

@Test("not RFC 3339", arguments: [
    "2026-01-01", "2026-01-01T00:00:00", "2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z",
    "2026-01-01T24:00:00Z", "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00Z ", "yesterday", "",
])
func notRFC3339(text: String) {
    #expect(Timestamp.milliseconds(rfc3339: text) == nil)
}

@Test func formatsTimestampsAsRecordsShowThem() {
    #expect(Timestamp.rfc3339(milliseconds: 1_767_225_600_123) == "2026-01-01T00:00:00.123Z")
    #expect(Timestamp.rfc3339(milliseconds: -1) == "1969-12-31T23:59:59.999Z")
    for milliseconds: Int64 in [0, 951_868_799_999, 1_751_277_600_250, 4_102_444_800_000] {
        #expect(Timestamp.milliseconds(rfc3339: Timestamp.rfc3339(milliseconds: milliseconds)) == milliseconds)
    }
}

@Test func rateLimiterAllowsABurstThenTheConfiguredRate() throws {
    let limit = try #require(RateLimit(requests: 3, interval: .seconds(1)))
    var limiter = RateLimiter(limit: limit, clock: { .zero })
    let token = String(repeating: "ab", count: 32)
    let start = Duration.seconds(10)
    let steps: [(String, Duration, Bool, String)] = [
        (token, start, true, "burst 1"),
        (token, start, true, "burst 2"),
        (token, start, true, "burst 3"),
        (token, start, false, "the burst is used up"),
        ("cd", start, true, "other devices have their own allowance"),
        (token, start + .milliseconds(300), false, "not yet a third of a second"),
        (token, start + .milliseconds(334), true, "one request per third of a second"),
        (token.uppercased(), start + .milliseconds(340), false, "case does not matter"),
        (token, start + .seconds(5), true, "allowance refilled"),
    ]
    for (device, time, expected, why) in steps {
        let admitted = limiter.admit(token: device, at: time)
        #expect(admitted == expected, "\(why)")
    }
}

@Test func rateLimiterTurnsAcceptedDecisionsIntoTooManyRequests() throws {
    let limit = try #require(RateLimit(requests: 1, interval: .seconds(60)))
    var limiter = RateLimiter(limit: limit, clock: { .seconds(1) })
    let accepted = Decision.accepted(AcceptedPush(token: "ab", topic: "com.example.app"))
    let first = limiter.apply(to: accepted)
    let second = limiter.apply(to: accepted)
    let rejected = Decision.rejected(Rejection(.badTopic))
    let passedThrough = limiter.apply(to: rejected)
    #expect(first == accepted)
    #expect(second == .rejected(Rejection(.tooManyRequests)))
    #expect(passedThrough == rejected, "rejections pass through uncounted")
}

@Test func rateLimiterForgetsIdleDevices() throws {
    let limit = try #require(RateLimit(requests: 1, interval: .milliseconds(10)))
    var limiter = RateLimiter(limit: limit)
    var refused = 0
    for index in 0..<5000 where !limiter.admit(token: String(index, radix: 16), at: .seconds(Int64(index))) {
        refused += 1
    }
    #expect(refused == 0)
    #expect(limiter.trackedDevices < 1100)
}

@Test func rateLimitNeedsPositiveValues() {
    #expect(RateLimit(requests: 0, interval: .seconds(1)) == nil)
    #expect(RateLimit(requests: 1, interval: .zero) == nil)
}

@Test func environmentFromHost() {
    #expect(APNSEnvironment(host: "api.push.apple.com:443") == .production)
    #expect(APNSEnvironment(host: "API.Sandbox.Push.Apple.com") == .sandbox)
    #expect(APNSEnvironment(host: "api.development.push.apple.com") == .sandbox)
    #expect(APNSEnvironment(host: "localhost") == nil)
}

@Test func pushTypeRules() {
    #expect(PushType.voip.payloadLimit == 5120)
    #expect(PushType.allCases.filter { $0 != .voip }.allSatisfy { $0.payloadLimit == 4096 })
    #expect(PushType.background.allowedPriorities == [5])
    #expect(PushType.location.requiredAuthentication == .tokenOnly)
    #expect(PushType.mdm.requiredAuthentication == .certificateOnly)
    #expect(PushType.location.requiredAuthentication.allows(.token))
    #expect(!PushType.mdm.requiredAuthentication.allows(.token))
    #expect(PushType.allCases.count == 11)
    #expect(PushType.fileprovider.bundleID(inTopic: "com.x.pushkit.fileprovider") == "com.x")
    #expect(PushType.alert.bundleID(inTopic: "com.x.voip-ptt") == nil)
    #expect(PushType.voip.bundleID(inTopic: "com.x.voip-ptt") == nil)
}

@Test func deviceRegistryEdits() {
    var registry = DeviceRegistry()
    let token = String(repeating: "AB", count: 32)
    registry.unregister(token: token, at: 42, reason: .expiredToken)
    #expect(registry.entry(for: token.lowercased())?.unregistration == DeviceEntry.Unregistration(timestamp: 42, reason: .expiredToken))
    #expect(registry.rejection(token: token, bundleID: "com.x", environment: .sandbox) == Rejection(.expiredToken, timestamp: 42))
    let removed = registry.remove(token: token)
    #expect(removed != nil)
    #expect(registry.isEmpty)
    registry.register(DeviceEntry(token: "cd"))
    registry.register(DeviceEntry(token: "ab"))
    #expect(registry.entries.map(\.token) == ["ab", "cd"])
}

@Suite("Known header names")
struct KnownHeaderTests {
    @Test(arguments: KnownHeader.allCases)
    func nameRoundTripsThroughBytes(_ header: KnownHeader) {
        var name = header.name
        let identified = name.withUTF8 { KnownHeader(name: UnsafeRawBufferPointer($0)) }
        #expect(identified == header)
    }

    @Test(arguments: ["apns-priorit", "apns-priorityx", ":Path", "user-agent", "", "apns-topics", "content-length"])
    func otherNamesAreNotKnown(_ name: String) {
        var name = name
        #expect(name.withUTF8 { KnownHeader(name: UnsafeRawBufferPointer($0)) } == nil)
    }

    /// The written-out comparison of the per-request headers covers exactly `KnownHeader.perRequest`.
    @Test(arguments: KnownHeader.allCases)
    func perRequestComparisonCoversThePerRequestHeaders(_ header: KnownHeader) {
        var a = PushRequest(), b = PushRequest()
        a[header] = "one"
        b[header] = "two"
        #expect(a.hasSamePerRequestHeaders(as: b) == !KnownHeader.perRequest.contains(header))
        #expect(!a.hasSameKnownHeaders(as: b))
        #expect(a.hasSameKnownHeaders(as: b, except: KnownHeader.Set(header)))
    }

    /// Every header a request can carry fits a repeat key, and reset clears every known header.
    @Test func everyKnownHeaderIsClearedByReset() {
        var request = PushRequest()
        for header in KnownHeader.allCases { request.set(header, value: header.name) }
        #expect(KnownHeader.allCases.allSatisfy { request[$0] == $0.name })
        request.reset()
        #expect(KnownHeader.allCases.allSatisfy { request[$0] == nil })
        #expect(KnownHeader.allCases.count < RepeatKey.fieldCapacity)
    }
}

/// `memoryEqual` takes word-load shortcuts by length: every length up to past the memcmp cut-off,
/// equal and with each byte in turn differing.
@Test func memoryEqualAtEveryLengthAndPosition() {
    let one: [UInt8] = [1]
    one.withUnsafeBufferPointer { #expect(memoryEqual(nil, $0.baseAddress!, 0)) }
    for count in 1...40 {
        let a = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        a.withUnsafeBufferPointer { left in
            var b = a
            b.withUnsafeBufferPointer { right in
                #expect(memoryEqual(left.baseAddress, right.baseAddress!, count))
            }
            for position in 0..<count {
                b = a
                b[position] ^= 0x20
                b.withUnsafeBufferPointer { right in
                    #expect(!memoryEqual(left.baseAddress, right.baseAddress!, count), "length \(count), byte \(position)")
                }
            }
        }
    }
}

/// `:path` forms of the broadcast side, read byte by byte.
@Test(arguments: [
    ("/4/broadcasts/apps/com.example.app", BroadcastPath.broadcast(bundleID: "com.example.app")),
    ("/4/broadcasts/apps/x", .broadcast(bundleID: "x")),
    ("/4/broadcasts/apps/", .other),
    ("/4/broadcasts/apps/com.example.app/", .other),
    ("/4/broadcasts/apps/com.example.app/x", .other),
    ("/4/broadcasts/apps", .other),
    ("/4/broadcasts/app/com.example.app", .other),
    ("/1/apps/com.example.app/channels", .channels(bundleID: "com.example.app")),
    ("/1/apps/com.example.app/all-channels", .allChannels(bundleID: "com.example.app")),
    ("/1/apps/com.example.app/channels/", .other),
    ("/1/apps/com.example.app/channel", .other),
    ("/1/apps//channels", .other),
    ("/1/apps/com.example.app", .other),
    ("/1/apps/com.example.app/", .other),
    ("/1/apps/é.app/channels", .channels(bundleID: "é.app")),
    ("", .other),
    ("/", .other),
])
func broadcastPaths(_ path: String, _ expected: BroadcastPath) {
    #expect(BroadcastPath(path) == expected)
}

/// The in-place byte search finds a needle at every position, and only a whole one.
@Test func byteSearchAtEveryPosition() {
    for length in 0...40 {
        for position in 0...max(0, length - 3) where length >= 3 {
            var bytes = [UInt8](repeating: UInt8(ascii: "i"), count: length)
            bytes.replaceSubrange(position..<(position + 3), with: Array("inp".utf8))
            #expect(bytes.containsBytes(of: "inp"))
        }
        let miss = [UInt8](repeating: UInt8(ascii: "i"), count: length)
        #expect(!miss.containsBytes(of: "inp"))
        #expect(!Array("in".utf8).containsBytes(of: "inp"))
    }
}

/// The payload-lint memo keeps a broadcast's findings (which add broadcast-only ones) apart from a
/// device push's for the same payload and push type: a connection sends both.
@Test func lintMemoTellsBroadcastsFromDevicePushes() {
    var memo = ValidationMemo()
    var request = PushRequest()
    request.body = Array(#"{"aps":{"event":"start"}}"#.utf8)
    request.bodyLength = request.body.count
    let broadcastOnly = LintFinding(.broadcastStartsLiveActivity, "a broadcast cannot start a Live Activity")
    #expect(memo.lint(request, pushType: .liveactivity, broadcast: true) { _, _ in [broadcastOnly] } == [broadcastOnly])
    #expect(memo.lint(request, pushType: .liveactivity) { _, _ in [] } == [])
    #expect(memo.lint(request, pushType: .liveactivity, broadcast: true) { _, _ in [broadcastOnly] } == [broadcastOnly])
    // The same question twice is answered from the memo.
    #expect(memo.lint(request, pushType: .liveactivity, broadcast: true) { _, _ in [] } == [broadcastOnly])
}

/// Only `BadEnvironmentKeyIdInToken` has another spelling; a rejection's reason decides it.
@Test func onlyTheEnvironmentKeyReasonHasAnotherSpelling() {
    var rejection = Rejection(.badEnvironmentKeyIdInToken, spelling: .observed)
    #expect(rejection.wireReason == "BadEnvironmentKeyInToken")
    rejection.reason = .badDeviceToken
    #expect(rejection.wireReason == "BadDeviceToken")
    #expect(Rejection(.badDeviceToken, spelling: .observed).wireReason == "BadDeviceToken")
}
