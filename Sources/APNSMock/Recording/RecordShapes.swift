import APNSMockCore

/// The shapes of a connection's last records, shared by the records that repeat them: a load of
/// requests that differ only in their ids stores one shape, not one per record. Kept per
/// connection in its ``ConnectionMemo``, so sharing needs no lock.
struct RecordShapes {
    /// The shape of the connection's last device-push record; and of its last broadcast-side one
    /// (kept apart: the same headers mean other things).
    private var deviceShape: RequestShape?
    private var broadcastSideShape: RequestShape?
    /// The broadcast-side details of its last broadcast-side record.
    private var details: RawRecord.BroadcastDetails?

    /// The last device-push record's shape if `request` fits it, else a new one (kept for the next
    /// record). `interpreted` runs only when a new shape is made. `lint` is the accepted push's: one
    /// finding depends on the channels that exist, not on the request alone, so it is compared.
    mutating func device(
        for request: borrowing PushRequest, accepted: Bool, lint: [LintFinding]?,
        interpreted: () -> RawRecord.Interpreted?, environment: APNSEnvironment, auth: AuthSummary, connectionID: UInt64
    ) -> RequestShape {
        Self.share(
            &deviceShape, for: request, accepted: accepted, fits: { $0.interpreted?.lint == lint },
            interpreted: interpreted, environment: environment, auth: auth, connectionID: connectionID)
    }

    /// The same for broadcast-side records, kept apart from device pushes' (the same headers mean
    /// other things). The app of a broadcast is in `:path`, which a shape leaves to each record, so
    /// a shape whose interpreted topic is another app's does not fit; nor does one whose lint
    /// differs (it depends on the channels that exist).
    mutating func broadcastSide(
        for request: borrowing PushRequest, interpreted: RawRecord.Interpreted?, environment: APNSEnvironment,
        auth: AuthSummary, connectionID: UInt64
    ) -> RequestShape {
        Self.share(
            &broadcastSideShape, for: request, accepted: interpreted != nil,
            fits: { $0.interpreted?.topic == interpreted?.topic && $0.interpreted?.lint == interpreted?.lint },
            interpreted: { interpreted }, environment: environment, auth: auth, connectionID: connectionID)
    }

    /// The shape in `cached` if `request` matches it and `fits` accepts what it interprets beyond
    /// the request, else a new one, kept in `cached` for the next record.
    private static func share(
        _ cached: inout RequestShape?, for request: borrowing PushRequest, accepted: Bool,
        fits: (RequestShape) -> Bool, interpreted: () -> RawRecord.Interpreted?, environment: APNSEnvironment,
        auth: AuthSummary, connectionID: UInt64
    ) -> RequestShape {
        if let shape = cached, fits(shape),
           shape.matches(request, accepted: accepted, environment: environment, auth: auth) {
            return shape
        }
        let shape = RequestShape(
            copy request, interpreted: interpreted(), environment: environment, auth: auth, connectionID: connectionID)
        cached = shape
        return shape
    }

    /// The last broadcast-side record's details when they are the same, else new ones (kept for
    /// the next record): a load of broadcasts on one channel allocates them once.
    mutating func broadcastDetails(
        kind: RecordKind, bundleID: String?, channelID: String?, operation: ChannelOperation?
    ) -> RawRecord.BroadcastDetails {
        if let last = details, last.kind == kind, last.bundleID == bundleID, last.channelID == channelID,
           last.operation == operation {
            return last
        }
        let details = RawRecord.BroadcastDetails(kind: kind, bundleID: bundleID, channelID: channelID, operation: operation)
        self.details = details
        return details
    }
}
