import Foundation
import Hummingbird
import NIOCore

/// `GET /`: the live inbox page (docs/admin-api.md, "The inbox page"). One self-contained document
/// (InboxPage.html.swift) that talks to the admin API like any client: `/v1/events` for the
/// records, `/v1/stats`, `/v1/reasons`, `/v1/devices`, `/v1/faults`.
///
/// The page holds no data, so with an admin token it is also what a request without the token
/// gets, with status 401: a browser cannot send `Authorization` when a URL is opened, so the page
/// asks for the token and sends it on every request it makes (the event stream is read with
/// `fetch`, which can send it, rather than `EventSource`, which cannot; no token ever goes in a
/// URL).
enum InboxPage {
    /// The document with a fresh nonce, and headers that keep anything but its own script and
    /// style from running: records are only ever put in with `textContent`, and the policy stops an
    /// injected `<script>` or handler attribute even if one slipped through.
    static func response(status: HTTPResponse.Status) -> Response {
        let nonce = Self.nonce()
        let html = document.replacingOccurrences(of: "__NONCE__", with: nonce)
        return Response(
            status: status,
            headers: [
                .contentType: "text/html; charset=utf-8",
                .contentSecurityPolicy:
                    "default-src 'none'; script-src 'nonce-\(nonce)'; style-src 'nonce-\(nonce)'; connect-src 'self'; "
                    + "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
                .xContentTypeOptions: "nosniff",
                .init("Referrer-Policy")!: "no-referrer",
                .cacheControl: "no-store",
            ],
            body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    /// 128 random bits, base64.
    private static func nonce() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString()
    }
}
