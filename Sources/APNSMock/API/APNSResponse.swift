import APNSMockCore

/// The answer to one device push, in APNs' terms; it writes itself out as an ``HTTP2Response``.
///
/// A success carries the `apns-id` (and in the sandbox an `apns-unique-id`); an error carries the
/// ``Rejection`` its JSON body is built from, never a hand-made body.
struct APNSResponse: Sendable {
    enum RequestID: Sendable, Equatable {
        /// The client's own `apns-id`, echoed byte for byte (clients such as aioapns match
        /// responses to requests by it).
        case echoed(String)
        /// Generated because the request had none (or an invalid one): an uppercase UUID.
        case generated(UUIDValue)

        /// An `apns-id` is generated in uppercase, an `apns-request-id` in lowercase (as Apple
        /// shows each).
        func text(uppercase: Bool = true) -> String {
            switch self {
            case .echoed(let text): text
            case .generated(let value): value.text(uppercase: uppercase)
            }
        }

        var text: String { text() }

        /// Writes the id as the header `name`; a generated one is not HPACK-indexed (it never
        /// repeats), nor is an echoed one (a client sends a new one per request). Its name is
        /// indexed, once per session (``ResponseHeaderBlock``).
        func write(as name: StaticString, uppercase: Bool = true, into fields: inout ResponseFields) {
            switch self {
            case .echoed(let text): fields.add(name, text: text, indexed: false)
            case .generated(let value): fields.add(name, uuid: value, uppercase: uppercase, indexed: false)
            }
        }

        /// The client's id when it is a canonical UUID, else a generated one.
        static func take(_ sent: String?, random: inout FastRandom) -> RequestID {
            if let sent, HeaderSyntax.isCanonicalUUID(sent) { return .echoed(sent) }
            return .generated(UUIDValue.random(using: &random))
        }
    }

    var status: Int
    var apnsID: RequestID
    var uniqueID: UUIDValue?
    var rejection: Rejection?

    static func accepted(apnsID: RequestID, uniqueID: UUIDValue?) -> APNSResponse {
        APNSResponse(status: 200, apnsID: apnsID, uniqueID: uniqueID, rejection: nil)
    }

    static func rejected(_ rejection: Rejection, apnsID: RequestID) -> APNSResponse {
        APNSResponse(status: rejection.status, apnsID: apnsID, uniqueID: nil, rejection: rejection)
    }

    /// The `apns-id` header value as text (for logs and records).
    var apnsIDText: String { apnsID.text }
}

extension APNSResponse: HTTP2Response {
    /// For an error, `{"reason":…}`.
    var body: [UInt8] { rejection.map(ErrorBody.bytes(for:)) ?? [] }

    /// On the wire: `apns-id` always, `apns-unique-id` when there is one, and for an error
    /// `content-type: application/json`. Generated ids never repeat, so their values are not
    /// HPACK-indexed (their names are, once per session: ``ResponseHeaderBlock``).
    func writeFields(into fields: inout ResponseFields) {
        apnsID.write(as: "apns-id", into: &fields)
        if let uniqueID {
            fields.add("apns-unique-id", uuid: uniqueID, uppercase: false, indexed: false)
        }
        if rejection != nil {
            fields.add("content-type", literal: "application/json")
        }
    }
}
