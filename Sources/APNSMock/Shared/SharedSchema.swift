import Foundation
import Logging
import PostgresNIO

/// The tables of the shared state (docs/replicas.md), created and migrated by the mock at start,
/// one transaction under an advisory lock so that replicas starting together do it once.
///
/// - `apns_mock_schema`: one row, the schema's version. A database at another version stops
///   start-up, naming both (replicas of two versions must not share one state).
/// - `apns_mock_admin_log`: every admin change, in the order every replica applies it.
/// - `apns_mock_record_counter`: one row, the last record number handed out. Each batch of records
///   takes its numbers from it in the statement that inserts them, so the numbers are dense and
///   become visible in their order (the row's lock orders the batches' commits).
/// - `apns_mock_records`: the shared records, in ``SharedRecordBody``'s form.
/// - `apns_mock_record_marks`: clearings of the records (all, or a team's), each after a record
///   number, applied by every replica's mirror at that point of the records.
/// - `apns_mock_fault_claims`: what is left of a fault rule's `times`, claimed by the replicas.
enum SharedSchema {
    static let version = 1
    /// The advisory lock of migrations; the admin log's appends take ``adminLogLock``.
    static let migrationLock: Int64 = 0x61706E73_0001
    static let adminLogLock: Int64 = 0x61706E73_0002

    struct VersionMismatch: Error, CustomStringConvertible {
        let found: Int
        var description: String {
            "the database has apns-mock's shared-state schema version \(found); this apns-mock uses version \(SharedSchema.version). Replicas of different versions cannot share one state: run one version, or give this one another database"
        }
    }

    /// Creates the tables, or checks their version.
    static func migrate(_ client: PostgresClient, logger: Logger) async throws {
        try await client.withConnection { connection in
            _ = try await connection.query("BEGIN", logger: logger)
            do {
                try await connection.query("SELECT pg_advisory_xact_lock(\(migrationLock))", logger: logger).drain()
                try await connection.query(
                    """
                    CREATE TABLE IF NOT EXISTS apns_mock_schema (
                        only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row), version integer NOT NULL)
                    """, logger: logger
                ).drain()
                var found: Int?
                for try await version in try await connection.query("SELECT version FROM apns_mock_schema", logger: logger)
                    .decode(Int.self)
                {
                    found = version
                }
                if let found {
                    guard found == version else { throw VersionMismatch(found: found) }
                } else {
                    for statement in tables {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger).drain()
                    }
                    try await connection.query("INSERT INTO apns_mock_schema (version) VALUES (\(version))", logger: logger).drain()
                }
                _ = try await connection.query("COMMIT", logger: logger)
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    static let tables = [
        """
        CREATE TABLE apns_mock_admin_log (
            id bigserial PRIMARY KEY, origin text NOT NULL, method text NOT NULL, uri text NOT NULL,
            team text, scope_header text, body text NOT NULL, at timestamptz NOT NULL DEFAULT now())
        """,
        "CREATE INDEX apns_mock_admin_log_team ON apns_mock_admin_log (team)",
        """
        CREATE TABLE apns_mock_record_counter (
            only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row), last bigint NOT NULL)
        """,
        "INSERT INTO apns_mock_record_counter (last) VALUES (0)",
        """
        CREATE TABLE apns_mock_records (
            seq bigint PRIMARY KEY, team text, origin text NOT NULL,
            received_at timestamptz NOT NULL DEFAULT now(), body bytea NOT NULL)
        """,
        "CREATE INDEX apns_mock_records_received_at ON apns_mock_records (received_at)",
        "CREATE TABLE apns_mock_record_marks (id bigserial PRIMARY KEY, after_seq bigint NOT NULL, team text)",
        "CREATE TABLE apns_mock_fault_claims (key text PRIMARY KEY, remaining integer NOT NULL)",
    ]
}

extension PostgresRowSequence {
    /// Reads every row: a query's error surfaces only while its rows are read.
    func drain() async throws {
        for try await _ in self {}
    }
}
