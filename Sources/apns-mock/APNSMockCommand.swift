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
        subcommands: [Serve.self, Certs.self, Keys.self, Token.self, Send.self],
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
extension Configuration.TLSScenario: ExpressibleByArgument {}

/// Writes the command's own output (the listening line, the banner) to standard output, flushed
/// at once so that scripts waiting for a line see it. Logs go through swift-log to stderr.
enum Console {
    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }
}

/// Reading `--config` and deriving the certificate material it needs, shared by `serve` and
/// `certs init`.
enum ConfigurationFile {
    /// The parsed file, or the built-in defaults without one. A file that cannot be read or is
    /// invalid is logged (file, field, problem) and ends the command with exit code 2.
    static func load(_ path: String?, logger: Logger) throws -> Configuration {
        guard let path else { return Configuration() }
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            logger.error("cannot read --config \(path): \(error.localizedDescription)")
            throw ExitCode(2)
        }
        do {
            return try Configuration.parse(yaml: text, file: path)
        } catch {
            logger.error("\(error)")
            throw ExitCode(2)
        }
    }

    /// The material for `configuration`: client certificates for every configured app, a `.p8` for
    /// every configured key that has no file yet, in `directory` (default: the directory of the
    /// configured server certificate).
    static func material(for configuration: Configuration, directory: String?, extraHosts: [String] = []) -> TestCertificates {
        let certificateDirectory = (configuration.tls.certificate as NSString).deletingLastPathComponent
        return TestCertificates(
            directory: directory ?? (certificateDirectory.isEmpty ? "." : certificateDirectory),
            extraHosts: extraHosts,
            apps: configuration.teams.flatMap { team in
                team.apps.map { TestCertificates.App(bundleID: $0, teamID: team.teamId) }
            },
            tokenKeys: configuration.teams.flatMap { team in
                team.keys.map { TestCertificates.TokenKey(keyID: $0.keyId, teamID: team.teamId, path: $0.path) }
            })
    }
}
