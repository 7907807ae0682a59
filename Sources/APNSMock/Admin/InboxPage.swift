import Foundation
import Hummingbird
import NIOCore

/// `GET /`: the live inbox page (docs/admin-api.md, "The inbox page"). One self-contained document,
/// put together from Admin/Inbox/inbox.html, inbox.css and inbox.js (compiled into the binary, so
/// every way of running the mock serves it without files beside it), that talks to the admin API like any client: `/v1/events` for the
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
        let html = Self.parts.joined(separator: nonce)
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

    static let stylesheetLink = #"<link rel="stylesheet" href="inbox.css">"#
    static let scriptElement = #"<script src="inbox.js"></script>"#

    /// The document served, with inbox.css and inbox.js in place of the `<link>` and `<script src>`
    /// that name them, each under a nonce; `nil` when inbox.html no longer names them as above
    /// (InboxPageDocumentTests fails then).
    static func assemble(html: String, css: String, script: String, nonce: String) -> String? {
        guard html.components(separatedBy: stylesheetLink).count == 2,
            html.components(separatedBy: scriptElement).count == 2
        else { return nil }
        return html
            .replacingOccurrences(of: stylesheetLink, with: "<style nonce=\"\(nonce)\">\n" + css + "</style>")
            .replacingOccurrences(of: scriptElement, with: "<script nonce=\"\(nonce)\">\n" + script + "</script>")
    }

    /// The document split where the nonce goes, so that a response only joins.
    static let parts: [String] = {
        let marker = "\u{0}nonce\u{0}"
        let document = assemble(
            html: String(decoding: PackageResources.inbox_html, as: UTF8.self),
            css: String(decoding: PackageResources.inbox_css, as: UTF8.self),
            script: String(decoding: PackageResources.inbox_js, as: UTF8.self),
            nonce: marker)
        // A build whose inbox.html lost its <link> or <script src> still answers, with the page
        // as written (unstyled, without its script) rather than nothing.
        return (document ?? String(decoding: PackageResources.inbox_html, as: UTF8.self))
            .components(separatedBy: marker)
    }()

    /// 128 random bits, base64.
    private static func nonce() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString()
    }
}
