import APNSMock
import APNSMockCommandLine
import APNSMockCore
import APNSMockSend
import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
#if canImport(Glibc)
import Glibc
#endif

@main
struct APNSMockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-mock",
        abstract: "A local imitation of Apple's Push Notification service (HTTP/2 over TLS).",
        subcommands: [Serve.self, Certs.self, Keys.self, Token.self, Send.self, Healthcheck.self],
        defaultSubcommand: Serve.self)
}

extension APNSEnvironment: ExpressibleByArgument {}
extension Configuration.TLSScenario: ExpressibleByArgument {}

/// Reading `--config` and deriving the certificate material it needs, shared by `serve` and
/// `certs init`.
enum ConfigurationFile {
    /// The parsed file, or the built-in defaults without one. A file that cannot be read or is
    /// invalid is logged (file, field, problem) and ends the command with exit code 2.
    /// `option` names where the path came from in messages (`--config`, `APNS_MOCK_CONFIG`).
    static func load(_ path: String?, option: String = "--config", logger: Logger) throws -> Configuration {
        guard let path else { return Configuration() }
        if let problem = unreadable(path) {
            logger.error("cannot read \(option) \(path): \(problem)")
            throw ExitCode(2)
        }
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            let problem = (error as NSError).code == NSFileReadInapplicableStringEncodingError
                ? "it is not UTF-8 text" : error.localizedDescription
            logger.error("cannot read \(option) \(path): \(problem)")
            throw ExitCode(2)
        }
        return try parse(text, source: path, logger: logger)
    }

    /// Why `path` cannot be read as a configuration file, or `nil` when it is a regular file this
    /// process may read. Something else at the path is named for what it is: Foundation reports
    /// `/dev/null` or a FIFO as "You don't have permission" and a directory as
    /// "(NSCocoaErrorDomain error 256.)", and reading a FIFO with no writer would never end.
    static func unreadable(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let code = errno
            switch code {
            case ENOENT: return "no such file"
            case ENOTDIR: return "a part of the path is not a directory"
            default: return String(cString: strerror(code))
            }
        }
        let kind: String
        switch info.st_mode & 0o170000 {
        case 0o100000:
            guard access(path, R_OK) == 0 else {
                return "\(String(cString: strerror(errno))): this user (uid \(getuid())) may not read it"
            }
            return nil
        case 0o040000: kind = "a directory"
        case 0o020000: kind = "a character device (as /dev/null is)"
        case 0o060000: kind = "a block device"
        case 0o010000: kind = "a FIFO (named pipe, as a shell's <(…) gives)"
        case 0o140000: kind = "a socket"
        default: kind = "of an unknown kind"
        }
        return "it is \(kind), not a regular file; give the path of a YAML file, or the text itself in APNS_MOCK_CONFIG_YAML"
    }

    /// The configuration as `serve` and `healthcheck` see it: the file (`--config`, else
    /// `APNS_MOCK_CONFIG`, else the text of `APNS_MOCK_CONFIG_YAML`), then the other
    /// `APNS_MOCK_*` variables over it. Any problem is logged, naming the variable, file and
    /// field, and ends the command with exit code 2.
    static func load(_ path: String?, environment: EnvironmentVariables, logger: Logger) throws -> Configuration {
        let filePath = environment["APNS_MOCK_CONFIG"]
        let inline = environment["APNS_MOCK_CONFIG_YAML"]
        if path == nil, filePath != nil, inline != nil {
            logger.error("APNS_MOCK_CONFIG and APNS_MOCK_CONFIG_YAML are both set: give the configuration one way")
            throw ExitCode(2)
        }
        var configuration: Configuration
        if let chosen = path ?? filePath {
            configuration = try load(chosen, option: path != nil ? "--config" : "APNS_MOCK_CONFIG", logger: logger)
        } else if let inline {
            configuration = try parse(inline, source: "APNS_MOCK_CONFIG_YAML", logger: logger)
        } else {
            configuration = Configuration()
        }
        do {
            try environment.apply(to: &configuration)
        } catch {
            logger.error("\(error)")
            throw ExitCode(2)
        }
        return configuration
    }

    private static func parse(_ text: String, source: String, logger: Logger) throws -> Configuration {
        do {
            return try Configuration.parse(yaml: text, file: source)
        } catch {
            logger.error("\(error)")
            throw ExitCode(2)
        }
    }

    /// The `APNS_MOCK_*` variables of this process; an unknown name or a bad value of the command's
    /// own is logged and ends the command with exit code 2.
    static func environment(logger: Logger) throws -> EnvironmentVariables {
        do {
            let variables = try EnvironmentVariables(ProcessInfo.processInfo.environment)
            _ = try variables.oneOf("APNS_MOCK_LOG_LEVEL", Logger.Level.self)
            _ = try variables.oneOf("APNS_MOCK_LOG_FORMAT", LogFormat.self)
            return variables
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
            // Inline keys (`pem`) have no file to create.
            tokenKeys: configuration.teams.flatMap { team in
                team.keys.filter { $0.pem == nil }.map { TestCertificates.TokenKey(keyID: $0.keyId, teamID: team.teamId, path: $0.path) }
            })
    }
}
