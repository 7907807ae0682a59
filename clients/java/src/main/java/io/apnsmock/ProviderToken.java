package io.apnsmock;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.Signature;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Instant;
import java.util.Base64;

/**
 * APNs provider tokens (JWT, ES256) signed with the JDK: {@code SHA256withECDSA} gives a DER
 * signature, which is turned into JOSE's r||s (32 + 32 bytes), as APNs expects.
 *
 * <pre>{@code
 * String jwt = ProviderToken.sign(Files.readString(p8), "DEMOTEAM01", "DEMOKEY001", Instant.now());
 * request.header("authorization", "bearer " + jwt);
 * }</pre>
 */
public final class ProviderToken {
    private ProviderToken() {
    }

    /** A token for {@code teamId}'s key {@code keyId}, issued at {@code issuedAt}, signed with {@code keyPem} (a .p8: PKCS #8 PEM). */
    public static String sign(String keyPem, String teamId, String keyId, Instant issuedAt) {
        Base64.Encoder url = Base64.getUrlEncoder().withoutPadding();
        String header = url.encodeToString(("{\"alg\":\"ES256\",\"kid\":\"" + keyId + "\"}").getBytes(StandardCharsets.UTF_8));
        String claims = url.encodeToString(("{\"iss\":\"" + teamId + "\",\"iat\":" + issuedAt.getEpochSecond() + "}").getBytes(StandardCharsets.UTF_8));
        String input = header + "." + claims;
        try {
            Signature signer = Signature.getInstance("SHA256withECDSA");
            signer.initSign(privateKey(keyPem));
            signer.update(input.getBytes(StandardCharsets.US_ASCII));
            return input + "." + url.encodeToString(derToJose(signer.sign()));
        } catch (GeneralSecurityException e) {
            throw new IllegalArgumentException("cannot sign with this key: " + e.getMessage(), e);
        }
    }

    /** The EC private key of a PKCS #8 PEM ({@code -----BEGIN PRIVATE KEY-----}, as Apple's .p8 files are). */
    public static PrivateKey privateKey(String pem) {
        String base64 = pem.replaceAll("-----BEGIN [A-Z ]+-----", "").replaceAll("-----END [A-Z ]+-----", "").replaceAll("\\s", "");
        try {
            return KeyFactory.getInstance("EC").generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(base64)));
        } catch (GeneralSecurityException | IllegalArgumentException e) {
            throw new IllegalArgumentException("not a PKCS #8 EC private key (an APNs .p8): " + e.getMessage(), e);
        }
    }

    /** A DER ECDSA signature (SEQUENCE of two INTEGERs) as JOSE's fixed-width r||s for P-256. */
    public static byte[] derToJose(byte[] der) {
        int offset = 0;
        if (der[offset++] != 0x30) {
            throw new IllegalArgumentException("not a DER ECDSA signature");
        }
        offset += (der[offset] & 0x80) != 0 ? 1 + (der[offset] & 0x7f) : 1; // the sequence's length
        byte[] jose = new byte[64];
        for (int part = 0; part < 2; part++) {
            if (der[offset++] != 0x02) {
                throw new IllegalArgumentException("not a DER ECDSA signature");
            }
            int length = der[offset++];
            // Drop a leading zero (a positive sign byte); left-pad short values.
            int start = offset;
            int size = length;
            while (size > 32 && der[start] == 0) {
                start++;
                size--;
            }
            if (size > 32) {
                throw new IllegalArgumentException("signature part longer than 32 bytes");
            }
            System.arraycopy(der, start, jose, part * 32 + (32 - size), size);
            offset += length;
        }
        return jose;
    }

    /** JOSE's r||s as DER, for verifying with {@code SHA256withECDSA}. */
    public static byte[] joseToDer(byte[] jose) {
        byte[][] parts = new byte[2][];
        for (int part = 0; part < 2; part++) {
            int start = part * 32;
            int end = start + 32;
            while (start < end - 1 && jose[start] == 0) {
                start++;
            }
            boolean pad = (jose[start] & 0x80) != 0;
            byte[] integer = new byte[end - start + (pad ? 1 : 0)];
            System.arraycopy(jose, start, integer, pad ? 1 : 0, end - start);
            parts[part] = integer;
        }
        int length = 4 + parts[0].length + parts[1].length;
        byte[] der = new byte[2 + length];
        int offset = 0;
        der[offset++] = 0x30;
        der[offset++] = (byte) length;
        for (byte[] integer : parts) {
            der[offset++] = 0x02;
            der[offset++] = (byte) integer.length;
            System.arraycopy(integer, 0, der, offset, integer.length);
            offset += integer.length;
        }
        return der;
    }
}
