import APNSMockCore
import ArgumentParser
import Foundation
import Logging

// What every `apns-mock` command shares: logging options and set-up, the command's own output,
// key IDs.

/// Options every command that logs shares.
public struct LoggingOptions: ParsableArguments {
    public init() {}

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default info; APNS_MOCK_LOG_LEVEL).")
    public var logLevel: Logger.Level?

    @Option(help: "Log format: text or json (default text; APNS_MOCK_LOG_FORMAT).")
    public var logFormat: LogFormat?

    /// Starts swift-log with the options, or else the environment's `APNS_MOCK_LOG_LEVEL` and
    /// `APNS_MOCK_LOG_FORMAT` (a bad value there is ignored here: `serve` reports it).
    public func bootstrap(environment: EnvironmentVariables? = nil) -> Logger {
        let level = logLevel ?? (try? environment?.oneOf("APNS_MOCK_LOG_LEVEL", Logger.Level.self)) ?? .info
        let format = logFormat ?? (try? environment?.oneOf("APNS_MOCK_LOG_FORMAT", LogFormat.self)) ?? .text
        return Self.bootstrap(level: level, format: format)
    }

    /// Logs go to standard error through ``LogSink/standardError``: never written on the thread
    /// that logs, so a reader that does not keep up costs dropped lines, not stalled answers.
    public static func bootstrap(level: Logger.Level, format: LogFormat) -> Logger {
        switch format {
        case .text:
            LogSink.standardError.setReportFormat { count in
                "\(TextLogHandler.timestamp()) warning apns-mock: dropped=\(count) log lines dropped: the log's reader did not keep up\n"
            }
        case .json:
            LogSink.standardError.setReportFormat(JSONLogHandler.dropReport)
        }
        // A command that ends (an error at start-up, exit codes) writes what it logged first.
        atexit { LogSink.standardError.flush() }
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler
            switch format {
            case .text: handler = TextLogHandler(label: label)
            case .json: handler = JSONLogHandler(label: label)
            }
            handler.logLevel = level
            return handler
        }
        return Logger(label: "apns-mock")
    }
}

public enum LogFormat: String, ExpressibleByArgument, CaseIterable, Sendable {
    case text
    case json
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// Writes the command's own output (the listening line, the banner) to standard output, flushed
/// at once so that scripts waiting for a line see it. Logs go through swift-log to stderr.
public enum Console {
    public static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }
}

/// Key IDs: a random one for a new key, or the one a file named as Apple names downloaded keys
/// (`AuthKey_<KEYID>.p8`) carries.
public enum KeyIDs {
    public static func random() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return String((0..<10).map { _ in alphabet.randomElement()! })
    }

    public static func fromFileName(_ path: String) -> String? {
        let name = (path as NSString).lastPathComponent
        guard name.hasPrefix("AuthKey_"), name.hasSuffix(".p8") else { return nil }
        let id = name.dropFirst("AuthKey_".count).dropLast(".p8".count)
        return id.isEmpty ? nil : String(id)
    }
}
