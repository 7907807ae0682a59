import NIOCore
import Synchronization

/// What a running mock's services tell each other: every listener as bound, a listener that could
/// not bind, whether shutting down began, and when draining must end. One per running mock.
///
/// The services start at once, as peers in one service group. The CONNECT proxy waits here for
/// the TLS listeners it tunnels to; ``APNSMockServer/start()`` and the `serve` command's listening
/// line wait for every listener. Waiters are few (the proxy and a starter), so they are a list.
final class ListenerBoard: Sendable {
    /// The listeners a configuration asks for, in start order (the proxy last, when configured);
    /// a listener reports itself by its index here.
    let expected: [ListenerAddress]
    private let gracePeriod: TimeAmount
    private let state = Mutex(State())
    private let onListening: (@Sendable (ListenerPorts) -> Void)?

    private struct State {
        /// By index in ``expected``, with the bound port.
        var bound: [Int: ListenerAddress] = [:]
        var adminPort: Int?
        var failed = false
        var stopping = false
        /// When the connections' drain ends, set by the first listener to stop.
        var drainDeadline: NIODeadline?
        var announced = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Each bound TLS listener's way to start its drain (GOAWAY to its connections), by index.
        var drains: [Int: @Sendable () -> Void] = [:]
        var draining = false
    }

    init(expected: [ListenerAddress], gracePeriod: TimeAmount, onListening: (@Sendable (ListenerPorts) -> Void)?) {
        self.expected = expected
        self.gracePeriod = gracePeriod
        self.onListening = onListening
    }

    // MARK: Told by the services

    /// Listener `index` of ``expected`` is bound, at `port` (the chosen one for port 0).
    func bound(_ index: Int, port: Int) {
        var address = expected[index]
        address.port = port
        update { $0.bound[index] = address }
    }

    /// The admin listener is bound.
    func adminBound(port: Int) {
        update { $0.adminPort = port }
    }

    /// A listener could not bind: waiters stop waiting (the service group shuts the others down).
    func failed() {
        update { $0.failed = true }
    }

    /// Shutting down began: health says so, and waiters stop waiting.
    func stopping() {
        update { $0.stopping = true }
    }

    /// Registers how listener `index` starts its drain. Called once it is bound; if draining began
    /// already, it starts at once.
    func onDrain(_ index: Int, _ start: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.draining { return true }
            state.drains[index] = start
            return false
        }
        if now { start() }
    }

    /// Forgets listener `index`'s drain (it stopped), so that nothing keeps its quiescing helper.
    func forgetDrain(_ index: Int) {
        _ = state.withLock { $0.drains.removeValue(forKey: index) }
    }

    /// Starts every TLS listener's drain at once: the first listener the service group stops calls
    /// it, so that none keeps accepting while the others drain. Later calls do nothing.
    func drainAll() {
        let starts = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.draining else { return [] }
            state.draining = true
            defer { state.drains.removeAll() }
            return Array(state.drains.values)
        }
        for start in starts { start() }
    }

    /// When the listeners' drain ends: the grace period from the first listener that asks, so that
    /// listeners stopping one after the other share one grace period.
    func drainDeadline() -> NIODeadline {
        state.withLock { state in
            let end = state.drainDeadline ?? .now() + gracePeriod
            state.drainDeadline = end
            return end
        }
    }

    // MARK: Read by the services and the admin API

    /// Every bound port by listener (0 for a TLS listener not bound yet).
    var ports: ListenerPorts {
        state.withLock { Self.ports(of: $0, expected: expected) }
    }

    /// Every TLS and proxy listener bound so far, in start order.
    var listeners: [ListenerAddress] {
        state.withLock { state in expected.indices.compactMap { state.bound[$0] } }
    }

    /// What `GET /v1/health` reports.
    var health: ListenerHealth {
        state.withLock { state in
            let ports = Self.ports(of: state, expected: expected)
            if state.stopping { return .stopping(ports) }
            return Self.isComplete(state, expected: expected) ? .ok(ports) : .starting(ports)
        }
    }

    /// Waits until every TLS listener is bound (true), or until one failed or shutting down began
    /// (false).
    func waitForTLSListeners() async -> Bool {
        await wait { [expected] state in
            expected.indices.allSatisfy { expected[$0].kind == .proxy || state.bound[$0] != nil }
        }
    }

    /// Waits until every listener, the admin one included, is bound (true), or until one failed or
    /// shutting down began (false).
    func waitForAll() async -> Bool {
        await wait { [expected] state in Self.isComplete(state, expected: expected) }
    }

    // MARK: Internals

    private func wait(until ready: @escaping @Sendable (State) -> Bool) async -> Bool {
        while true {
            let settled: Bool? = state.withLock { state in
                if ready(state) { return true }
                return state.failed || state.stopping ? false : nil
            }
            if let settled { return settled }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if ready(state) || state.failed || state.stopping { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        }
    }

    private func update(_ change: (inout State) -> Void) {
        let (woken, announce) = state.withLock { state -> ([CheckedContinuation<Void, Never>], ListenerPorts?) in
            change(&state)
            let woken = state.waiters
            state.waiters.removeAll()
            var announce: ListenerPorts?
            if !state.announced, !state.failed, !state.stopping, Self.isComplete(state, expected: expected) {
                state.announced = true
                announce = Self.ports(of: state, expected: expected)
            }
            return (woken, announce)
        }
        for continuation in woken { continuation.resume() }
        if let announce { onListening?(announce) }
    }

    private static func isComplete(_ state: State, expected: [ListenerAddress]) -> Bool {
        state.bound.count == expected.count && state.adminPort != nil
    }

    private static func ports(of state: State, expected: [ListenerAddress]) -> ListenerPorts {
        let bound = expected.indices.compactMap { state.bound[$0] }
        func port(_ kind: ListenerAddress.Kind) -> Int? { bound.first { $0.kind == kind }?.port }
        return ListenerPorts(
            apns: port(.apns) ?? 0, apnsAdditional: bound.filter { $0.kind == .apnsAdditional }.map(\.port),
            broadcastSandbox: port(.channelManagement(.sandbox)) ?? 0,
            broadcastProduction: port(.channelManagement(.production)) ?? 0, admin: state.adminPort,
            proxy: port(.proxy))
    }
}
