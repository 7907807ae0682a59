import APNSMockCore
import Foundation
import Hummingbird
import NIOCore

// The endpoints behind the inbox page (docs/admin-api.md): the event stream, the reasons table
// and the `.apns` export. The page itself is InboxPage.swift.

extension AdminAPI {
    /// `GET /v1/events`.
    func events(_ request: Request) -> Response {
        var values: [String: String] = [:]
        for (key, value) in request.uri.queryParameters {
            values[String(key)] = String(value)
        }
        var parsed: EventStreamRequest
        switch EventStreamRequest.parse(parameters: values, lastEventID: Self.lastEventID(request)) {
        case .failure(let error): return Self.error(.badRequest, error.message)
        case .success(let value): parsed = value
        }
        switch scope(request, queryTeam: parsed.filter.team) {
        case .failure(let refusal): return refusal.response
        case .success(let scope): parsed.filter.team = scope.space?.teamID
        }
        guard eventStreams.reserve() else {
            return Self.error(
                .serviceUnavailable, "events: \(EventStreams.maximumStreams) event streams are open, the most there may be")
        }
        let streams = eventStreams
        let writer = EventStreamWriter(records: state.records, validator: validator, request: parsed)
        return Response(
            status: .ok,
            headers: [
                .contentType: "text/event-stream; charset=utf-8",
                .cacheControl: "no-cache",
                // nginx and its kin buffer responses unless told not to.
                .init("X-Accel-Buffering")!: "no",
            ],
            body: ResponseBody { body in
                defer { streams.release() }
                try await writer.run(&body)
            })
    }

    /// The `Last-Event-ID` header, which a reconnecting EventSource sends.
    static func lastEventID(_ request: Request) -> String? {
        request.headers.first { $0.name.canonicalName == "last-event-id" }?.value
    }

    /// `GET /v1/reasons`: every reason with its status and one-line explanation.
    func reasons() -> Response {
        Self.json(.ok, ReasonList(reasons: Reason.allCases.map {
            ReasonView(reason: $0.rawValue, status: $0.status, explanation: $0.explanation)
        }))
    }

    /// `GET /v1/notifications/{seq}.apns`: the record's payload as a file for
    /// `xcrun simctl push booted <file>`, with `"Simulator Target Bundle"` set to the topic's
    /// bundle ID.
    func exportAPNS(_ text: String, scope: Scope) -> Response {
        guard let seq = UInt64(text), seq >= 1 else {
            return Self.error(.badRequest, "seq: expected a record's seq, an integer from 1 to \(UInt64.max)")
        }
        guard let record = state.records.record(seq),
              scope.space.map({ record.shape.auth.teamId == $0.teamID }) ?? true
        else {
            return Self.error(.notFound, "seq: no record \(seq) in the ring (not recorded yet, evicted or deleted)")
        }
        let request = record.request
        guard request.body.count == request.bodyLength, let payload = try? JSONValue.parse(request.body),
              case .object(var members) = payload
        else {
            return Self.error(.unprocessableContent, "payload: the payload of record \(seq) is not a JSON object")
        }
        guard let topic = record.topic, !topic.isEmpty else {
            return Self.error(
                .unprocessableContent, "topic: record \(seq) has no apns-topic, so there is no bundle ID for the simulator")
        }
        let bundle = Self.bundleID(topic: topic, pushType: record.pushType)
        members.removeAll { $0.key == APNSFile.targetBundleKey }
        members.append(JSONValue.Member(key: APNSFile.targetBundleKey, value: .string(bundle)))
        var text = APNSFile.pretty(.object(members))
        text.append("\n")
        return Response(
            status: .ok,
            headers: [
                .contentType: "application/json",
                .contentDisposition: "attachment; filename=\"apns-mock-\(seq).apns\"",
            ],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// The app's bundle ID: the topic without its push type's suffix (`.voip`,
    /// `.push-type.liveactivity`…; see ``PushType/topicSuffix``). A record of no known type loses
    /// whichever suffix its topic ends with.
    static func bundleID(topic: String, pushType: String?) -> String {
        if let type = pushType.flatMap(PushType.init(rawValue:)) {
            let suffix = type.topicSuffix
            return !suffix.isEmpty && topic.hasSuffix(suffix) && topic.count > suffix.count
                ? String(topic.dropLast(suffix.count)) : topic
        }
        let suffixes = PushType.allCases.map(\.topicSuffix).filter { !$0.isEmpty }.sorted { $0.count > $1.count }
        for suffix in suffixes where topic.hasSuffix(suffix) && topic.count > suffix.count {
            return String(topic.dropLast(suffix.count))
        }
        return topic
    }
}

/// The `.apns` file simctl reads: the payload as JSON with the target bundle beside `aps`.
enum APNSFile {
    static let targetBundleKey = "Simulator Target Bundle"

    /// `value` as indented JSON, members in the payload's order, numbers as they were written.
    static func pretty(_ value: JSONValue) -> String {
        value.jsonText(pretty: true)
    }
}

/// `GET /v1/reasons`: the reasons APNs sends, for the inbox page's explanations and fault form.
public struct ReasonList: Codable, Sendable {
    public var reasons: [ReasonView]
}

/// One reason: its name, its status and what it means (``Reason/explanation``).
public struct ReasonView: Codable, Sendable, Equatable {
    public var reason: String
    public var status: Int
    public var explanation: String
}
