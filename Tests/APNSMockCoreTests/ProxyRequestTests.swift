import Testing
@testable import APNSMockCore

/// The proxy listener's request: CONNECT to one of Apple's push hosts on its port, nothing else.
@Suite("CONNECT proxy requests")
struct ProxyRequestTests {
    static func judge(_ head: String) -> Result<(target: ProxyRequest.Target, host: String, port: Int), ProxyRequest.Refusal> {
        ProxyRequest.target(head: Array(head.utf8))
    }

    @Test(arguments: [
        ("CONNECT api.push.apple.com:443 HTTP/1.1\r\nHost: api.push.apple.com:443\r\n\r\n", ProxyRequest.Target.apns),
        ("CONNECT API.Sandbox.Push.Apple.com:2197 HTTP/1.1\r\n\r\n", .apns),
        ("CONNECT api.development.push.apple.com:443 HTTP/1.0\r\nProxy-Connection: Keep-Alive\r\n\r\n", .apns),
        ("CONNECT api-broadcast.sandbox.push.apple.com:443 HTTP/1.1\r\n\r\n", .apns),
        ("CONNECT api-manage-broadcast.sandbox.push.apple.com:2195 HTTP/1.1\r\n\r\n", .channelManagement(.sandbox)),
        ("CONNECT api-manage-broadcast.push.apple.com:2196 HTTP/1.1\r\n\r\n", .channelManagement(.production)),
    ])
    func applesHostsOpenATunnel(_ head: String, _ target: ProxyRequest.Target) throws {
        let judged = try Self.judge(head).get()
        #expect(judged.target == target)
    }

    @Test(arguments: [
        ("CONNECT example.com:443 HTTP/1.1\r\n\r\n", 403, "not example.com"),
        ("CONNECT api.push.apple.com:80 HTTP/1.1\r\n\r\n", 403, "not 80"),
        ("CONNECT api-manage-broadcast.push.apple.com:2195 HTTP/1.1\r\n\r\n", 403, "port 2196"),
        ("CONNECT api.push.apple.com.evil.example:443 HTTP/1.1\r\n\r\n", 403, "Apple's push hosts"),
        ("CONNECT 127.0.0.1:2197 HTTP/1.1\r\n\r\n", 403, "Apple's push hosts"),
        ("CONNECT api.push.apple.com HTTP/1.1\r\n\r\n", 400, "host:port"),
        ("CONNECT api.push.apple.com:0 HTTP/1.1\r\n\r\n", 400, "host:port"),
        ("CONNECT api.push.apple.com:99999 HTTP/1.1\r\n\r\n", 400, "host:port"),
        ("CONNECT [::1]:443 HTTP/1.1\r\n\r\n", 400, "host:port"),
        ("CONNECT api.push.apple.com:443\r\n\r\n", 400, "request line"),
        ("CONNECT api push.apple.com:443 HTTP/1.1\r\n\r\n", 400, "request line"),
        ("CONNECT api.push.apple.com:443 HTTP/2\r\n\r\n", 400, "request line"),
        ("CONNECT a/b:443 HTTP/1.1\r\n\r\n", 400, "not a host name"),
        ("GET http://api.push.apple.com/ HTTP/1.1\r\n\r\n", 405, "only CONNECT"),
        ("\r\n\r\n", 400, "request line"),
    ])
    func everythingElseIsRefused(_ head: String, _ status: Int, _ says: String) {
        guard case .failure(let refusal) = Self.judge(head) else {
            Issue.record("\(head) was accepted")
            return
        }
        #expect(refusal.status == status)
        #expect(refusal.message.contains(says), "\(refusal.message)")
    }

    @Test func theHeadEndsAtItsBlankLine() {
        #expect(ProxyRequest.headEnd(Array("CONNECT a:1 HTTP/1.1\r\nHost: a\r\n".utf8)) == nil)
        let head = Array("CONNECT a:1 HTTP/1.1\r\n\r\n\u{16}\u{03}".utf8)
        #expect(ProxyRequest.headEnd(head) == head.count - 2, "bytes after the head (a ClientHello) are the tunnel's")
    }
}
