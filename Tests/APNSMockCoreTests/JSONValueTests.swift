import Testing
@testable import APNSMockCore

@Test func parsesEveryKindOfValue() throws {
    let value = try JSONValue.parse(#" {"s":"a\"b\\c\/\n\u00e9\ud83d\ude00","n":-1.5e2,"i":0,"t":true,"f":false,"z":null,"a":[1,[]],"o":{}} "#)
    #expect(value["s"] == .string("a\"b\\c/\né😀"))
    #expect(value["n"] == .number("-1.5e2"))
    #expect(value["n"]?.doubleValue == -150)
    #expect(value["i"]?.integerValue == 0)
    #expect(value["t"] == .bool(true))
    #expect(value["f"] == .bool(false))
    #expect(value["z"] == .null)
    #expect(value["a"] == .array([.number("1"), .array([])]))
    #expect(value["o"] == .object([]))
}

@Test func keepsDuplicateKeysInOrder() throws {
    let value = try JSONValue.parse(#"{"k":1,"k":2}"#)
    #expect(value.members?.map(\.key) == ["k", "k"])
    #expect(value["k"] == .number("1"))
}

@Test("refuses what is not JSON", arguments: [
    "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{a:1}", "'a'", "01", "1.", ".5", "-", "1e", "tru", "nul",
    "\"\\x\"", "\"\\u12\"", "\"tab\there\"", "{} {}", "NaN", "[1 2]",
])
func refusesInvalidJSON(text: String) {
    #expect(throws: JSONParseError.self) { try JSONValue.parse(text) }
}

@Test func wholeNumbersAreReadByValue() throws {
    #expect(try JSONValue.parse("3.0").integerValue == 3)
    #expect(try JSONValue.parse("3e0").integerValue == 3)
    #expect(try JSONValue.parse("3.5").integerValue == nil)
    #expect(try JSONValue.parse("9223372036854775807").integerValue == Int64.max)
}

@Test func loneSurrogateBecomesReplacementCharacter() throws {
    #expect(try JSONValue.parse(#""\ud800x""#) == .string("\u{FFFD}x"))
}

/// The one JSON writer (`apns-mock send`'s wire payload, the admin API's `.apns` files): members
/// and number literals as parsed, control characters escaped, compact or indented.
@Test func jsonTextWritesBackWhatWasParsed() throws {
    let source = #"{"aps":{"alert":"line\none \"quoted\" \u0001","badge":1.50,"list":[true,null,[]],"empty":{}},"aps":2}"#
    let value = try JSONValue.parse(Array(source.utf8))
    #expect(value.jsonText() == source)
    #expect(try JSONValue.parse(Array(value.jsonText().utf8)) == value)
    #expect(value.jsonText(pretty: true) == """
        {
          "aps": {
            "alert": "line\\none \\"quoted\\" \\u0001",
            "badge": 1.50,
            "list": [
              true,
              null,
              []
            ],
            "empty": {}
          },
          "aps": 2
        }
        """)
}
