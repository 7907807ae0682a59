/// RFC 3339 timestamps (`2026-01-01T00:00:00Z`) to and from milliseconds since the UNIX epoch.
///
/// The configuration and the admin API write times this way, while APNs' 410 body wants
/// milliseconds. The conversion is plain calendar arithmetic (proleptic Gregorian, UTC), written
/// out so that it does not depend on a formatter's locale or on which Foundation the platform has.
public enum Timestamp {
    /// Milliseconds since the epoch for `text`, or `nil` unless it is a full RFC 3339 date-time:
    /// `YYYY-MM-DDTHH:MM:SS`, optional fraction (digits past milliseconds are dropped), then `Z` or a
    /// `±HH:MM` offset. `T`/`Z` may be lowercase, and a space may stand for `T`, as RFC 3339 allows.
    public static func milliseconds(rfc3339 text: String) -> Int64? {
        var reader = DigitReader(bytes: Array(text.utf8))
        guard let year = reader.number(digits: 4), reader.skip("-"),
              let month = reader.number(digits: 2), reader.skip("-"),
              let day = reader.number(digits: 2),
              reader.skip("T") || reader.skip("t") || reader.skip(" "),
              let hour = reader.number(digits: 2), reader.skip(":"),
              let minute = reader.number(digits: 2), reader.skip(":"),
              let second = reader.number(digits: 2)
        else { return nil }
        guard (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
              hour < 24, minute < 60, second < 60 else { return nil }

        var millisecond = 0
        if reader.skip(".") {
            var digits = 0
            while let digit = reader.digit() {
                if digits < 3 { millisecond = millisecond * 10 + digit }
                digits += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 3) { millisecond *= 10 }
        }

        var offsetMinutes = 0
        if reader.skip("Z") || reader.skip("z") {
            offsetMinutes = 0
        } else if let sign = reader.sign(), let offsetHour = reader.number(digits: 2), reader.skip(":"),
                  let offsetMinute = reader.number(digits: 2), offsetHour < 24, offsetMinute < 60 {
            offsetMinutes = sign * (offsetHour * 60 + offsetMinute)
        } else {
            return nil
        }
        guard reader.atEnd else { return nil }

        let days = Int64(daysFromCivil(year: year, month: month, day: day))
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetMinutes * 60)
        return seconds * 1000 + Int64(millisecond)
    }

    /// `milliseconds` since the epoch as RFC 3339 in UTC with millisecond precision:
    /// `2026-11-22T10:00:00.123Z`, the form of a record's `receivedAt`.
    public static func rfc3339(milliseconds: Int64) -> String {
        let (seconds, millisecond) = floorDivision(milliseconds, 1000)
        let (days, secondOfDay) = floorDivision(seconds, 86_400)
        let (year, month, day) = civilFromDays(Int(days))
        let hour = Int(secondOfDay / 3600)
        let minute = Int(secondOfDay % 3600 / 60)
        let second = Int(secondOfDay % 60)
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2))"
            + ".\(pad(Int(millisecond), 3))Z"
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let quotient = value / divisor
        let remainder = value % divisor
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    private static func isLeap(_ year: Int) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
    private static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

/// Reads fixed-width decimal fields from ASCII bytes.
private struct DigitReader {
    let bytes: [UInt8]
    var position = 0

    var atEnd: Bool { position == bytes.count }

    mutating func digit() -> Int? {
        guard position < bytes.count, bytes[position].isDecimalDigit else { return nil }
        defer { position += 1 }
        return Int(bytes[position] - UInt8(ascii: "0"))
    }

    mutating func number(digits: Int) -> Int? {
        var value = 0
        for _ in 0..<digits {
            guard let digit = digit() else { return nil }
            value = value * 10 + digit
        }
        return value
    }

    mutating func skip(_ character: Unicode.Scalar) -> Bool {
        guard position < bytes.count, bytes[position] == UInt8(ascii: character) else { return false }
        position += 1
        return true
    }

    mutating func sign() -> Int? {
        if skip("+") { return 1 }
        if skip("-") { return -1 }
        return nil
    }
}
