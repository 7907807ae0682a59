import APNSMockCore
import Foundation
import Hummingbird
import HTTPTypes
import NIOCore

/// Teams (docs/teams.md): `/v1/teams` adds, lists and removes them, and every other call that
/// reads or changes state takes a team (`?team=` or the `APNS-Mock-Team` header) to act on that
/// team's namespace only.
extension AdminAPI {
    /// What an admin call acts on.
    enum Scope {
        /// The whole mock (no team named).
        case all
        case team(TeamSpace)

        var space: TeamSpace? {
            if case .team(let space) = self { return space }
            return nil
        }
    }

    static let teamHeader = HTTPField.Name("APNS-Mock-Team")!

    /// The team a call names, by `?team=` or the header (both: they must agree); `nil` when it
    /// names none. A malformed team ID is 400, one the mock does not have 404.
    func scope(_ request: Request) -> Result<Scope, AdminRefusal> {
        scope(request, queryTeam: request.uri.queryParameters["team"].map(String.init))
    }

    func scope(_ request: Request, queryTeam: String?) -> Result<Scope, AdminRefusal> {
        let header = request.headers[Self.teamHeader]
        if let header, let queryTeam, header != queryTeam {
            return .failure(AdminRefusal(
                .badRequest, "team: the query names \(queryTeam) and the APNS-Mock-Team header \(header); name one team"))
        }
        guard let teamID = queryTeam ?? header else { return .success(.all) }
        return space(named: teamID).map(Scope.team)
    }

    /// The team with this ID, or the refusal naming it.
    func space(named teamID: String) -> Result<TeamSpace, AdminRefusal> {
        guard Configuration.isAppleIdentifier(teamID) else {
            return .failure(AdminRefusal(.badRequest, "team: \"\(teamID)\" is not a team ID: 10 uppercase letters and digits"))
        }
        guard let space = state.teams.space(teamID) else {
            return .failure(AdminRefusal(.notFound, "team: \(teamID) is not a team of this mock (GET /v1/teams lists them)"))
        }
        return .success(space)
    }

    /// Runs `body` with the call's scope, or answers the refusal.
    func scoped(_ request: Request, _ body: (Scope) async throws -> Response) async rethrows -> Response {
        switch scope(request) {
        case .failure(let refusal): return refusal.response
        case .success(let scope): return try await body(scope)
        }
    }

    /// The apps a device or channel may name in `scope` (`nil`: any, under `validation.topicPolicy: any`).
    func knownApps(in scope: Scope) -> Set<String>? {
        if let space = scope.space { return space.apps }
        return checksApps ? state.teams.apps : nil
    }

    // MARK: /v1/teams

    func addTeamRoutes(to router: Router<Context>) {
        let api = self
        router.get("/v1/teams") { _, _ in
            Self.json(.ok, TeamList(teams: api.state.teams.all.map(TeamView.init)))
        }
        router.post("/v1/teams") { request, _ in try await api.addTeam(request) }
        router.delete("/v1/teams/:teamId") { _, context in api.removeTeam(context.parameters.get("teamId") ?? "") }
    }

    func addTeam(_ request: Request) async throws -> Response {
        let body: JSONValue
        switch try await Self.jsonBody(request) {
        case .failure(let error): return Self.error(.badRequest, error.message)
        case .success(let value): body = value
        }
        let registration: (team: Configuration.Team, devices: Configuration.Devices?)
        do {
            registration = try Configuration.Team.decodeRegistration(
                json: body, strictTokens: validator.settings.strictDeviceTokens)
        } catch {
            return Self.error(.badRequest, error.description)
        }
        let keys: TokenKeys
        do {
            keys = try TokenKeys.load([registration.team])
        } catch {
            // "teams[0].keys[1].pem" as the body names it: "keys[1].pem".
            let field = error.field.hasPrefix("teams[0].") ? String(error.field.dropFirst("teams[0].".count)) : error.field
            return Self.error(.badRequest, "\(field): \(error.problem)")
        }
        switch state.teams.add(registration.team, devices: registration.devices, keys: keys) {
        case .success(let space):
            return Self.json(.created, TeamView(space))
        case .failure(.teamExists):
            return Self.error(.conflict, "teamId: team \(registration.team.teamId) exists (DELETE /v1/teams/\(registration.team.teamId) removes it)")
        case .failure(.keyInUse(let keyID, let owner)):
            return Self.error(.conflict, "keys: key \(keyID) is a key of team \(owner)")
        case .failure(.appInUse(let app, let owner)):
            return Self.error(.conflict, "apps: \(app) is an app of team \(owner)")
        case .failure(.limitReached):
            return Self.error(.conflict, "teamId: the mock holds at most \(TeamRegistry.limit) teams; DELETE /v1/teams/{teamId} removes one")
        }
    }

    func removeTeam(_ teamID: String) -> Response {
        switch state.remove(team: teamID) {
        case .success:
            return Response(status: .noContent)
        case .failure(.unknown):
            return Self.error(.notFound, "teamId: \(teamID) is not a team of this mock (GET /v1/teams lists them)")
        case .failure(.configured):
            return Self.error(
                .conflict, "teamId: \(teamID) is configured in the configuration file; POST /v1/reset?team=\(teamID) clears its state")
        }
    }

    // MARK: A team's statistics

    /// `/v1/stats?team=`: the team's counts, as the whole mock's are shown.
    func statistics(of space: TeamSpace) -> Statistics {
        let since = space.counts.sinceReset
        let lifetime = space.counts.lifetime
        let tally = RequestStatistics.Tally(values: since.outcomes, actionValues: since.actions)
        let lifetimeTally = RequestStatistics.Tally(values: lifetime.outcomes, actionValues: lifetime.actions)
        let rates = space.counts.rate.rates(lifetimeTotal: lifetimeTally.total)
        var byCause: [String: Int] = [:]
        for (index, cause) in GoAwayCause.allCases.enumerated() where since.goAways[index] > 0 {
            byCause[cause.rawValue] = since.goAways[index]
        }
        func refused(_ cause: RefusedStreamCause) -> Int { since.refused[cause.index] }
        let connections = space.connections
        let records = state.records
        return Statistics(
            requests: tally.total, accepted: tally.accepted, rejected: tally.total - tally.accepted,
            sinceStart: .init(
                requests: lifetimeTally.total, accepted: lifetimeTally.accepted,
                rejected: lifetimeTally.total - lifetimeTally.accepted),
            byStatus: tally.byStatus, byReason: tally.byReason, byAction: tally.byAction,
            connections: .init(open: connections.open, total: UInt64(max(0, connections.total))),
            requestsPerSecond: rates.perSecond, averageRequestsPerSecond: rates.average,
            recording: .init(
                capacity: records.capacity, records: records.count(team: space.teamID), evictions: records.evictions,
                lastSeq: records.lastSeq),
            refusedStreams: .init(
                total: since.refused.reduce(0, +), beforeAuthentication: refused(.beforeAuthentication),
                overLimit: refused(.overLimit), afterGoAway: refused(.afterGoAway)),
            goaways: .init(total: since.goAways.reduce(0, +), byCause: byCause),
            team: space.teamID, clears: space.counts.clears.value)
    }

    /// The teams' request counters in Prometheus' text format,
    /// `apns_team_requests_total{team,status,reason}` (since start: counters never go down), for
    /// the given teams.
    static func teamMetrics(_ spaces: [TeamSpace]) -> String {
        var lines: [String] = []
        for space in spaces {
            for (index, value) in space.counts.lifetime.outcomes.enumerated() where value > 0 {
                let (status, reason) = RequestStatistics.outcomeLabels[index]
                lines.append("apns_team_requests_total{team=\"\(space.teamID)\",status=\"\(status)\",reason=\"\(reason)\"} \(value)")
            }
        }
        guard !lines.isEmpty else { return "" }
        return "# TYPE apns_team_requests_total counter\n" + lines.joined(separator: "\n") + "\n"
    }

}

/// An admin call refused before it acted: its status and the message naming the field.
struct AdminRefusal: Error {
    var status: HTTPResponse.Status
    var message: String

    init(_ status: HTTPResponse.Status, _ message: String) {
        self.status = status
        self.message = message
    }

    var response: Response { AdminAPI.error(status, message) }
}

extension TeamView {
    init(_ space: TeamSpace) {
        teamId = space.teamID
        apps = space.appList
        keys = space.keys.map { key in
            Key(keyId: key.keyId, environment: key.environment.rawValue, topics: key.topics, relatedKeyId: key.relatedKeyId)
        }
        let own = space.devices.current
        devices = Devices(policy: space.devicePolicy?.rawValue, count: own.entries.count)
        source = space.source.rawValue
    }
}
