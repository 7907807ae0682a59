"""Holds idle HTTP/2 connections open, for scripts/bench's CONNECTIONS=1 mode.

    python3 hold-connections.py PORT CA STAGE...

For each STAGE (a running total, e.g. 1000 10000) it opens connections until that many are open:
TLS with ALPN h2, the client preface and an empty SETTINGS frame, then it reads until the server's
SETTINGS has arrived (and acknowledges it, as a client must: nghttpd closes a connection whose
client does not within 10 s) and the server has acknowledged the client's, so that the server has
taken the whole opening before the script reads its memory. Then it prints "held N" and waits
for a line on its standard input; then it looks at every connection and prints "open N", the
connections the server has not closed or sent a frame on since; then the next stage. After the
last, it waits for its standard input to close.
"""

import select
import socket
import ssl
import sys

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
SETTINGS_ACK = bytes([0, 0, 0, 4, 1, 0, 0, 0, 0])


def open_connection(context, port):
    """A connection past the exchange of SETTINGS."""
    connection = context.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
    connection.sendall(PREFACE)
    pending = b""
    server_settings = acknowledged = False
    while not (server_settings and acknowledged):
        while len(pending) >= 9:
            length = int.from_bytes(pending[0:3], "big")
            if len(pending) < 9 + length:
                break
            kind, flags = pending[3], pending[4]
            pending = pending[9 + length:]
            if kind == 4 and flags & 1:
                acknowledged = True
            elif kind == 4:
                connection.sendall(SETTINGS_ACK)
                server_settings = True
        if server_settings and acknowledged:
            break
        chunk = connection.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection during the SETTINGS exchange")
        pending += chunk
    return connection


def still_open(connections):
    """How many connections have had nothing from the server since (no frame, no close); bytes
    that are only TLS's own (a late session ticket) do not count."""
    poller = select.poll()
    by_descriptor = {}
    for connection in connections:
        poller.register(connection, select.POLLIN)
        by_descriptor[connection.fileno()] = connection
    gone = 0
    for descriptor, _ in poller.poll(0):
        connection = by_descriptor[descriptor]
        connection.setblocking(False)
        try:
            connection.recv(65536)
            gone += 1
        except ssl.SSLWantReadError:
            pass
        except OSError:
            gone += 1
        connection.setblocking(True)
    return len(connections) - gone


def main():
    port, ca = int(sys.argv[1]), sys.argv[2]
    stages = [int(stage) for stage in sys.argv[3:]]
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols(["h2"])
    held = []
    for stage in stages:
        while len(held) < stage:
            held.append(open_connection(context, port))
        print(f"held {len(held)}", flush=True)
        sys.stdin.readline()
        print(f"open {still_open(held)}", flush=True)
    sys.stdin.readline()


main()
