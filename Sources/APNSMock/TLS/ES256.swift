internal import COpenSSL
import APNSMockCore
import Foundation

/// ECDSA P-256 with SHA-256 as JWT uses it: the signature is raw `r ‖ s`, 32 bytes each, not DER.
enum ES256 {
    static let signatureLength = 64

    /// Signs `message`, returning the 64-byte JWT form of the signature.
    static func sign(_ message: some Collection<UInt8>, with key: ECKey) throws -> [UInt8] {
        try rawSignature(fromDER: signDER(message, with: key))
    }

    /// Signs `message`, returning the DER form OpenSSL (and Java's `SHA256withECDSA`) produces.
    static func signDER(_ message: some Collection<UInt8>, with key: ECKey) throws -> [UInt8] {
        OpenSSLError.clearQueue()
        guard let context = EVP_MD_CTX_new() else { throw OpenSSLError.drain("creating a digest context") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key.pointer) == 1 else {
            throw OpenSSLError.drain("initialising ES256 signing")
        }
        let bytes = Array(message)
        var length = 0
        guard EVP_DigestSign(context, nil, &length, bytes, bytes.count) == 1 else {
            throw OpenSSLError.drain("sizing an ES256 signature")
        }
        var der = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &der, &length, bytes, bytes.count) == 1 else {
            throw OpenSSLError.drain("signing with ES256")
        }
        return Array(der.prefix(length))
    }

    /// The first `hexDigits` hex digits of the SHA-256 of `bytes`: a short, stable fingerprint.
    static func fingerprint(_ bytes: some Collection<UInt8>, hexDigits: Int = 12) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let input = Array(bytes)
        guard EVP_Digest(input, input.count, &digest, &length, EVP_sha256(), nil) == 1 else { return "" }
        let hex = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(hexDigits)
        for byte in digest.prefix((hexDigits + 1) / 2) {
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0xF)])
        }
        return String(decoding: text.prefix(hexDigits), as: UTF8.self)
    }

    /// Verifies a raw `r ‖ s` signature. Returns false for any malformed or wrong signature.
    static func verify(signature: some Collection<UInt8>, message: some Collection<UInt8>, with key: ECKey) -> Bool {
        guard signature.count == signatureLength, let der = derSignature(fromRaw: Array(signature)) else {
            return false
        }
        OpenSSLError.clearQueue()
        defer { OpenSSLError.clearQueue() }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key.pointer) == 1 else { return false }
        let bytes = Array(message)
        return EVP_DigestVerify(context, der, der.count, bytes, bytes.count) == 1
    }

    private static func rawSignature(fromDER der: [UInt8]) throws -> [UInt8] {
        let parsed = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature = parsed else { throw OpenSSLError.drain("decoding an ECDSA signature") }
        defer { ECDSA_SIG_free(signature) }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(signature, &r, &s)
        var raw = [UInt8](repeating: 0, count: signatureLength)
        guard BN_bn2binpad(r, &raw, 32) == 32,
              raw.withUnsafeMutableBufferPointer({ BN_bn2binpad(s, $0.baseAddress! + 32, 32) }) == 32
        else { throw OpenSSLError.drain("encoding an ES256 signature") }
        return raw
    }

    private static func derSignature(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        var out: UnsafeMutablePointer<UInt8>?
        let count = i2d_ECDSA_SIG(signature, &out)
        guard count > 0, let out else { return nil }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(count)))
    }
}

/// Builds APNs provider tokens: `{"alg":"ES256","kid":…}.{"iss":…,"iat":…}` signed with ES256.
public enum ProviderTokenSigner {
    /// Signs a provider token with the PEM private key `keyPEM` (an `AuthKey_<KEYID>.p8`).
    public static func token(keyPEM: String, teamID: String, keyID: String, issuedAt: Int) throws -> String {
        try token(keyPEM: keyPEM, teamID: teamID, keyID: keyID, iatLiteral: String(issuedAt))
    }

    /// Signs a provider token whose `iat` is written exactly as `iatLiteral` (a JSON value: `1700000000`,
    /// `1700000000.25`, `"1700000000"`), with the signature in `signatureForm` (DER as Java's
    /// `SHA256withECDSA` gives it, and pushy sends it), to reproduce how some clients sign.
    public static func token(
        keyPEM: String, teamID: String, keyID: String, iatLiteral: String,
        signatureForm: ProviderToken.SignatureForm = .jose
    ) throws -> String {
        let key = try ECKey.privateKey(pem: keyPEM)
        let header = Base64URL.encode(Array(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
        let claims = Base64URL.encode(Array(#"{"iss":"\#(teamID)","iat":\#(iatLiteral)}"#.utf8))
        let signingInput = header + "." + claims
        let signature = signatureForm == .der
            ? try ES256.signDER(Array(signingInput.utf8), with: key) : try ES256.sign(Array(signingInput.utf8), with: key)
        return signingInput + "." + Base64URL.encode(signature)
    }
}

/// base64url without padding, as JWT uses it.
enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }
}
