"""Provider keys and tokens for a team of the mock: a fresh P-256 key pair, and an ES256 provider
token (JWT) signed with a key, as an APNs client signs one.

These need the ``cryptography`` package (``pip install "./clients/python[teams]"``); it is
imported when a function is called, so ``apns_mock.AdminClient`` itself stays standard library
only.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from typing import Optional, Tuple, Union

__all__ = ["generate_key", "provider_token", "random_id"]

_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _cryptography():
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "apns_mock's keys and provider tokens need the cryptography package: "
            'pip install "./clients/python[teams]" (or pip install cryptography)'
        ) from error
    return hashes, serialization, ec, decode_dss_signature


def random_id() -> str:
    """A random team or key ID: 10 uppercase letters and digits, as Apple's are."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(10))


def generate_key() -> Tuple[str, str]:
    """A fresh P-256 key pair: ``(private_pem, public_pem)``, the private key as PKCS #8 (the form
    of Apple's ``.p8`` files) and the public one as SubjectPublicKeyInfo (``BEGIN PUBLIC KEY``)."""
    _, serialization, ec, _ = _cryptography()
    key = ec.generate_private_key(ec.SECP256R1())
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    return private_pem, public_pem


def provider_token(
    private_key_pem: Union[str, bytes], key_id: str, team_id: str, issued_at: Optional[Union[int, float]] = None
) -> str:
    """An ES256 provider token: header ``{"alg": "ES256", "kid": key_id}``, claims
    ``{"iss": team_id, "iat": issued_at}`` (whole seconds since the epoch; now by default),
    signed with the P-256 key ``private_key_pem`` (a ``.p8`` file's text), the signature as JOSE
    wants it (r and s, 32 bytes each). Send it as ``authorization: bearer <token>``."""
    hashes, serialization, ec, decode_dss_signature = _cryptography()
    pem = private_key_pem.encode() if isinstance(private_key_pem, str) else private_key_pem
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ValueError("provider_token: the key is not a P-256 (prime256v1) private key")
    iat = int(time.time()) if issued_at is None else int(issued_at)
    signing_input = _part({"alg": "ES256", "kid": key_id}) + "." + _part({"iss": team_id, "iat": iat})
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return signing_input + "." + _base64url(signature)


def _part(value: dict) -> str:
    return _base64url(json.dumps(value, separators=(",", ":")).encode())


def _base64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
