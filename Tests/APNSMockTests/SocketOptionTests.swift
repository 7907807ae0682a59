@testable import APNSMock
import APNSMockCore
import APNSMockTesting
import Foundation
import Logging
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The options of the sockets the mock accepts, read back on the server's side, and what happens
/// when an accepted connection cannot be set up.
@Suite("Socket options", .timeLimit(.minutes(2)))
struct SocketOptionTests {
    /// Every listener's accepted sockets have Nagle's algorithm off (TCP_NODELAY, at the TCP level)
    /// and SO_DEBUG off. The option was once set at the socket level, where its number is
    /// SO_DEBUG's: root got SO_DEBUG and Nagle, anyone else lost every connection.
    @Test func acceptedSocketsHaveNoDelayAndNoDebug() async throws {
        try await MockHarness.withRunningMock(configure: { $0.additionalPorts = [0] }) { mock in
            let listeners = [
                ("apns", mock.apnsPort), ("apns additional", try #require(mock.listener.additionalPorts.first)),
                ("channel management, sandbox", mock.channelManagementPort(.sandbox)),
                ("channel management, production", mock.channelManagementPort(.production)),
                ("admin", mock.adminPort),
            ]
            for (name, port) in listeners {
                let client = try await RawClient.connect(port: port, security: .plaintext)
                let peer = try #require(client.localPort)
                let socket = try #require(await Self.acceptedSocket(port: port, peer: peer), "no accepted socket for \(name)")
                #expect(Self.option(socket, level: Int32(IPPROTO_TCP), name: TCP_NODELAY) == 1, "TCP_NODELAY on \(name)")
                #expect(Self.option(socket, level: SOL_SOCKET, name: SO_DEBUG) == 0, "SO_DEBUG on \(name)")
                await client.close()
            }
        }
    }

    /// An accepted connection that cannot be set up (here: a socket option the kernel refuses,
    /// as SO_DEBUG is refused to an unprivileged process) is closed and logged, at most once per
    /// interval with the count, naming the listener and the error.
    @Test func connectionsThatCannotBeSetUpAreLogged() async throws {
        let (logger, store) = CapturingLogHandler.logger()
        let unknownOption = ChannelOptions.Types.SocketOption(level: SocketOptionLevel(SOL_SOCKET), name: 12_345)
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(unknownOption, value: 1)
            .bind(host: "127.0.0.1", port: 0).get()
        let log = try await SetupFailureLog.install(on: server, listener: "test", logger: logger)
        let port = try #require(server.localAddress?.port)
        for _ in 0..<3 {
            let client = try await RawClient.connect(port: port, security: .plaintext)
            let (_, closed, _) = await client.waitForClose(timeout: .seconds(5))
            #expect(closed, "the server kept a connection it could not set up")
        }
        let deadline = ContinuousClock.now + .seconds(5)
        while log.count < 3, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(log.count == 3)
        // The first at once; the rest counted, and reported when the interval ends (which a test
        // slowed down by the whole suite may reach).
        let lines = store.all.filter { $0.contains("could not be set up") }
        #expect(lines.count == 1 || lines.count == 2, "one report per interval: \(lines)")
        if lines.count == 2 { #expect(lines[1].contains("count=2")) }
        let line = try #require(lines.first)
        #expect(line.hasPrefix("warning "))
        #expect(line.contains("listener=test"))
        #expect(line.contains("count=1"))
        #expect(line.contains("error="))
        try await server.close()
    }

    // MARK: helpers

    /// The descriptor of this process's TCP socket from 127.0.0.1:`port` to the peer port `peer`,
    /// once the server has accepted it.
    static func acceptedSocket(port: Int, peer: Int) async -> Int32? {
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            for name in names {
                guard let descriptor = Int32(name) else { continue }
                if Self.port(descriptor, getsockname) == port, Self.port(descriptor, getpeername) == peer {
                    return descriptor
                }
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    private static func port(
        _ descriptor: Int32, _ query: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32
    ) -> Int? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { query(descriptor, $0, &length) }
        }
        guard result == 0, address.sin_family == sa_family_t(AF_INET) else { return nil }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func option(_ descriptor: Int32, level: Int32, name: Int32) -> Int32? {
        var value: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, level, name, &value, &length) == 0 else { return nil }
        return value
    }
}
