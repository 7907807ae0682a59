import APNSMock
import APNSMockCore
import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle

@main
struct APNSMockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-mock",
        abstract: "A local imitation of Apple's Push Notification service (HTTP/2 over TLS).",
        subcommands: [Serve.self, Certs.self, Keys.self, Token.self],
        defaultSubcommand: Serve.self)
}

/// Options every command that logs shares.
struct LoggingOptions: ParsableArguments {
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .info

    @Option(help: "Log format: text or json.")
    var logFormat: LogFormat = .text

    func bootstrap() -> Logger {
        let level = logLevel
        let format = logFormat
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler
            switch format {
            case .text: handler = StreamLogHandler.standardError(label: label)
            case .json: handler = JSONLogHandler(label: label)
            }
            handler.logLevel = level
            return handler
        }
        return Logger(label: "apns-mock")
    }
}

enum LogFormat: String, ExpressibleByArgument, CaseIterable {
    case text
    case json
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
extension APNSEnvironment: ExpressibleByArgument {}

/// Writes the command's own output (the listening line, the banner) to standard output, flushed
/// at once so that scripts waiting for a line see it. Logs go through swift-log to stderr.
enum Console {
    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }
}
