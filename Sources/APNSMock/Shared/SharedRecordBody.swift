import APNSMockCore
import Foundation

/// A record as the shared state stores it (`apns_mock_records.body`, JSON): everything a
/// ``RawRecord`` holds, so that every replica's mirror rebuilds the same record and renders,
/// filters and counts it as the replica that answered the request did. Built by the writer off the
/// request path; the request path stores a ``RawRecord`` as in memory.
struct SharedRecordBody: Codable, Sendable {
    var receivedAt: Int64
    var path: String?
    var apnsIDHeader: String?
    /// The echoed id, when the response echoed the client's (`echoed`), else the generated one's
    /// two halves (`idHigh`, `idLow`).
    var echoed: Bool
    var idHigh: UInt64
    var idLow: UInt64
    var uniqueHigh: UInt64?
    var uniqueLow: UInt64?
    var status: Int?
    var reason: Reason?
    var timestamp: Int64?
    var observedSpelling: Bool?
    var injected: Bool
    var action: FaultRule.Action.Name?
    var streamID: Int32
    var responseWritten: Bool
    var clockOffset: Int64
    // The shape.
    var headers: [String: String]
    var otherHeaders: [[String]]
    var duplicatedHeader: String?
    var body: Data
    var bodyLength: Int
    var interpreted: Interpreted?
    var environment: APNSEnvironment
    var auth: AuthSummary
    var connectionID: UInt64
    var broadcast: Broadcast?

    struct Interpreted: Codable, Sendable {
        var priority: Int
        var expiration: Int64?
        var pushType: PushType
        var topic: String
        var lint: [[String]]
    }

    struct Broadcast: Codable, Sendable {
        var kind: RecordKind
        var bundleID: String?
        var channelID: String?
        var operation: ChannelOperation?
    }

    init(_ record: RawRecord) {
        receivedAt = record.receivedAt
        path = record.path
        apnsIDHeader = record.apnsIDHeader
        switch record.apnsID {
        case .echoed:
            echoed = true
            idHigh = 0
            idLow = 0
        case .generated(let value):
            echoed = false
            idHigh = value.high
            idLow = value.low
        }
        uniqueHigh = record.uniqueID?.high
        uniqueLow = record.uniqueID?.low
        status = record.status
        let rejection = record.rejection
        reason = rejection?.reason
        timestamp = rejection?.timestamp
        observedSpelling = rejection?.environmentKeySpelling == .observed ? true : nil
        injected = record.injected
        action = record.action
        streamID = record.streamID
        responseWritten = record.responseWritten
        clockOffset = Int64(record.clockOffset)
        let request = record.shape.request
        var headers: [String: String] = [:]
        for header in KnownHeader.allCases {
            if let value = request[header] { headers[header.name] = value }
        }
        self.headers = headers
        otherHeaders = request.otherHeaders.map { [$0.name, $0.value] }
        duplicatedHeader = request.duplicatedHeader
        body = Data(request.body)
        bodyLength = request.bodyLength
        interpreted = record.interpreted.map {
            Interpreted(
                priority: $0.priority, expiration: $0.expiration, pushType: $0.pushType, topic: $0.topic,
                lint: $0.lint.map { [$0.code.rawValue, $0.message] })
        }
        environment = record.environment
        auth = record.auth
        connectionID = record.connectionID
        broadcast = record.broadcast.map {
            Broadcast(kind: $0.kind, bundleID: $0.bundleID, channelID: $0.channelID, operation: $0.operation)
        }
    }

    /// The record again, numbered `seq` (its place in the shared order).
    func record(seq: UInt64) -> RawRecord {
        var request = PushRequest()
        for header in KnownHeader.allCases {
            if let value = headers[header.name] { request[header] = value }
        }
        request.otherHeaders = otherHeaders.compactMap { $0.count == 2 ? (name: $0[0], value: $0[1]) : nil }
        request.duplicatedHeader = duplicatedHeader
        request.body = [UInt8](body)
        request.bodyLength = bodyLength
        // The shape keeps neither `:path` nor `apns-id` (each record has its own, stored apart).
        let path = self.path, apnsIDHeader = self.apnsIDHeader
        let shape = RequestShape(
            request,
            interpreted: interpreted.map {
                RawRecord.Interpreted(
                    priority: $0.priority, expiration: $0.expiration, pushType: $0.pushType, topic: $0.topic,
                    lint: $0.lint.compactMap { pair in
                        guard pair.count == 2, let code = LintFinding.Code(rawValue: pair[0]) else { return nil }
                        return LintFinding(code, pair[1])
                    })
            },
            environment: environment, auth: auth, connectionID: connectionID)
        let details = broadcast.map {
            RawRecord.BroadcastDetails(kind: $0.kind, bundleID: $0.bundleID, channelID: $0.channelID, operation: $0.operation)
        }
        let id: APNSResponse.RequestID
        if echoed {
            id = .echoed((details == nil ? apnsIDHeader : shape.request.requestID) ?? "")
        } else {
            id = .generated(UUIDValue(high: idHigh, low: idLow))
        }
        let unique = uniqueHigh.flatMap { high in uniqueLow.map { UUIDValue(high: high, low: $0) } }
        return RawRecord(
            seq: seq, receivedAt: receivedAt, shape: shape, path: path, apnsIDHeader: apnsIDHeader, apnsID: id,
            uniqueID: unique, status: status,
            rejection: reason.map { Rejection($0, timestamp: timestamp, spelling: observedSpelling == true ? .observed : .documented) },
            injected: injected, action: action, streamID: streamID, broadcast: details, responseWritten: responseWritten,
            clockOffset: clockOffset)
    }
}
