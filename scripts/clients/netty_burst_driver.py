"""A burst of pushes written the way pushy writes them on Netty, over python-hyper's h2 and TLS.

What it reproduces of pushy (ApnsClientHandler, TokenAuthenticationApnsClientHandler) and Netty
(DefaultHttp2ConnectionEncoder, SslHandler):
  - every HEADERS frame carries the PRIORITY flag (exclusive clear, stream dependency 0, weight 16,
    Netty's default), followed by one DATA frame that ends the stream;
  - pushy's headers in its order: apns-expiration (always, 0 when unset), apns-topic,
    apns-push-type, apns-priority, then authorization last; `:authority` without the port;
  - the provider token signed as Java's SHA256withECDSA signs it: a DER signature (not JOSE's
    r||s), header {"alg":"ES256","typ":"JWT","kid"}, integer iat; one token per connection;
  - writes coalesced and flushed in batches, as Netty flushes a channel: many frames go out in one
    write, and TLS cuts them into records of 16 KiB at whatever byte they reach, so frames are split
    across the server's reads at any offset;
  - it waits for the server's SETTINGS (pushy does), keeps at most MAX_CONCURRENT_STREAMS in flight,
    resends a stream refused with REFUSED_STREAM (pushy retries only those), and on GOAWAY stops:
    pushy closes the connection at once and fails the pushes still in flight.

Prints one JSON object: {"sent", "answered", "statuses": {status: count}, "refused", "retried",
"goaway": null or {"lastStreamId", "errorCode", "debug"}, "failed", "seconds"}.
"""
import argparse
import base64
import json
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def pushy_token(key_path, team, key_id):
    key = serialization.load_pem_private_key(open(key_path, "rb").read(), password=None)
    header = b64url(json.dumps({"alg": "ES256", "typ": "JWT", "kid": key_id}, separators=(",", ":")).encode())
    claims = b64url(json.dumps({"iss": team, "iat": int(time.time())}, separators=(",", ":")).encode())
    signing_input = f"{header}.{claims}".encode()
    # DER, as Java's Signature.getInstance("SHA256withECDSA") returns it and pushy sends it.
    signature = key.sign(signing_input, ec.ECDSA(hashes.SHA256()))
    return f"{header}.{claims}.{b64url(signature)}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--team", required=True)
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--topic", default="com.example.app")
    parser.add_argument("--device", required=True)
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=500, help="requests written per flush")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()

    context = ssl.create_default_context(cafile=args.ca)
    context.set_alpn_protocols(["h2"])
    raw = socket.create_connection(("127.0.0.1", args.port), timeout=args.timeout)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock = context.wrap_socket(raw, server_hostname="localhost")
    if sock.selected_alpn_protocol() != "h2":
        raise SystemExit("the server did not select h2")

    connection = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding=None))
    connection.local_settings = h2.settings.Settings(client=True, initial_values={h2.settings.SettingCodes.ENABLE_PUSH: 0})
    connection.initiate_connection()
    connection.increment_flow_control_window(1 << 20)
    sock.sendall(connection.data_to_send())

    token = pushy_token(args.key, args.team, args.key_id)
    body = json.dumps({"aps": {"alert": "netty burst"}}, separators=(",", ":")).encode()
    headers = [
        (b":method", b"POST"), (b":scheme", b"https"), (b":path", f"/3/device/{args.device}".encode()),
        (b":authority", b"localhost"), (b"apns-expiration", b"0"), (b"apns-topic", args.topic.encode()),
        (b"apns-push-type", b"alert"), (b"apns-priority", b"10"), (b"authorization", f"bearer {token}".encode()),
    ]

    started = time.monotonic()
    deadline = started + args.timeout
    statuses = {}
    in_flight = set()
    to_send = args.count
    refused = retried = answered = 0
    goaway = None
    settings_seen = False
    first_answered = False
    failed = 0

    def write_batch():
        nonlocal to_send, retried
        # pushy's first push on a connection carries the token alone; the server raises the stream
        # limit once a token is accepted, and SETTINGS tells.
        limit = connection.remote_settings.max_concurrent_streams if first_answered else 1
        written = 0
        while to_send > 0 and len(in_flight) < limit and written < args.batch:
            stream = connection.get_next_available_stream_id()
            connection.send_headers(stream, headers, end_stream=False, priority_weight=16, priority_depends_on=0,
                                    priority_exclusive=False)
            connection.send_data(stream, body, end_stream=True)
            in_flight.add(stream)
            to_send -= 1
            written += 1
        data = connection.data_to_send()
        if data:
            sock.sendall(data)

    while (to_send > 0 or in_flight) and goaway is None and time.monotonic() < deadline:
        if settings_seen:
            write_batch()
        try:
            data = sock.recv(65536)
        except socket.timeout:
            break
        if not data:
            break
        for event in connection.receive_data(data):
            if isinstance(event, h2.events.RemoteSettingsChanged):
                settings_seen = True
            elif isinstance(event, h2.events.ResponseReceived):
                status = dict(event.headers).get(b":status", b"?").decode()
                statuses[status] = statuses.get(status, 0) + 1
                answered += 1
                first_answered = True
            elif isinstance(event, h2.events.StreamEnded):
                in_flight.discard(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                in_flight.discard(event.stream_id)
                if event.error_code == h2.errors.ErrorCodes.REFUSED_STREAM:
                    refused += 1
                    retried += 1
                    to_send += 1
                else:
                    failed += 1
            elif isinstance(event, h2.events.ConnectionTerminated):
                goaway = {"lastStreamId": event.last_stream_id, "errorCode": int(event.error_code),
                          "debug": (event.additional_data or b"").decode(errors="replace")}
            elif isinstance(event, h2.events.DataReceived):
                connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        out = connection.data_to_send()
        if out:
            sock.sendall(out)
    failed += len(in_flight) + to_send
    try:
        connection.close_connection()
        sock.sendall(connection.data_to_send())
        sock.close()
    except OSError:
        pass
    print(json.dumps({
        "sent": args.count, "answered": answered, "statuses": statuses, "refused": refused, "retried": retried,
        "goaway": goaway, "failed": failed, "seconds": round(time.monotonic() - started, 3),
    }))


if __name__ == "__main__":
    sys.exit(main())
