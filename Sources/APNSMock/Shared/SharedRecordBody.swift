import APNSMockCore
import Foundation
import NIOCore

/// A record as the shared state stores it (`apns_mock_records.body`, bytes): everything a
/// ``RawRecord`` holds, so that every replica's mirror rebuilds the same record and renders,
/// filters and counts it as the replica that answered did.
///
/// Two parts: the record's own fields (ids, status, times: a few dozen bytes), then its
/// ``RequestShape`` (headers, payload, interpreted values, credentials), which a connection's
/// records share. The writer (``SharedRecordEncoder``) encodes a shape once and copies its bytes
/// while the next record shares it; the mirror (``SharedRecordDecoder``) compares a record's shape
/// bytes with the last ones and then hands out the same ``RequestShape``: a load test's millionth
/// identical push costs a copy and a comparison of its shape's bytes, and the mirror's ring holds
/// one shape for them as the ring of the replica that answered does.
///
/// A JSON form (``Codable``) cost 9 µs of CPU per record written and read back; this one a
/// fraction of it (docs/performance.md).
enum SharedRecordBody {
    /// The first byte: the form of what follows.
    static let version: UInt8 = 1

    struct FormatError: Error {}
}

/// Encodes the records of one writer, reusing the bytes of the shapes it encoded last (the
/// connections whose records interleave in the queue).
struct SharedRecordEncoder {
    /// Held, not only identified: a shape freed while its bytes are kept could be followed by
    /// another at its address.
    private var recent: [(shape: RequestShape, bytes: ByteBuffer)] = []
    static let recentShapes = 32

    mutating func encode(_ record: RawRecord, into buffer: inout ByteBuffer) {
        buffer.writeInteger(SharedRecordBody.version)
        buffer.writeInteger(record.receivedAt)
        var flags: UInt16 = 0
        let id = record.apnsID
        let rejection = record.rejection
        if case .echoed = id { flags |= 1 }
        if record.uniqueID != nil { flags |= 2 }
        if record.injected { flags |= 4 }
        if record.responseWritten { flags |= 8 }
        if rejection?.environmentKeySpelling == .observed { flags |= 16 }
        if rejection?.timestamp != nil { flags |= 32 }
        if record.broadcast != nil { flags |= 64 }
        buffer.writeInteger(flags)
        if case .generated(let value) = id {
            buffer.writeInteger(value.high)
            buffer.writeInteger(value.low)
        } else {
            buffer.writeInteger(UInt64(0))
            buffer.writeInteger(UInt64(0))
        }
        buffer.writeInteger(record.uniqueID?.high ?? 0)
        buffer.writeInteger(record.uniqueID?.low ?? 0)
        buffer.writeInteger(UInt16(clamping: record.status ?? 0))
        buffer.writeShort(rejection?.reason.rawValue)
        buffer.writeInteger(rejection?.timestamp ?? 0)
        buffer.writeShort(record.action?.rawValue)
        buffer.writeInteger(record.streamID)
        buffer.writeInteger(Int64(record.clockOffset))
        buffer.writeOptionalLong(record.path)
        buffer.writeOptionalLong(record.apnsIDHeader)
        if let details = record.broadcast {
            buffer.writeShort(details.kind.rawValue)
            buffer.writeOptionalLong(details.bundleID)
            buffer.writeOptionalLong(details.channelID)
            buffer.writeShort(details.operation?.rawValue)
        }
        let shapeBytes: ByteBuffer
        if let known = recent.firstIndex(where: { $0.shape === record.shape }) {
            shapeBytes = recent[known].bytes
        } else {
            var bytes = ByteBuffer()
            Self.encode(record.shape, into: &bytes)
            if recent.count == Self.recentShapes { recent.removeFirst() }
            recent.append((record.shape, bytes))
            shapeBytes = bytes
        }
        buffer.writeInteger(UInt32(shapeBytes.readableBytes))
        buffer.writeImmutableBuffer(shapeBytes)
    }

    private static func encode(_ shape: RequestShape, into buffer: inout ByteBuffer) {
        let request = shape.request
        var present: UInt16 = 0
        for header in KnownHeader.allCases where request[header] != nil { present |= 1 << header.rawValue }
        buffer.writeInteger(present)
        for header in KnownHeader.allCases {
            if let value = request[header] { buffer.writeLong(value) }
        }
        buffer.writeInteger(UInt16(clamping: request.otherHeaders.count))
        for (name, value) in request.otherHeaders.prefix(Int(UInt16.max)) {
            buffer.writeLong(name)
            buffer.writeLong(value)
        }
        buffer.writeOptionalLong(request.duplicatedHeader)
        buffer.writeInteger(UInt32(request.body.count))
        buffer.writeBytes(request.body)
        buffer.writeInteger(Int64(request.bodyLength))
        buffer.writeShort(shape.environment.rawValue)
        buffer.writeInteger(shape.connectionID)
        if let interpreted = shape.interpreted {
            buffer.writeInteger(UInt8(1))
            buffer.writeInteger(Int64(interpreted.priority))
            buffer.writeInteger(UInt8(interpreted.expiration == nil ? 0 : 1))
            buffer.writeInteger(interpreted.expiration ?? 0)
            buffer.writeShort(interpreted.pushType.rawValue)
            buffer.writeLong(interpreted.topic)
            buffer.writeInteger(UInt16(clamping: interpreted.lint.count))
            for finding in interpreted.lint.prefix(Int(UInt16.max)) {
                buffer.writeShort(finding.code.rawValue)
                buffer.writeLong(finding.message)
            }
        } else {
            buffer.writeInteger(UInt8(0))
        }
        // The credentials' summary has many optional fields; JSON keeps its form in one place
        // (its Codable), once per shape.
        let auth = (try? JSONEncoder().encode(shape.auth)) ?? Data("{}".utf8)
        buffer.writeInteger(UInt32(auth.count))
        buffer.writeBytes(auth)
    }
}

/// Decodes the records the mirror reads, handing out a recent shape again when a record repeats
/// its bytes.
struct SharedRecordDecoder {
    private var recent: [(bytes: ByteBuffer, shape: RequestShape)] = []

    mutating func decode(_ bytes: ByteBuffer, seq: UInt64) throws -> RawRecord {
        var buffer = bytes
        guard buffer.readInteger(as: UInt8.self) == SharedRecordBody.version,
              let receivedAt = buffer.readInteger(as: Int64.self),
              let flags = buffer.readInteger(as: UInt16.self),
              let idHigh = buffer.readInteger(as: UInt64.self), let idLow = buffer.readInteger(as: UInt64.self),
              let uniqueHigh = buffer.readInteger(as: UInt64.self), let uniqueLow = buffer.readInteger(as: UInt64.self),
              let status = buffer.readInteger(as: UInt16.self)
        else { throw SharedRecordBody.FormatError() }
        let reason = try buffer.readShort()
        guard let timestamp = buffer.readInteger(as: Int64.self) else { throw SharedRecordBody.FormatError() }
        let action = try buffer.readShort()
        guard let streamID = buffer.readInteger(as: Int32.self), let clockOffset = buffer.readInteger(as: Int64.self)
        else { throw SharedRecordBody.FormatError() }
        let path = try buffer.readOptionalLong()
        let apnsIDHeader = try buffer.readOptionalLong()
        var details: RawRecord.BroadcastDetails?
        if flags & 64 != 0 {
            let kind = try buffer.readShort().flatMap(RecordKind.init(rawValue:)) ?? .broadcast
            let bundleID = try buffer.readOptionalLong(), channelID = try buffer.readOptionalLong()
            let operation = try buffer.readShort().flatMap(ChannelOperation.init(rawValue:))
            details = RawRecord.BroadcastDetails(kind: kind, bundleID: bundleID, channelID: channelID, operation: operation)
        }
        guard let shapeLength = buffer.readInteger(as: UInt32.self), let shapeBytes = buffer.readSlice(length: Int(shapeLength))
        else { throw SharedRecordBody.FormatError() }
        let shape: RequestShape
        if let known = recent.firstIndex(where: { $0.bytes == shapeBytes }) {
            shape = recent[known].shape
        } else {
            shape = try Self.decodeShape(shapeBytes)
            if recent.count == SharedRecordEncoder.recentShapes { recent.removeFirst() }
            // A copy of its own: the slice would keep the whole page's bytes alive.
            recent.append((ByteBuffer(buffer: shapeBytes), shape))
        }
        let id: APNSResponse.RequestID = flags & 1 != 0
            ? .echoed((details == nil ? apnsIDHeader : shape.request.requestID) ?? "")
            : .generated(UUIDValue(high: idHigh, low: idLow))
        let rejection = reason.flatMap(Reason.init(rawValue:)).map {
            Rejection($0, timestamp: flags & 32 != 0 ? timestamp : nil, spelling: flags & 16 != 0 ? .observed : .documented)
        }
        return RawRecord(
            seq: seq, receivedAt: receivedAt, shape: shape, path: path, apnsIDHeader: apnsIDHeader, apnsID: id,
            uniqueID: flags & 2 != 0 ? UUIDValue(high: uniqueHigh, low: uniqueLow) : nil,
            status: status == 0 ? nil : Int(status), rejection: rejection, injected: flags & 4 != 0,
            action: action.flatMap(FaultRule.Action.Name.init(rawValue:)), streamID: streamID, broadcast: details,
            responseWritten: flags & 8 != 0, clockOffset: clockOffset)
    }

    private static func decodeShape(_ bytes: ByteBuffer) throws -> RequestShape {
        var buffer = bytes
        var request = PushRequest()
        guard let present = buffer.readInteger(as: UInt16.self) else { throw SharedRecordBody.FormatError() }
        for header in KnownHeader.allCases where present & (1 << header.rawValue) != 0 {
            request[header] = try buffer.readLong()
        }
        guard let otherCount = buffer.readInteger(as: UInt16.self) else { throw SharedRecordBody.FormatError() }
        var others: [(name: String, value: String)] = []
        others.reserveCapacity(Int(otherCount))
        for _ in 0..<otherCount { others.append((name: try buffer.readLong(), value: try buffer.readLong())) }
        request.otherHeaders = others
        request.duplicatedHeader = try buffer.readOptionalLong()
        guard let bodyCount = buffer.readInteger(as: UInt32.self), let body = buffer.readBytes(length: Int(bodyCount)),
              let bodyLength = buffer.readInteger(as: Int64.self)
        else { throw SharedRecordBody.FormatError() }
        request.body = body
        request.bodyLength = Int(bodyLength)
        guard let environment = try buffer.readShort().flatMap(APNSEnvironment.init(rawValue:)),
              let connectionID = buffer.readInteger(as: UInt64.self), let hasInterpreted = buffer.readInteger(as: UInt8.self)
        else { throw SharedRecordBody.FormatError() }
        var interpreted: RawRecord.Interpreted?
        if hasInterpreted == 1 {
            guard let priority = buffer.readInteger(as: Int64.self), let hasExpiration = buffer.readInteger(as: UInt8.self),
                  let expiration = buffer.readInteger(as: Int64.self),
                  let pushType = try buffer.readShort().flatMap(PushType.init(rawValue:))
            else { throw SharedRecordBody.FormatError() }
            let topic = try buffer.readLong()
            guard let lintCount = buffer.readInteger(as: UInt16.self) else { throw SharedRecordBody.FormatError() }
            var lint: [LintFinding] = []
            for _ in 0..<lintCount {
                let code = try buffer.readShort().flatMap(LintFinding.Code.init(rawValue:))
                let message = try buffer.readLong()
                if let code { lint.append(LintFinding(code, message)) }
            }
            interpreted = RawRecord.Interpreted(
                priority: Int(priority), expiration: hasExpiration == 1 ? expiration : nil, pushType: pushType, topic: topic,
                lint: lint)
        }
        guard let authLength = buffer.readInteger(as: UInt32.self), let authBytes = buffer.readBytes(length: Int(authLength))
        else { throw SharedRecordBody.FormatError() }
        let auth = try JSONDecoder().decode(AuthSummary.self, from: Data(authBytes))
        // The shape keeps neither `:path` nor `apns-id`; the record does.
        return RequestShape(request, interpreted: interpreted, environment: environment, auth: auth, connectionID: connectionID)
    }
}

extension ByteBuffer {
    /// A string the mock chose from a small set (a reason, a kind, an enum's raw value), or nil.
    fileprivate mutating func writeShort(_ string: String?) {
        guard let string else {
            writeInteger(UInt16.max)
            return
        }
        writeInteger(UInt16(clamping: min(string.utf8.count, Int(UInt16.max) - 1)))
        writeString(string)
    }

    fileprivate mutating func readShort() throws -> String? {
        guard let length = readInteger(as: UInt16.self) else { throw SharedRecordBody.FormatError() }
        if length == UInt16.max { return nil }
        guard let string = readString(length: Int(length)) else { throw SharedRecordBody.FormatError() }
        return string
    }

    /// A string a client sent, of any length, or nil.
    fileprivate mutating func writeOptionalLong(_ string: String?) {
        writeInteger(UInt8(string == nil ? 0 : 1))
        if let string { writeLong(string) }
    }

    fileprivate mutating func readOptionalLong() throws -> String? {
        guard let present = readInteger(as: UInt8.self) else { throw SharedRecordBody.FormatError() }
        return present == 0 ? nil : try readLong()
    }

    /// A string of any length.
    fileprivate mutating func writeLong(_ string: String) {
        writeInteger(UInt32(string.utf8.count))
        writeString(string)
    }

    fileprivate mutating func readLong() throws -> String {
        guard let length = readInteger(as: UInt32.self), let string = readString(length: Int(length)) else {
            throw SharedRecordBody.FormatError()
        }
        return string
    }
}
