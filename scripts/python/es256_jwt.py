"""Signs an APNs provider token with Python's `cryptography` package, independently of apns-mock.

Usage: es256_jwt.py KEY.p8 TEAM_ID KEY_ID IAT  -> prints the JWT.
The DER ECDSA signature is converted to JWT's raw r||s (32 bytes each).
"""
import base64
import json
import sys

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def main() -> None:
    path, team, kid, iat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with open(path, "rb") as handle:
        key = serialization.load_pem_private_key(handle.read(), password=None)
    header = b64url(json.dumps({"alg": "ES256", "kid": kid}, separators=(",", ":")).encode())
    claims = b64url(json.dumps({"iss": team, "iat": iat}, separators=(",", ":")).encode())
    signing_input = f"{header}.{claims}".encode("ascii")
    r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
    print(f"{header}.{claims}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}")


main()
