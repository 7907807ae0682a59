/// Something about a payload that APNs accepts but that is probably a mistake.
///
/// Apple documents no error for malformed JSON, a body without `aps` or unknown keys: APNs answers
/// 200 and the device drops or misreads the notification. The mock accepts the same way and attaches
/// findings to the record, so tests can catch what production would swallow; strict lint turns any
/// finding into a rejection (see ``ValidationSettings/strictLint``).
public struct LintFinding: Sendable, Equatable, Hashable {
    /// The kind of problem; its raw value is a stable identifier clients may match on.
    public var code: Code
    /// What was found and where, for people.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// Stable identifiers of lint findings (documented in docs/validation.md).
    public enum Code: String, Sendable, CaseIterable, Codable {
        /// The body is not JSON (syntax, UTF-8).
        case invalidJSON = "invalid-json"
        /// The JSON nests deeper than the lint follows; the rest was not inspected.
        case nestingTooDeep = "nesting-too-deep"
        /// The body is JSON but not an object.
        case notAnObject = "not-an-object"
        /// An object repeats a key; which one the device uses is undefined.
        case duplicateKey = "duplicate-key"
        /// No `aps` dictionary, for a push type whose payload needs one.
        case missingAPS = "missing-aps"
        /// No `aps`, but request fields (`topic`, `priority`, `expiration`…) at the top level: a
        /// client's request object serialised as the body (one library sends that for several
        /// push types); Apple takes these as headers, and the payload carries none of them. Flagged
        /// for every push type, those whose payload is otherwise ignored included.
        case requestFieldsInPayload = "request-fields-in-payload"
        /// `aps` is present but not an object.
        case apsNotAnObject = "aps-not-an-object"
        /// A key inside `aps` that Apple does not define; custom data belongs outside `aps`.
        case unknownAPSKey = "unknown-aps-key"
        /// `aps.alert` is neither a string nor an object.
        case alertWrongType = "alert-wrong-type"
        /// `aps.sound` is neither a string nor an object.
        case soundWrongType = "sound-wrong-type"
        /// `aps.badge` is not a non-negative whole number.
        case badgeNotInteger = "badge-not-integer"
        /// `aps.content-available` is present but not the number 1 (the only value Apple reads).
        case contentAvailableNot1 = "content-available-not-1"
        /// `aps.mutable-content` is present but not the number 1.
        case mutableContentNot1 = "mutable-content-not-1"
        /// An alert push with no alert, sound or badge: nothing for the device to show.
        case alertWithoutContent = "alert-without-content"
        /// A background push carrying `alert`: Apple requires background pushes to be silent.
        case backgroundWithAlert = "background-with-alert"
        /// A background push carrying `sound`.
        case backgroundWithSound = "background-with-sound"
        /// A background push carrying `badge`.
        case backgroundWithBadge = "background-with-badge"
        /// A background push without `content-available: 1`, so the app is not woken.
        case backgroundMissingContentAvailable = "background-missing-content-available"
        /// A Live Activity push without `aps.event`.
        case liveActivityMissingEvent = "liveactivity-missing-event"
        /// `aps.event` is not `start`, `update` or `end`.
        case liveActivityInvalidEvent = "liveactivity-invalid-event"
        /// A Live Activity push without `aps.timestamp`.
        case liveActivityMissingTimestamp = "liveactivity-missing-timestamp"
        /// `aps.timestamp` is not a whole number of seconds.
        case liveActivityInvalidTimestamp = "liveactivity-invalid-timestamp"
        /// A `start` or `update` event without `aps.content-state`.
        case liveActivityMissingContentState = "liveactivity-missing-content-state"
        /// A `start` event without `attributes-type` and `attributes`.
        case liveActivityStartMissingAttributes = "liveactivity-start-missing-attributes"
        /// A `start` event without `alert` (Apple requires one to start an activity).
        case liveActivityStartMissingAlert = "liveactivity-start-missing-alert"
        /// `aps.stale-date` or `aps.dismissal-date` is not a number of seconds.
        case liveActivityDateNotNumber = "liveactivity-date-not-a-number"
        /// `aps.input-push-token` is present but not the number 1.
        case liveActivityInputPushTokenNot1 = "liveactivity-input-push-token-not-1"
        /// `aps.input-push-channel` is not a string, or (checked with the channel registry) names no
        /// channel of the app in the request's environment.
        case liveActivityUnknownChannel = "liveactivity-unknown-channel"
        /// A broadcast with `aps.event` `start`: broadcasts cannot start a Live Activity.
        case broadcastStartsLiveActivity = "broadcast-starts-liveactivity"
        /// An MDM push without its top-level `mdm` string (the device's PushMagic).
        case mdmMissingPushMagic = "mdm-missing-push-magic"
        /// Not about the payload: the provider token's `iat` is a decimal or a string of digits
        /// rather than the integer Apple documents. Apple accepts it, and so does the mock; strict
        /// lint ignores this finding (`validation.strictProviderTokens` rejects such tokens).
        case iatNotInteger = "iat-not-integer"
        /// Not about the payload: the provider token's signature is DER-encoded (Java's
        /// `SHA256withECDSA`, as pushy signs) rather than JOSE's `r ‖ s`. Apple accepts it, and so
        /// does the mock; `validation.strictProviderTokens` rejects such tokens.
        case signatureDER = "token-signature-der"
        /// A widgets or controls push (iOS 26) without `"aps": {"content-changed": true}`, which
        /// Apple's pages give every such payload: the system may not reload anything.
        case contentChangedMissing = "content-changed-missing"
        /// Not about the payload: a location push over certificate authentication. Apple: the
        /// location push type "supports only token-based authentication", and names no error;
        /// accepted, and refused as 403 Forbidden under `validation.strictLint`.
        case locationOverCertificate = "location-over-certificate"
    }

    /// The findings a record carries about how the request was authenticated for its push type:
    /// a location push over a certificate.
    public static func authentication(_ auth: AuthSummary, pushType: PushType?) -> [LintFinding] {
        guard pushType == .location, auth.method == .certificate else { return [] }
        return [LintFinding(
            .locationOverCertificate,
            "a location push over certificate authentication; Apple: location \"supports only token-based authentication\""
                + " (accepted; refused as 403 Forbidden under validation.strictLint)")]
    }

    /// The findings a record carries about its provider token: an `iat` that is not an integer, a
    /// DER-encoded signature. Neither is the payload's; strict lint ignores them.
    public static func providerToken(_ auth: AuthSummary) -> [LintFinding] {
        var findings: [LintFinding] = []
        switch auth.iatForm {
        case .decimal?:
            findings.append(LintFinding(
                .iatNotInteger,
                "the provider token's iat is a decimal number; Apple documents whole seconds (accepted, truncated)"))
        case .string?:
            findings.append(LintFinding(
                .iatNotInteger, "the provider token's iat is a string of digits; Apple documents a number (accepted)"))
        case .integer?, nil:
            break
        }
        if auth.signatureForm == .der {
            findings.append(LintFinding(
                .signatureDER,
                "the provider token's ES256 signature is DER-encoded (Java's SHA256withECDSA); JWT (RFC 7518) specifies r || s (accepted)"))
        }
        return findings
    }
}

/// The payload lint (docs/apns.md, "Payloads"): reads the body once and reports every finding.
///
/// It runs for every request, so it reads a ``JSONTape`` (one allocation, no strings) and compares
/// keys as bytes; strings are only made for the messages of findings.
public enum Lint {
    /// Keys Apple defines inside `aps`, across every push type (alerts, background, Live
    /// Activities, widgets and controls, push-to-talk, Safari).
    public static let knownAPSKeys: [String] = [
        "alert", "badge", "sound", "thread-id", "category", "content-available", "mutable-content",
        "target-content-id", "interruption-level", "relevance-score", "filter-criteria",
        "stale-date", "content-state", "timestamp", "event", "dismissal-date", "attributes-type",
        "attributes", "input-push-token", "input-push-channel", "content-changed", "url-args",
    ]

    private static let knownAPSKeyBytes: [[UInt8]] = knownAPSKeys.map { Array($0.utf8) }

    /// Names a client's request object gives its header fields, looked for at a payload's top level
    /// when it has no `aps` (``LintFinding/Code/requestFieldsInPayload``).
    static let requestFieldNames: [StaticString] = [
        "topic", "priority", "expiration", "pushType", "push-type", "collapseId", "collapse-id", "apnsId", "apns-id",
        "deviceToken", "device-token",
    ]

    /// Every finding for `payload` sent as `pushType` (`nil` when the type is unknown: only the
    /// type-independent checks run).
    public static func findings(payload: [UInt8], pushType: PushType?) -> [LintFinding] {
        let tape: JSONTape
        do {
            tape = try JSONTape(payload)
        } catch {
            switch error.kind {
            case .syntax:
                return [LintFinding(.invalidJSON, "payload is not JSON: \(error)")]
            case .tooDeep:
                return [LintFinding(.nestingTooDeep, "payload \(error.problem); not inspected further")]
            }
        }
        var findings: [LintFinding] = []
        collectDuplicateKeys(tape, into: &findings)
        let root = tape.root
        guard tape.kind(root) == .object else {
            findings.append(LintFinding(.notAnObject, "payload is a JSON \(kindName(tape, root)), not an object"))
            return findings
        }
        if pushType == .mdm, tape.member(root, "mdm").map({ tape.kind($0) == .string }) != true {
            findings.append(LintFinding(.mdmMissingPushMagic, "MDM push without a top-level \"mdm\" string"))
        }
        guard let aps = tape.member(root, "aps") else {
            if pushType?.expectsAPSDictionary ?? true {
                findings.append(LintFinding(.missingAPS, "payload has no \"aps\" dictionary"))
            }
            let fields = requestFieldNames.filter { tape.member(root, $0) != nil }
            if !fields.isEmpty {
                findings.append(LintFinding(
                    .requestFieldsInPayload,
                    "payload has no \"aps\" but has request fields at its top level (\(fields.map(\.description).joined(separator: ", "))):"
                        + " a serialised request object? Apple takes these as headers (apns-topic, apns-priority, …)"))
            }
            return findings
        }
        guard tape.kind(aps) == .object else {
            findings.append(LintFinding(.apsNotAnObject, "\"aps\" is a \(kindName(tape, aps)), not an object"))
            return findings
        }
        let keys = APSKeys(tape: tape, aps: aps)
        checkAPSMembers(keys, into: &findings)
        switch pushType {
        case .alert:
            if keys.alert == nil, keys.sound == nil, keys.badge == nil {
                findings.append(LintFinding(
                    .alertWithoutContent, "alert push whose \"aps\" has no alert, sound or badge"))
            }
        case .background:
            checkBackground(keys, into: &findings)
        case .liveactivity:
            checkLiveActivity(keys, into: &findings)
        case .widgets, .controls:
            if keys.contentChanged.map({ tape.kind($0) == .true }) != true {
                findings.append(LintFinding(
                    .contentChangedMissing,
                    "\(pushType!.rawValue) push without \"aps.content-changed\": true, which Apple's payloads for it carry"))
            }
        default:
            break
        }
        return findings
    }

    /// The `aps` members the checks read, found in one walk over `aps`.
    private struct APSKeys {
        let tape: JSONTape
        var alert: Int?
        var sound: Int?
        var badge: Int?
        var contentAvailable: Int?
        var mutableContent: Int?
        var event: Int?
        var timestamp: Int?
        var contentState: Int?
        var attributesType: Int?
        var attributes: Int?
        var staleDate: Int?
        var dismissalDate: Int?
        var inputPushToken: Int?
        var inputPushChannel: Int?
        var contentChanged: Int?
        /// Key tokens of members Apple does not define.
        var unknown: [Int] = []

        init(tape: JSONTape, aps: Int) {
            self.tape = tape
            for (key, value) in tape.members(aps) {
                // The first occurrence wins, as for JSONValue's subscript.
                func take(_ slot: inout Int?) { if slot == nil { slot = value } }
                if tape.keyEquals(key, "alert") { take(&alert) }
                else if tape.keyEquals(key, "sound") { take(&sound) }
                else if tape.keyEquals(key, "badge") { take(&badge) }
                else if tape.keyEquals(key, "content-available") { take(&contentAvailable) }
                else if tape.keyEquals(key, "mutable-content") { take(&mutableContent) }
                else if tape.keyEquals(key, "event") { take(&event) }
                else if tape.keyEquals(key, "timestamp") { take(&timestamp) }
                else if tape.keyEquals(key, "content-state") { take(&contentState) }
                else if tape.keyEquals(key, "attributes-type") { take(&attributesType) }
                else if tape.keyEquals(key, "attributes") { take(&attributes) }
                else if tape.keyEquals(key, "stale-date") { take(&staleDate) }
                else if tape.keyEquals(key, "dismissal-date") { take(&dismissalDate) }
                else if tape.keyEquals(key, "input-push-token") { take(&inputPushToken) }
                else if tape.keyEquals(key, "input-push-channel") { take(&inputPushChannel) }
                else if tape.keyEquals(key, "content-changed") { take(&contentChanged) }
                else if !Lint.isKnownAPSKey(tape, key) { unknown.append(key) }
            }
        }
    }

    private static func isKnownAPSKey(_ tape: JSONTape, _ key: Int) -> Bool {
        let token = tape.tokens[key]
        if token.hasEscapes {
            return knownAPSKeys.contains(tape.string(key))
        }
        let raw = tape.bytes[Int(token.start)..<Int(token.end)]
        return knownAPSKeyBytes.contains { $0.count == raw.count && $0.elementsEqual(raw) }
    }

    /// Type checks on the standard `aps` keys, and keys Apple does not define.
    private static func checkAPSMembers(_ keys: APSKeys, into findings: inout [LintFinding]) {
        let tape = keys.tape
        for key in keys.unknown {
            findings.append(LintFinding(
                .unknownAPSKey, "\"aps.\(tape.string(key))\" is not a key Apple defines; custom data belongs outside \"aps\""))
        }
        if let alert = keys.alert, tape.kind(alert) != .string, tape.kind(alert) != .object {
            findings.append(LintFinding(.alertWrongType, "\"aps.alert\" is \(describe(tape, alert)), not a string or object"))
        }
        if let sound = keys.sound, tape.kind(sound) != .string, tape.kind(sound) != .object {
            findings.append(LintFinding(.soundWrongType, "\"aps.sound\" is \(describe(tape, sound)), not a string or object"))
        }
        if let badge = keys.badge, (tape.integer(badge) ?? -1) < 0 {
            findings.append(LintFinding(
                .badgeNotInteger, "\"aps.badge\" is \(describe(tape, badge)), not a non-negative whole number"))
        }
        if let value = keys.contentAvailable, tape.integer(value) != 1 {
            findings.append(LintFinding(
                .contentAvailableNot1, "\"aps.content-available\" is \(describe(tape, value)); Apple reads only the number 1"))
        }
        if let value = keys.mutableContent, tape.integer(value) != 1 {
            findings.append(LintFinding(
                .mutableContentNot1, "\"aps.mutable-content\" is \(describe(tape, value)); Apple reads only the number 1"))
        }
    }

    private static func checkBackground(_ keys: APSKeys, into findings: inout [LintFinding]) {
        if keys.alert != nil {
            findings.append(LintFinding(.backgroundWithAlert, "background push carries \"aps.alert\"; background pushes must be silent"))
        }
        if keys.sound != nil {
            findings.append(LintFinding(.backgroundWithSound, "background push carries \"aps.sound\"; background pushes must be silent"))
        }
        if keys.badge != nil {
            findings.append(LintFinding(.backgroundWithBadge, "background push carries \"aps.badge\"; background pushes must be silent"))
        }
        if keys.contentAvailable == nil {
            findings.append(LintFinding(
                .backgroundMissingContentAvailable, "background push without \"aps.content-available\": 1; the app is not woken"))
        }
    }

    private static func checkLiveActivity(_ keys: APSKeys, into findings: inout [LintFinding]) {
        let tape = keys.tape
        var eventName: LiveActivityEvent?
        if let event = keys.event {
            eventName = LiveActivityEvent(tape, event)
            if eventName == nil {
                findings.append(LintFinding(
                    .liveActivityInvalidEvent, "\"aps.event\" is \(describe(tape, event)), not \"start\", \"update\" or \"end\""))
            }
        } else {
            findings.append(LintFinding(.liveActivityMissingEvent, "Live Activity push without \"aps.event\""))
        }
        if let timestamp = keys.timestamp {
            if tape.integer(timestamp) == nil {
                findings.append(LintFinding(
                    .liveActivityInvalidTimestamp, "\"aps.timestamp\" is \(describe(tape, timestamp)), not whole UNIX seconds"))
            }
        } else {
            findings.append(LintFinding(.liveActivityMissingTimestamp, "Live Activity push without \"aps.timestamp\""))
        }
        if let eventName, eventName != .end, keys.contentState == nil {
            findings.append(LintFinding(
                .liveActivityMissingContentState, "Live Activity \"\(eventName.rawValue)\" event without \"aps.content-state\""))
        }
        if eventName == .start, keys.attributesType == nil || keys.attributes == nil {
            findings.append(LintFinding(
                .liveActivityStartMissingAttributes, "Live Activity \"start\" event without \"aps.attributes-type\" and \"aps.attributes\""))
        }
        if eventName == .start, keys.alert == nil {
            findings.append(LintFinding(.liveActivityStartMissingAlert, "Live Activity \"start\" event without \"aps.alert\""))
        }
        for (name, date) in [("stale-date", keys.staleDate), ("dismissal-date", keys.dismissalDate)] {
            if let date, tape.kind(date) != .number {
                findings.append(LintFinding(
                    .liveActivityDateNotNumber, "\"aps.\(name)\" is \(describe(tape, date)), not UNIX seconds"))
            }
        }
        if let token = keys.inputPushToken, tape.integer(token) != 1 {
            findings.append(LintFinding(
                .liveActivityInputPushTokenNot1, "\"aps.input-push-token\" is \(describe(tape, token)), not 1"))
        }
        if let channel = keys.inputPushChannel, tape.kind(channel) != .string {
            findings.append(LintFinding(
                .liveActivityUnknownChannel, "\"aps.input-push-channel\" is \(describe(tape, channel)), not a channel ID"))
        }
    }

    /// Whether `payload`'s `aps.event` is `start` (a broadcast cannot start a Live Activity).
    public static func startsLiveActivity(_ payload: [UInt8]) -> Bool {
        guard let tape = try? JSONTape(payload), tape.kind(tape.root) == .object,
              let aps = tape.member(tape.root, "aps"), tape.kind(aps) == .object,
              let event = tape.member(aps, "event") else { return false }
        return LiveActivityEvent(tape, event) == .start
    }

    /// The channel ID a Live Activity `start` payload subscribes to (`aps.input-push-channel`), if
    /// it has one as a string. Most payloads have none: a byte search rules them out first.
    public static func inputPushChannel(_ payload: [UInt8]) -> String? {
        guard payload.containsBytes(of: "input-push-channel"),
              let tape = try? JSONTape(payload), tape.kind(tape.root) == .object,
              let aps = tape.member(tape.root, "aps"), tape.kind(aps) == .object,
              let channel = tape.member(aps, "input-push-channel"), tape.kind(channel) == .string
        else { return nil }
        return tape.string(channel)
    }

    private enum LiveActivityEvent: String {
        case start, update, end

        init?(_ tape: JSONTape, _ index: Int) {
            guard tape.kind(index) == .string else { return nil }
            if tape.keyEquals(index, "start") { self = .start }
            else if tape.keyEquals(index, "update") { self = .update }
            else if tape.keyEquals(index, "end") { self = .end }
            else { return nil }
        }
    }

    /// Reports each key an object repeats (once per key), anywhere in the document. The tape is
    /// flat, so every object is visited by one linear walk, without recursion.
    private static func collectDuplicateKeys(_ tape: JSONTape, into findings: inout [LintFinding]) {
        for index in tape.tokens.indices where tape.kind(index) == .object {
            for key in repeatedKeys(tape, object: index) {
                let parent = tape.path(index)
                let name = tape.string(key)
                findings.append(LintFinding(
                    .duplicateKey, "key \"\(parent.isEmpty ? name : "\(parent).\(name)")\" appears more than once"))
            }
        }
    }

    /// Key tokens of each key `object` repeats, at its second occurrence. Small objects (all real
    /// payloads) are compared pairwise without allocating; large ones go through a set so that a
    /// hostile payload cannot make this quadratic.
    private static func repeatedKeys(_ tape: JSONTape, object: Int) -> [Int] {
        var repeated: [Int] = []
        var count = 0
        for _ in tape.members(object) { count += 1 }
        if count <= 32 {
            for (key, _) in tape.members(object) {
                var earlier = 0
                for (other, _) in tape.members(object) {
                    if other == key { break }
                    if tape.stringsEqual(other, key) { earlier += 1 }
                }
                if earlier == 1 { repeated.append(key) }
            }
        } else {
            var seen = Set<String>(minimumCapacity: count)
            var reported = Set<String>()
            for (key, _) in tape.members(object) {
                let name = tape.string(key)
                if !seen.insert(name).inserted, reported.insert(name).inserted {
                    repeated.append(key)
                }
            }
        }
        return repeated
    }

    private static func kindName(_ tape: JSONTape, _ index: Int) -> String {
        switch tape.kind(index) {
        case .object: return "object"
        case .array: return "array"
        case .string: return "string"
        case .number: return "number"
        case .true, .false: return "boolean"
        case .null: return "null"
        }
    }

    /// A value as it reads in a message: literals as written, containers by kind.
    private static func describe(_ tape: JSONTape, _ index: Int) -> String {
        switch tape.kind(index) {
        case .string: return "\"\(tape.string(index))\""
        case .object: return "an object"
        case .array: return "an array"
        case .number, .true, .false, .null: return tape.literal(index)
        }
    }
}
