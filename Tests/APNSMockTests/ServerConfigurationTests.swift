import APNSMockCore
import NIOCore
import Testing

@testable import APNSMock

/// The runtime settings are derived from the one configuration model: no default of their own, and
/// every field a file, a variable or an option sets reaches them.
@Suite struct ServerConfigurationTests {
    @Test func theDefaultsAreTheModelsDefaults() {
        let model = Configuration()
        let runtime = ServerConfiguration()
        #expect(runtime.host == model.server.host && runtime.port == model.server.port)
        #expect(runtime.http2.maxConcurrentStreams == UInt32(model.server.maxConcurrentStreams))
        #expect(runtime.http2.streamsBeforeAuthentication == UInt32(model.server.streamsBeforeAuthentication))
        #expect(runtime.idleTimeout == .seconds(Int64(model.server.idleTimeout)))
        #expect(runtime.requestTimeout == .seconds(Int64(model.server.requestTimeout)))
        #expect(runtime.shutdownGracePeriod == .seconds(Int64(model.server.shutdownGracePeriod)))
        #expect(runtime.maxConnections == Configuration.Server.defaultMaxConnections)
        #expect(runtime.threads == System.coreCount)
        #expect(runtime.recordingCapacity == model.recording.capacity)
        #expect(runtime.admin.port == model.admin.port)
        #expect(runtime.admin.maxConnections == Configuration.Admin.defaultMaxConnections)
        #expect(runtime.admin.idleTimeout == .seconds(Int64(model.admin.idleTimeout)))
        #expect(runtime.faultSeed == nil && runtime.shrinkStreamsAfterRejection == false)
        // The demo team, whose key `serve` creates; an in-process mock sets its own teams.
        #expect(runtime.teams == model.teams && runtime.allowedTopics == model.allowedTopics)
    }

    @Test func everyFileSettingReachesTheRuntime() throws {
        let model = try Configuration.parse(yaml: """
            server:
              port: 0
              threads: 3
              shutdownGracePeriod: 4
              idleTimeout: 0
              maxConcurrentStreams: 500
              streamsBeforeAuthentication: 7
              shrinkStreamsAfterRejection: true
              maxConnections: 99
              handshakeTimeout: 5
            admin: { port: 0, token: t0ken, maxConnections: 12, requestTimeout: 2, responseTimeout: 3, idleTimeout: 4 }
            recording: { capacity: 0 }
            faultSeed: 7
            """, file: "runtime.yaml")
        let runtime = ServerConfiguration(model)
        #expect(runtime.port == 0 && runtime.threads == 3)
        #expect(runtime.shutdownGracePeriod == .seconds(4))
        // 0 is "never": a timer far enough away not to fire.
        #expect(runtime.idleTimeout > .hours(24 * 365))
        #expect(runtime.http2.maxConcurrentStreams == 500 && runtime.http2.streamsBeforeAuthentication == 7)
        #expect(runtime.shrinkStreamsAfterRejection)
        #expect(runtime.maxConnections == 99 && runtime.handshakeTimeout == .seconds(5))
        #expect(runtime.admin.token == "t0ken" && runtime.admin.maxConnections == 12)
        #expect(runtime.admin.requestTimeout == .seconds(2) && runtime.admin.responseTimeout == .seconds(3))
        #expect(runtime.admin.idleTimeout == .seconds(4))
        #expect(runtime.recordingCapacity == 0 && runtime.faultSeed == 7)
    }
}
