@testable import APNSMock
import Testing

/// The index the fault rules and the record subscriptions are filed in: values under a key come
/// out by ascending id, whatever order they were filed in, and each field says whether it holds any.
@Suite("Selective index")
struct SelectiveIndexTests {
    enum Key: SelectiveIndexKey {
        case name(String)
        case size(Int)
        case none

        enum Field: Int { case name, size, none }

        var field: Field {
            switch self {
            case .name: .name
            case .size: .size
            case .none: .none
            }
        }
    }

    @Test func idsUnderAKeyAreAscending() {
        var index = SelectiveIndex<Key, Int, String>()
        for id in [5, 1, 9, 3, 7] { index.insert("v\(id)", id: id, under: .name("a")) }
        index.insert("v4", id: 4, under: .name("b"))
        index.insert("v2", id: 2, under: .size(2))
        #expect(Array(index.ids(under: .name("a"))) == [1, 3, 5, 7, 9])
        #expect(Array(index.ids(under: .name("b"))) == [4])
        #expect(Array(index.ids(under: .size(2))) == [2])
        #expect(index.ids(under: .name("c")).isEmpty)
        #expect(index.ids(under: .none).isEmpty)
        #expect(index.count == 7)
        #expect(index[3] == "v3")
        #expect(index[6] == nil)
        #expect(index.elements.map(\.id).sorted() == [1, 2, 3, 4, 5, 7, 9])
        #expect(index.elements.allSatisfy { $0.value == "v\($0.id)" })
    }

    @Test func fieldsSayWhetherTheyHoldAny() {
        var index = SelectiveIndex<Key, Int, String>()
        #expect(!index.holds(.name) && !index.holds(.size) && !index.holds(.none))
        index.insert("x", id: 1, under: .name("a"))
        index.insert("y", id: 2, under: .name("b"))
        index.insert("z", id: 3, under: .none)
        #expect(index.holds(.name) && !index.holds(.size) && index.holds(.none))
        index.remove(1)
        #expect(index.holds(.name))
        index.remove(2)
        #expect(!index.holds(.name) && index.holds(.none))
    }

    @Test func removeAndRefileKeepTheListsInStep() {
        var index = SelectiveIndex<Key, Int, String>()
        for id in 1...4 { index.insert("v\(id)", id: id, under: .size(1)) }
        #expect(index.remove(3) == "v3")
        #expect(index.remove(3) == nil)
        #expect(Array(index.ids(under: .size(1))) == [1, 2, 4])
        // Filing an id again moves it: it is under its new key only.
        index.insert("w2", id: 2, under: .name("a"))
        #expect(Array(index.ids(under: .size(1))) == [1, 4])
        #expect(Array(index.ids(under: .name("a"))) == [2])
        #expect(index[2] == "w2")
        #expect(index.count == 3)
        // A value changed in place stays under its key.
        #expect(index.modify(4) { $0 += "!" })
        #expect(!index.modify(3) { $0 += "!" })
        #expect(index[4] == "v4!")
        #expect(Array(index.ids(under: .size(1))) == [1, 4])
        for id in [1, 2, 4] { index.remove(id) }
        #expect(index.isEmpty)
        #expect(index.ids(under: .size(1)).isEmpty)
        #expect(!index.holds(.size) && !index.holds(.name))
    }
}
