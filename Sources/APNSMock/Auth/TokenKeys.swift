internal import COpenSSL
import APNSMockCore
import Foundation

/// A configured token-auth key, loaded: what checking a provider token signed with it needs.
final class TokenKey: Sendable {
    let keyID: String
    let teamID: String
    let environment: Configuration.KeyEnvironment
    /// The apps the key may push to (its own topics, or every app of its team).
    let allowedTopics: AllowedTopics
    let publicKey: ECKey
    /// What a request signed with this key records as its `auth`.
    let summary: AuthSummary
    /// The key related to this one, either side naming it (`relatedKeyId`).
    let relatedKeyID: String?
    /// Its team's namespace: what the requests it signs see and count in.
    let space: TeamSpace

    init(team: Configuration.Team, key: Configuration.Key, publicKey: ECKey, space: TeamSpace) {
        self.space = space
        keyID = key.keyId
        relatedKeyID = key.relatedKeyId ?? team.keys.first { $0.relatedKeyId == key.keyId }?.keyId
        teamID = team.teamId
        environment = key.environment
        allowedTopics = team.allowedTopics(for: key)
        self.publicKey = publicKey
        summary = AuthSummary(method: .token, teamId: team.teamId, keyId: key.keyId)
    }
}

/// A key file of the configuration that cannot be used; stops start-up.
public struct TokenKeyError: Error, CustomStringConvertible {
    /// The configuration field, e.g. `teams[0].keys[1].path`.
    public var field: String
    public var file: String
    public var problem: String
    public var description: String { "\(field): \(file): \(problem)" }
}

/// Every configured key, loaded once at start-up (the ``TeamRegistry`` gives each its team's
/// space).
public struct TokenKeys: Sendable {
    /// A key read and checked: its team, its configuration and its public key.
    struct Loaded: Sendable {
        var team: Configuration.Team
        var key: Configuration.Key
        var publicKey: ECKey
    }

    let loaded: [Loaded]

    /// Whether a connection bound to `bound` takes a token of `key`: the same key, or its related
    /// key (Apple's key model of February 2025).
    static func relates(_ bound: TokenKey, _ key: TokenKey) -> Bool {
        bound === key || bound.keyID == key.keyID || bound.relatedKeyID == key.keyID
    }

    /// Reads every key of `teams`, inline or from its file (paths as given: the command resolves
    /// them). A file that is missing or unreadable, or a key that is not P-256 (private `.p8` or
    /// public PEM), throws, naming the configuration field and the file.
    public static func load(_ teams: [Configuration.Team]) throws(TokenKeyError) -> TokenKeys {
        var loadedKeys: [Loaded] = []
        for (teamIndex, team) in teams.enumerated() {
            for (keyIndex, key) in team.keys.enumerated() {
                let field: String
                let file: String
                let pem: String
                if let inline = key.pem {
                    (field, file, pem) = ("teams[\(teamIndex)].keys[\(keyIndex)].pem", "inline PEM", inline)
                } else {
                    (field, file) = ("teams[\(teamIndex)].keys[\(keyIndex)].path", key.path)
                    guard FileManager.default.fileExists(atPath: key.path) else {
                        throw TokenKeyError(
                            field: field, file: key.path,
                            problem: "does not exist (serve creates only keys at their default path, certs/AuthKey_<keyId>.p8; `apns-mock certs init --config FILE` or `apns-mock keys new` creates it)")
                    }
                    do {
                        pem = try String(contentsOfFile: key.path, encoding: .utf8)
                    } catch {
                        throw TokenKeyError(field: field, file: key.path, problem: "cannot read it (\(error.localizedDescription))")
                    }
                }
                let loaded: ECKey
                do {
                    loaded = try ECKey.publicKey(pem: pem)
                } catch {
                    throw TokenKeyError(field: field, file: file, problem: "not a PEM key: \(error)")
                }
                guard loaded.isP256 else {
                    throw TokenKeyError(field: field, file: file, problem: "not a P-256 (ES256) key")
                }
                loadedKeys.append(Loaded(team: team, key: key, publicKey: loaded))
            }
        }
        return TokenKeys(loaded: loadedKeys)
    }

    /// No keys: every provider token is InvalidProviderToken (unknown `kid`).
    public static let empty = TokenKeys(loaded: [])
}
