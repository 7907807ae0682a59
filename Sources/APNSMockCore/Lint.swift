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
        /// An MDM push without its top-level `mdm` string (the device's PushMagic).
        case mdmMissingPushMagic = "mdm-missing-push-magic"
    }
}

/// The payload lint (apns-behavior.md section 4): reads the body once and reports every finding.
public enum Lint {
    /// Keys Apple defines inside `aps`, across every push type (alerts, background, Live
    /// Activities, widgets and controls, push-to-talk, Safari).
    public static let knownAPSKeys: Set<String> = [
        "alert", "badge", "sound", "thread-id", "category", "content-available", "mutable-content",
        "target-content-id", "interruption-level", "relevance-score", "filter-criteria",
        "stale-date", "content-state", "timestamp", "event", "dismissal-date", "attributes-type",
        "attributes", "input-push-token", "input-push-channel", "content-changed", "url-args",
    ]

    /// Every finding for `payload` sent as `pushType` (`nil` when the type is unknown: only the
    /// type-independent checks run).
    public static func findings(payload: [UInt8], pushType: PushType?) -> [LintFinding] {
        let document: JSONValue
        do {
            document = try JSONValue.parse(payload)
        } catch {
            switch error.kind {
            case .syntax:
                return [LintFinding(.invalidJSON, "payload is not JSON: \(error)")]
            case .tooDeep:
                return [LintFinding(.nestingTooDeep, "payload \(error.problem); not inspected further")]
            }
        }
        return findings(document: document, pushType: pushType)
    }

    /// Every finding for a payload already parsed.
    public static func findings(document: JSONValue, pushType: PushType?) -> [LintFinding] {
        var findings: [LintFinding] = []
        collectDuplicateKeys(in: document, path: "", into: &findings)
        guard document.members != nil else {
            findings.append(LintFinding(.notAnObject, "payload is a JSON \(document.kindName), not an object"))
            return findings
        }
        if pushType == .mdm, document["mdm"]?.stringValue == nil {
            findings.append(LintFinding(.mdmMissingPushMagic, "MDM push without a top-level \"mdm\" string"))
        }
        guard let aps = document["aps"] else {
            if pushType?.expectsAPSDictionary ?? true {
                findings.append(LintFinding(.missingAPS, "payload has no \"aps\" dictionary"))
            }
            return findings
        }
        guard let apsMembers = aps.members else {
            findings.append(LintFinding(.apsNotAnObject, "\"aps\" is a \(aps.kindName), not an object"))
            return findings
        }
        checkAPSMembers(apsMembers, aps: aps, into: &findings)
        switch pushType {
        case .alert:
            if aps["alert"] == nil, aps["sound"] == nil, aps["badge"] == nil {
                findings.append(LintFinding(
                    .alertWithoutContent, "alert push whose \"aps\" has no alert, sound or badge"))
            }
        case .background:
            checkBackground(aps, into: &findings)
        case .liveactivity:
            checkLiveActivity(aps, into: &findings)
        default:
            break
        }
        return findings
    }

    /// Type checks on the standard `aps` keys, and keys Apple does not define.
    private static func checkAPSMembers(_ members: [JSONValue.Member], aps: JSONValue, into findings: inout [LintFinding]) {
        for member in members where !knownAPSKeys.contains(member.key) {
            findings.append(LintFinding(
                .unknownAPSKey, "\"aps.\(member.key)\" is not a key Apple defines; custom data belongs outside \"aps\""))
        }
        if let alert = aps["alert"] {
            switch alert {
            case .string, .object: break
            default:
                findings.append(LintFinding(.alertWrongType, "\"aps.alert\" is a \(alert.kindName), not a string or object"))
            }
        }
        if let sound = aps["sound"] {
            switch sound {
            case .string, .object: break
            default:
                findings.append(LintFinding(.soundWrongType, "\"aps.sound\" is a \(sound.kindName), not a string or object"))
            }
        }
        if let badge = aps["badge"], (badge.integerValue ?? -1) < 0 {
            findings.append(LintFinding(
                .badgeNotInteger, "\"aps.badge\" is \(describe(badge)), not a non-negative whole number"))
        }
        if let value = aps["content-available"], value.integerValue != 1 {
            findings.append(LintFinding(
                .contentAvailableNot1, "\"aps.content-available\" is \(describe(value)); Apple reads only the number 1"))
        }
        if let value = aps["mutable-content"], value.integerValue != 1 {
            findings.append(LintFinding(
                .mutableContentNot1, "\"aps.mutable-content\" is \(describe(value)); Apple reads only the number 1"))
        }
    }

    private static func checkBackground(_ aps: JSONValue, into findings: inout [LintFinding]) {
        if aps["alert"] != nil {
            findings.append(LintFinding(.backgroundWithAlert, "background push carries \"aps.alert\"; background pushes must be silent"))
        }
        if aps["sound"] != nil {
            findings.append(LintFinding(.backgroundWithSound, "background push carries \"aps.sound\"; background pushes must be silent"))
        }
        if aps["badge"] != nil {
            findings.append(LintFinding(.backgroundWithBadge, "background push carries \"aps.badge\"; background pushes must be silent"))
        }
        if aps["content-available"] == nil {
            findings.append(LintFinding(
                .backgroundMissingContentAvailable, "background push without \"aps.content-available\": 1; the app is not woken"))
        }
    }

    private static func checkLiveActivity(_ aps: JSONValue, into findings: inout [LintFinding]) {
        let event = aps["event"]
        if let event {
            switch event.stringValue {
            case "start", "update", "end":
                break
            default:
                findings.append(LintFinding(
                    .liveActivityInvalidEvent, "\"aps.event\" is \(describe(event)), not \"start\", \"update\" or \"end\""))
            }
        } else {
            findings.append(LintFinding(.liveActivityMissingEvent, "Live Activity push without \"aps.event\""))
        }
        if let timestamp = aps["timestamp"] {
            if timestamp.integerValue == nil {
                findings.append(LintFinding(
                    .liveActivityInvalidTimestamp, "\"aps.timestamp\" is \(describe(timestamp)), not whole UNIX seconds"))
            }
        } else {
            findings.append(LintFinding(.liveActivityMissingTimestamp, "Live Activity push without \"aps.timestamp\""))
        }
        let eventName = event?.stringValue
        if eventName == "start" || eventName == "update", aps["content-state"] == nil {
            findings.append(LintFinding(
                .liveActivityMissingContentState, "Live Activity \"\(eventName ?? "")\" event without \"aps.content-state\""))
        }
        if eventName == "start", aps["attributes-type"] == nil || aps["attributes"] == nil {
            findings.append(LintFinding(
                .liveActivityStartMissingAttributes, "Live Activity \"start\" event without \"aps.attributes-type\" and \"aps.attributes\""))
        }
    }

    /// Reports each key an object repeats (once per key), at any depth. Paths are only built for
    /// containers and findings, so a flat payload costs no allocation here.
    private static func collectDuplicateKeys(in value: JSONValue, path: String, into findings: inout [LintFinding]) {
        switch value {
        case .object(let members):
            for key in repeatedKeys(in: members) {
                findings.append(LintFinding(.duplicateKey, "key \"\(join(path, key))\" appears more than once"))
            }
            for member in members where member.value.isContainer {
                collectDuplicateKeys(in: member.value, path: join(path, member.key), into: &findings)
            }
        case .array(let elements):
            for (index, element) in elements.enumerated() where element.isContainer {
                collectDuplicateKeys(in: element, path: "\(path)[\(index)]", into: &findings)
            }
        default:
            break
        }
    }

    /// Each key `members` repeats, once, in the order of its second occurrence. Small objects (all
    /// real payloads) are compared pairwise without allocating; large ones go through a set so that
    /// a hostile payload cannot make this quadratic.
    private static func repeatedKeys(in members: [JSONValue.Member]) -> [String] {
        var repeated: [String] = []
        if members.count <= 32 {
            for index in members.indices {
                let key = members[index].key
                var earlier = 0
                for member in members[..<index] where member.key == key {
                    earlier += 1
                }
                if earlier == 1 { repeated.append(key) }
            }
        } else {
            var seen = Set<String>(minimumCapacity: members.count)
            var reported = Set<String>()
            for member in members where !seen.insert(member.key).inserted && reported.insert(member.key).inserted {
                repeated.append(member.key)
            }
        }
        return repeated
    }

    private static func join(_ path: String, _ key: String) -> String {
        path.isEmpty ? key : "\(path).\(key)"
    }

    /// A value as it reads in a message: literals as written, containers by kind.
    private static func describe(_ value: JSONValue) -> String {
        switch value {
        case .null: return "null"
        case .bool(let bool): return bool ? "true" : "false"
        case .number(let literal): return literal
        case .string(let string): return "\"\(string)\""
        case .array, .object: return "an \(value.kindName)"
        }
    }
}
