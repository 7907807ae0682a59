import APNSMockCore
import Foundation

/// A problem with what the user gave `send`: reported as one line, exit code 2.
struct SendInputError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Where the payload comes from and the flags that add to it.
struct PayloadOptions {
    /// A payload file (`.json`, `.apns` or any name), or `-` for standard input.
    var file: String?
    /// The whole payload as JSON text (`--payload`).
    var inline: String?
    var alert: String?
    var title: String?
    var subtitle: String?
    var body: String?
    var badge: Int?
    var sound: String?
    var category: String?
    var threadID: String?
    var contentAvailable = false
    var mutableContent = false
    /// JSON objects whose members go to the top level of the payload (custom keys).
    var data: [String] = []

    var hasApsFlags: Bool {
        alert != nil || title != nil || subtitle != nil || body != nil || badge != nil || sound != nil
            || category != nil || threadID != nil || contentAvailable || mutableContent
    }
}

/// The payload `send` sends, built from a file, `--payload` and the payload flags.
struct BuiltPayload {
    /// The bytes to send.
    var bytes: [UInt8]
    /// The top-level `Simulator Target Bundle` of an `.apns` file (removed from `bytes`).
    var bundle: String?
    /// Whether the payload came from a file named `*.apns`.
    var isSimulatorFile: Bool
    /// The payload's `aps` dictionary, for choosing the push type.
    var aps: JSONValue?
}

enum SendPayload {
    /// The key `xcrun simctl push` reads the target app's bundle ID from.
    static let simulatorTargetBundle = "Simulator Target Bundle"

    static let defaultPayload = #"{"aps":{"alert":"hello"}}"#

    static func build(_ options: PayloadOptions) throws(SendInputError) -> BuiltPayload {
        if options.file != nil, options.inline != nil {
            throw SendInputError("give a payload FILE or --payload, not both")
        }
        if options.alert != nil, options.title != nil || options.subtitle != nil || options.body != nil {
            throw SendInputError("give --alert or --title/--subtitle/--body, not both")
        }

        var source: (name: String, bytes: [UInt8])?
        if let file = options.file {
            source = (file == "-" ? "standard input" : file, try read(file))
        } else if let inline = options.inline {
            source = ("--payload", Array(inline.utf8))
        }
        let isSimulatorFile = options.file.map { $0.lowercased().hasSuffix(".apns") } ?? false

        guard let source else {
            // Flags only, or nothing: the default alert.
            let base: [JSONValue.Member] = options.hasApsFlags || !options.data.isEmpty
                ? [] : [.init(key: "aps", value: .object([.init(key: "alert", value: .string("hello"))]))]
            var members = base
            try apply(options, to: &members)
            let value = JSONValue.object(members)
            return BuiltPayload(bytes: Array(value.jsonText().utf8), bundle: nil, isSimulatorFile: false, aps: value["aps"])
        }

        let parsed: JSONValue
        do {
            parsed = try JSONValue.parse(source.bytes)
        } catch {
            throw SendInputError("\(source.name) is not JSON: \(error)")
        }
        guard case .object(var members) = parsed else {
            throw SendInputError("\(source.name) is not a JSON object (it is \(article(parsed.kindName)))")
        }

        var bundle: String?
        if let found = parsed[simulatorTargetBundle] {
            guard let name = found.stringValue else {
                throw SendInputError("\(source.name): \"\(simulatorTargetBundle)\" must be a string (the app's bundle ID)")
            }
            bundle = name
            members.removeAll { $0.key == simulatorTargetBundle }
        }

        if bundle == nil, !options.hasApsFlags, options.data.isEmpty {
            // Sent exactly as written.
            return BuiltPayload(bytes: source.bytes, bundle: nil, isSimulatorFile: isSimulatorFile, aps: parsed["aps"])
        }
        try apply(options, to: &members)
        let value = JSONValue.object(members)
        return BuiltPayload(bytes: Array(value.jsonText().utf8), bundle: bundle, isSimulatorFile: isSimulatorFile, aps: value["aps"])
    }

    private static func read(_ file: String) throws(SendInputError) -> [UInt8] {
        if file == "-" {
            return Array(FileHandle.standardInput.readDataToEndOfFile())
        }
        return try Array(InputFiles.read(file, what: "payload file"))
    }

    /// `--data` members at the top level, then the `aps` flags into `aps`.
    private static func apply(_ options: PayloadOptions, to members: inout [JSONValue.Member]) throws(SendInputError) {
        for text in options.data {
            let parsed: JSONValue
            do {
                parsed = try JSONValue.parse(text)
            } catch {
                throw SendInputError("--data \(text) is not JSON: \(error)")
            }
            guard case .object(let extra) = parsed else {
                throw SendInputError("--data must be a JSON object such as '{\"key\":\"value\"}', not \(article(parsed.kindName))")
            }
            for member in extra {
                set(member.key, member.value, in: &members)
            }
        }
        guard options.hasApsFlags else { return }

        var aps: [JSONValue.Member] = []
        if let existing = members.last(where: { $0.key == "aps" })?.value {
            guard case .object(let current) = existing else {
                throw SendInputError("the payload's \"aps\" is \(article(existing.kindName)), not an object: the payload flags cannot add to it")
            }
            aps = current
        }
        if let alert = options.alert {
            set("alert", .string(alert), in: &aps)
        } else if options.title != nil || options.subtitle != nil || options.body != nil {
            var alert: [JSONValue.Member] = []
            if case .object(let current)? = aps.last(where: { $0.key == "alert" })?.value {
                alert = current
            }
            if let title = options.title { set("title", .string(title), in: &alert) }
            if let subtitle = options.subtitle { set("subtitle", .string(subtitle), in: &alert) }
            if let body = options.body { set("body", .string(body), in: &alert) }
            set("alert", .object(alert), in: &aps)
        }
        if let badge = options.badge { set("badge", .number(String(badge)), in: &aps) }
        if let sound = options.sound { set("sound", .string(sound), in: &aps) }
        if let category = options.category { set("category", .string(category), in: &aps) }
        if let threadID = options.threadID { set("thread-id", .string(threadID), in: &aps) }
        if options.contentAvailable { set("content-available", .number("1"), in: &aps) }
        if options.mutableContent { set("mutable-content", .number("1"), in: &aps) }
        set("aps", .object(aps), in: &members)
    }

    /// Replaces every member named `key` by one with `value`, where the first one was (or last).
    private static func set(_ key: String, _ value: JSONValue, in members: inout [JSONValue.Member]) {
        if let index = members.firstIndex(where: { $0.key == key }) {
            members[index].value = value
            var seen = false
            members.removeAll { member in
                guard member.key == key else { return false }
                defer { seen = true }
                return seen
            }
        } else {
            members.append(.init(key: key, value: value))
        }
    }

    private static func article(_ kind: String) -> String {
        ["a", "e", "i", "o", "u"].contains(kind.prefix(1)) ? "an \(kind)" : "a \(kind)"
    }

    /// The push type a payload asks for when `--push-type` is absent: `background` for a payload
    /// whose `aps` has only `content-available: 1` (no alert, badge or sound), else the type whose
    /// topic suffix the topic carries (`.voip` → voip, …), else `alert`.
    static func inferredPushType(topic: String?, aps: JSONValue?) -> String {
        if let topic {
            let suffixed = PushType.allCases
                .filter { !$0.topicSuffix.isEmpty && topic.hasSuffix($0.topicSuffix) }
                .max { $0.topicSuffix.count < $1.topicSuffix.count }
            if let suffixed { return suffixed.rawValue }
        }
        if let aps, aps["content-available"]?.integerValue == 1,
           aps["alert"] == nil, aps["badge"] == nil, aps["sound"] == nil {
            return PushType.background.rawValue
        }
        return PushType.alert.rawValue
    }
}

/// Reading the files `send` is given, with one-line errors that name the file.
enum InputFiles {
    static func read(_ path: String, what: String) throws(SendInputError) -> Data {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw SendInputError("\(what) \(path) does not exist")
        }
        if isDirectory.boolValue {
            throw SendInputError("\(what) \(path) is a directory")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SendInputError("cannot read \(what) \(path) (permission denied?)")
        }
        return data
    }

    static func readText(_ path: String, what: String) throws(SendInputError) -> String {
        let data = try read(path, what: what)
        guard let text = String(data: data, encoding: .utf8) else {
            throw SendInputError("\(what) \(path) is not text (PEM expected)")
        }
        return text
    }
}

