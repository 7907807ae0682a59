"""What the Python client drivers share: their command line, a hosts-file-like redirect of Apple's
host names to the mock, and the JSON they print.

Every driver takes the same arguments (see ``parse_arguments``), sends one push to each
``--device`` in order (the scenario only names what the test is about), and prints one JSON object
on stdout:

    {"client": "aioapns", "version": "4.0", "scenario": "accepted", "dialed": [...],
     "results": [{"device": "...", "sent": true, "status": 200, "reason": null, "apnsId": "...",
                  "timestamp": null, "error": null}]}

``status``, ``apnsId`` and ``timestamp`` are what the client itself surfaced (``null`` when it does
not expose them); ``error`` is an exception the client raised that is not an APNs answer.
"""
import argparse
import importlib.metadata
import json
import os
import socket
import sys
import signal
import tempfile

APPLE_HOSTS = ("api.push.apple.com", "api.sandbox.push.apple.com", "api.development.push.apple.com")


def parse_arguments(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, required=True, help="the mock's APNs port on 127.0.0.1")
    parser.add_argument("--ca", required=True, help="the CA certificate the mock's server certificate chains to")
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--auth", choices=("token", "certificate"), default="token")
    parser.add_argument("--key", help="token auth: the .p8 signing key")
    parser.add_argument("--team", help="token auth: the team ID (iss)")
    parser.add_argument("--key-id", help="token auth: the key ID (kid)")
    parser.add_argument("--cert", help="certificate auth: the client certificate (PEM)")
    parser.add_argument("--cert-key", help="certificate auth: its private key (PEM)")
    parser.add_argument("--topic", default="com.example.app")
    parser.add_argument("--device", action="append", required=True, help="a device token (repeatable)")
    parser.add_argument("--timeout", type=float, default=30)
    parser.add_argument("--proxy", help="reach Apple's hosts through this HTTP proxy (the mock's CONNECT listener), "
                                        "as the client's own proxy support does it, instead of the redirect")
    args = parser.parse_args()
    # A client that hangs ends the process (and so the test's wait) instead of blocking forever.
    signal.alarm(int(args.timeout) + 1)
    return args


dialed = []


def redirect_apple_hosts(port):
    """A process-local stand-in for a hosts-file alias plus a port forward, for clients that only
    know Apple's hosts: Apple's push host names resolve to 127.0.0.1, and a connection to
    127.0.0.1:443 goes to the mock's port. The client still sends SNI for, and verifies, Apple's
    host name (the mock's server certificate names those hosts). Every name the client resolves
    is noted in ``dialed``.

    The port is forwarded at connect() rather than in getaddrinfo because some stacks (anyio,
    under httpx) keep only the address from the lookup and connect to the port they asked for."""
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, service, family=0, type=0, proto=0, flags=0):
        name = host.decode() if isinstance(host, bytes) else host
        dialed.append(f"{name}:{service}")
        if name in APPLE_HOSTS:
            host = "127.0.0.1"
            family = socket.AF_INET
        return real_getaddrinfo(host, service, family, type, proto, flags)

    def forwarded(address):
        if isinstance(address, tuple) and len(address) == 2 and address == ("127.0.0.1", 443):
            return ("127.0.0.1", port)
        return address

    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    socket.getaddrinfo = getaddrinfo
    socket.socket.connect = lambda self, address: real_connect(self, forwarded(address))
    socket.socket.connect_ex = lambda self, address: real_connect_ex(self, forwarded(address))


def reach_apple_hosts(args):
    """How a client that dials Apple's host names reaches the mock: through ``--proxy`` with the
    proxy support the client has (httpx and httpx2 read ``HTTPS_PROXY``: they send
    ``CONNECT api.development.push.apple.com:443``, and TLS with Apple's host name goes through the
    tunnel), or else through the process-local redirect (``redirect_apple_hosts``)."""
    if args.proxy:
        os.environ["HTTPS_PROXY"] = args.proxy
        os.environ.pop("NO_PROXY", None)
        os.environ.pop("no_proxy", None)
    else:
        redirect_apple_hosts(args.port)


def trust_ca_through_environment(ca):
    """For clients without a CA option: OpenSSL's (and httpx's) standard SSL_CERT_FILE."""
    os.environ["SSL_CERT_FILE"] = ca


def combined_pem(cert, key):
    """Clients that take one file holding certificate and key get the two concatenated."""
    handle = tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False)
    with handle, open(cert) as certificate, open(key) as private_key:
        handle.write(certificate.read())
        handle.write(private_key.read())
    return handle.name


def alert_text(client):
    return f"hello from {client}"


def result(device, sent, status=None, reason=None, apns_id=None, timestamp=None, error=None):
    """One push's outcome as the client surfaced it: ``sent`` is the client's own verdict."""
    return {
        "device": device, "sent": sent, "status": int(status) if status is not None else None, "reason": reason,
        "apnsId": apns_id, "timestamp": int(timestamp) if timestamp is not None else None, "error": error,
    }


def describe(exception):
    return f"{type(exception).__module__}.{type(exception).__name__}: {exception}"


def emit(client, distribution, args, results, **extra):
    document = {
        "client": client, "version": importlib.metadata.version(distribution), "scenario": args.scenario,
        "dialed": sorted(set(dialed)), "results": results,
    }
    document.update(extra)
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
