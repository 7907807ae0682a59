import Foundation
import Logging

/// One JSON object per line on standard error, for log collectors:
/// `{"ts":"…","level":"info","label":"apns-mock","message":"…", <metadata>}`.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    private let sink: LogSink

    init(label: String, sink: LogSink = .standardError) {
        self.label = label
        self.sink = sink
    }

    /// The line that reports dropped lines, in this format.
    static func dropReport(_ count: Int) -> String {
        let object: [String: Any] = [
            "ts": Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true)),
            "level": "warning", "label": "apns-mock", "dropped": count,
            "message": "log lines dropped: the log's reader did not keep up",
        ]
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return "" }
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var object: [String: Any] = [
            "ts": Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true)),
            "level": event.level.rawValue,
            "label": label,
            "message": "\(event.message)",
        ]
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        for (key, value) in merged where object[key] == nil {
            object[key] = Self.plain(value)
        }
        guard var data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        data.append(UInt8(ascii: "\n"))
        data.withUnsafeBytes { sink.write($0) }
    }

    private static func plain(_ value: Logger.MetadataValue) -> Any {
        switch value {
        case .string(let text): return text
        case .stringConvertible(let convertible): return convertible.description
        case .array(let values): return values.map(plain)
        case .dictionary(let entries): return entries.mapValues(plain)
        }
    }
}
