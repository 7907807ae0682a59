import Synchronization

extension Atomic where Value == Int {
    /// Adds one unless the count has reached `limit`; whether it did. The count never passes
    /// `limit`, however many threads try at once: the places of a bounded resource (connections,
    /// event streams) are taken with it, and given back with `subtract(1, …)`.
    func increment(below limit: Int) -> Bool {
        var current = load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = compareExchange(
                expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
        return false
    }
}
