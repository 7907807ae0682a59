import Foundation

/// A TCP port of 127.0.0.1 that refuses connections for as long as this lives: bound, never
/// listening, so no other process can take it meanwhile (a port found free and closed can be).
///
/// `sharable`: bound with SO_REUSEADDR, so that a listener (which sets it too) may still bind the
/// port while this holds it out of the kernel's hands; without it, a listener's bind fails
/// (EADDRINUSE): a port that is taken.
final class RefusingPort: Sendable {
    let port: Int
    private let descriptor: Int32

    init(sharable: Bool = false) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Unprivileged.SetupFailure(description: "socket: \(errno)") }
        if sharable {
            var one: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(descriptor, address, length) == 0 && getsockname(descriptor, address, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            throw Unprivileged.SetupFailure(description: "bind: \(errno)")
        }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(descriptor) }
}
