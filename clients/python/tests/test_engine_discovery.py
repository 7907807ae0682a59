"""How apns_mock.testcontainers finds the container engine and configures Testcontainers for it,
against fake engines on Unix sockets of the test's own (no real engine is needed): the order
(DOCKER_HOST, Docker's socket, podman's rootful and rootless sockets), podman and a missing Ryuk
image turning Ryuk off unless the user said otherwise, and the one-line error, in seconds, when
nothing answers."""

import http.server
import json
import os
import socket
import socketserver
import threading
import time

import pytest

import apns_mock.testcontainers as tc
from testcontainers.core.config import ConnectionMode


class _Engine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def serve_fake_engine(path, platform="Docker Engine - Community", ryuk_present=False):
    """A fake Docker-compatible API on `path`: /_ping, /version and /images/<name>/json."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def address_string(self):
            return "unix"

        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path == "/_ping":
                status, body = 200, b"OK"
            elif self.path == "/version":
                status, body = 200, json.dumps({"Platform": {"Name": platform}, "Components": []}).encode()
            elif self.path.startswith("/images/"):
                status, body = (200, b"{}") if ryuk_present else (404, b'{"message":"no such image"}')
            else:
                status, body = 404, b"{}"
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    os.makedirs(os.path.dirname(path), exist_ok=True)
    server = _Engine(path, Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def places(tmp_path, monkeypatch):
    """Every place the module looks at, moved into tmp_path (nothing there yet); the module's
    process-wide engine and Testcontainers' settings restored afterwards."""
    for name in ("DOCKER_HOST", "TESTCONTAINERS_RYUK_DISABLED", "TESTCONTAINERS_CONNECTION_MODE", "TC_HOST"):
        monkeypatch.delenv(name, raising=False)
    docker = tmp_path / "var-run" / "docker.sock"
    rootful = tmp_path / "run-podman" / "podman.sock"
    runtime = tmp_path / "xdg"
    monkeypatch.setattr(tc, "DOCKER_SOCKET", str(docker))
    monkeypatch.setattr(tc, "PODMAN_ROOTFUL_SOCKET", str(rootful))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setattr(tc, "_engine", None)
    monkeypatch.setattr(tc._config, "_ryuk_disabled", False)
    monkeypatch.setattr(tc._config, "connection_mode_override", None)
    monkeypatch.setattr(tc._config, "tc_host_override", None)
    servers = []
    yield {"docker": str(docker), "rootful": str(rootful), "rootless": str(runtime / "podman" / "podman.sock"),
           "servers": servers}
    for server in servers:
        server.shutdown()
        server.server_close()


def test_nothing_answers_one_line_in_seconds(places):
    # A socket that accepts and never answers, where podman's rootful one would be.
    os.makedirs(os.path.dirname(places["rootful"]))
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.bind(places["rootful"])
    silent.listen(8)
    started = time.monotonic()
    try:
        with pytest.raises(tc.EngineNotFound) as raised:
            tc.ApnsMockContainer()
    finally:
        silent.close()
    elapsed = time.monotonic() - started
    message = str(raised.value)
    assert elapsed < tc.PROBE_TIMEOUT + 3, elapsed
    assert "\n" not in message
    assert "DOCKER_HOST" in message
    assert f"{places['docker']} (absent)" in message
    assert f"{places['rootful']} (no answer in" in message
    assert f"{places['rootless']} (absent)" in message


def test_docker_host_that_does_not_answer_is_named(places, monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/gone.sock")
    serve = serve_fake_engine(places["docker"])  # present, but DOCKER_HOST wins
    places["servers"].append(serve)
    with pytest.raises(tc.EngineNotFound) as raised:
        tc.find_engine()
    assert str(raised.value).startswith(f"DOCKER_HOST=unix://{tmp_path}/gone.sock does not answer (")


def test_docker_socket_first(places):
    places["servers"].append(serve_fake_engine(places["docker"], ryuk_present=True))
    places["servers"].append(serve_fake_engine(places["rootless"], platform="Podman Engine"))
    engine = tc._configure_engine()
    assert engine.docker_host == f"unix://{places['docker']}" and not engine.podman
    assert os.environ["DOCKER_HOST"] == engine.docker_host
    # Docker with the Ryuk image present: Testcontainers' defaults stay.
    assert tc._config.ryuk_disabled is False
    assert tc._config.connection_mode_override is None and tc._config.tc_host_override is None


def test_docker_without_the_ryuk_image_turns_ryuk_off(places):
    places["servers"].append(serve_fake_engine(places["docker"], ryuk_present=False))
    tc._configure_engine()
    assert tc._config.ryuk_disabled is True
    assert tc._config.connection_mode_override is None


def test_podman_rootless_socket(places):
    places["servers"].append(serve_fake_engine(places["rootless"], platform="Podman Engine", ryuk_present=True))
    engine = tc._configure_engine()
    assert engine.docker_host == f"unix://{places['rootless']}" and engine.podman
    assert tc._config.ryuk_disabled is True
    assert tc._config.connection_mode_override == ConnectionMode.docker_host
    assert tc._config.tc_host_override == "127.0.0.1"


def test_podman_rootful_before_rootless(places):
    places["servers"].append(serve_fake_engine(places["rootful"], platform="Podman Engine"))
    places["servers"].append(serve_fake_engine(places["rootless"], platform="Podman Engine"))
    assert tc.find_engine().docker_host == f"unix://{places['rootful']}"


def test_what_the_user_set_is_kept(places, monkeypatch):
    monkeypatch.setenv("TESTCONTAINERS_RYUK_DISABLED", "false")
    monkeypatch.setattr(tc._config, "connection_mode_override", ConnectionMode.gateway_ip)
    monkeypatch.setattr(tc._config, "tc_host_override", "engine.example")
    places["servers"].append(serve_fake_engine(places["rootful"], platform="Podman Engine"))
    tc._configure_engine()
    assert tc._config.ryuk_disabled is False
    assert tc._config.connection_mode_override == ConnectionMode.gateway_ip
    assert tc._config.tc_host_override == "engine.example"
