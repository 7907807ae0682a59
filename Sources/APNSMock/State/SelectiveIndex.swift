/// A key of a ``SelectiveIndex``: the value of one field (an enum case with that value), and
/// `field`, which field it is (the case without the value).
protocol SelectiveIndexKey: Hashable {
    /// The fields, numbered from 0: an enum of plain cases with `Int` raw values.
    associatedtype Field: RawRepresentable<Int>
    var field: Field { get }
}

/// Values filed under the most selective field they name, so that a lookup compares only the values
/// filed under its own keys instead of every value: what the fault rules and the record
/// subscriptions are kept in.
///
/// A user picks the key a value is filed under (the first field it names, in the user's order of
/// selectivity) and the keys a request or record may have values under, and asks only for the
/// fields ``holds(_:)`` says hold any, so that it works out none of the keys nothing is filed
/// under. Under each key the ids are kept ascending; values stay apart from those lists, so that
/// changing a value while walking a list (``modify(_:_:)``) copies no list.
struct SelectiveIndex<Key: SelectiveIndexKey, ID: Hashable & Comparable, Value> {
    private struct Filed {
        let key: Key
        var value: Value

        mutating func modify(_ body: (inout Value) -> Void) { body(&value) }
    }

    /// The ids filed under each key, ascending; a key with none is absent.
    private var idsByKey: [Key: [ID]] = [:]
    private var filed: [ID: Filed] = [:]
    /// How many values are filed under keys of each field, by the field's raw value.
    private var countByField: [Int] = []

    var isEmpty: Bool { filed.isEmpty }
    var count: Int { filed.count }

    /// Every id with its value, in no particular order.
    var elements: some Collection<(id: ID, value: Value)> {
        filed.lazy.map { (id: $0.key, value: $0.value.value) }
    }

    /// The value filed as `id`.
    subscript(id: ID) -> Value? { filed[id]?.value }

    /// Whether any value is filed under a key of `field`.
    func holds(_ field: Key.Field) -> Bool {
        countByField.indices.contains(field.rawValue) && countByField[field.rawValue] > 0
    }

    /// The ids filed under `key`, ascending.
    func ids(under key: Key) -> ArraySlice<ID> {
        idsByKey[key]?[...] ?? []
    }

    /// Files `value` as `id` under `key`, in place of anything filed as `id` before.
    mutating func insert(_ value: Value, id: ID, under key: Key) {
        remove(id)
        filed[id] = Filed(key: key, value: value)
        idsByKey[key, default: []].insertAscending(id)
        let field = key.field.rawValue
        if countByField.count <= field {
            countByField.append(contentsOf: repeatElement(0, count: field + 1 - countByField.count))
        }
        countByField[field] += 1
    }

    /// Changes the value filed as `id` in place (it stays under its key); false when nothing is
    /// filed as `id`.
    @discardableResult
    mutating func modify(_ id: ID, _ body: (inout Value) -> Void) -> Bool {
        filed[id]?.modify(body) != nil
    }

    /// Removes what is filed as `id` and returns its value; nil when nothing is.
    @discardableResult
    mutating func remove(_ id: ID) -> Value? {
        guard let removed = filed.removeValue(forKey: id) else { return nil }
        idsByKey[removed.key]?.removeAscending(id)
        if idsByKey[removed.key]?.isEmpty == true { idsByKey[removed.key] = nil }
        countByField[removed.key.field.rawValue] -= 1
        return removed.value
    }
}

extension Array where Element: Comparable {
    /// The first position whose element is not less than `element`, in an ascending array.
    fileprivate func lowerBound(of element: Element) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = low + (high - low) / 2
            if self[middle] < element { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Inserts `element` where it keeps the array ascending (at the end, without a search, when it
    /// is the largest: ids that grow, such as rule numbers).
    fileprivate mutating func insertAscending(_ element: Element) {
        if let last, last < element {
            append(element)
        } else {
            insert(element, at: lowerBound(of: element))
        }
    }

    fileprivate mutating func removeAscending(_ element: Element) {
        let position = lowerBound(of: element)
        if position < count, self[position] == element { remove(at: position) }
    }
}
