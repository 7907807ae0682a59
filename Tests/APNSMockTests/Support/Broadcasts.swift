import APNSMockCore
import Foundation

/// Request bodies and checks that the broadcast suites share.
enum Broadcasts {
    /// A channel-creation body: message storage policy 1, Live Activity pushes.
    static let createBody = Data(#"{"message-storage-policy":1,"push-type":"LiveActivity"}"#.utf8)

    /// A valid Live Activity `update` broadcast payload.
    static let update = Data(#"{"aps":{"event":"update","timestamp":1700000000,"content-state":{"score":"1-0"}}}"#.utf8)

    /// Whether `text` is a canonical UUID in lower case.
    static func isLowercaseUUID(_ text: String?) -> Bool {
        guard let text else { return false }
        return HeaderSyntax.isCanonicalUUID(text) && text == text.lowercased()
    }
}
