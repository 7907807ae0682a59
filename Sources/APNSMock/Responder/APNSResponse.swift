import APNSMockCore

/// The answer to one request, before it is put on the wire by the HTTP/2 session.
///
/// Built only by ``Responder``: a success carries the `apns-id` (and in the sandbox an
/// `apns-unique-id`); an error carries the ``Rejection`` its JSON body is built from.
struct APNSResponse: Sendable {
    enum RequestID: Sendable, Equatable {
        /// The client's own `apns-id`, echoed byte for byte (clients such as aioapns match
        /// responses to requests by it).
        case echoed(String)
        /// Generated because the request had none (or an invalid one): an uppercase UUID.
        case generated(UUIDValue)
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
    var apnsIDText: String {
        switch apnsID {
        case .echoed(let text): return text
        case .generated(let value): return value.text(uppercase: true)
        }
    }
}
