"""apns-mock as a Testcontainers container.

    from apns_mock.testcontainers import ApnsMockContainer

    with ApnsMockContainer() as mock:
        client = YourAPNsClient(url=mock.apns_url, ca=mock.ca_file(), token=mock.provider_token())
        ...

The container runs the image's own unprivileged user with the default capabilities; it is
configured by APNS_MOCK_* variables only (the project's docs/configuration.md lists them), and
ready once GET /v1/health answers 200 (every listener bound).

The engine is found as Docker's clients find it, and podman's socket too, with nothing to set:
DOCKER_HOST when it is set (and then only it); else the first of /var/run/docker.sock, podman's
rootful /run/podman/podman.sock and rootless $XDG_RUNTIME_DIR/podman/podman.sock that answers.
With podman, or where the Ryuk image (which Testcontainers pulls from Docker Hub to remove
containers left behind) is not present locally, Ryuk is turned off unless
TESTCONTAINERS_RYUK_DISABLED (or ryuk.disabled in ~/.testcontainers.properties) says otherwise:
the container is removed when the ``with`` block ends, or at the latest when Python exits. With
podman the mapped ports are reached on 127.0.0.1 (TESTCONTAINERS_CONNECTION_MODE and TC_HOST,
when set, are left as they are). When no engine answers, :class:`EngineNotFound` says in one
line what to set, within seconds.
"""

from __future__ import annotations

import atexit
import http.client
import json
import os
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.request
from typing import Iterable, List, Optional, Tuple
from urllib.parse import quote, urlparse

from testcontainers.core.config import testcontainers_config as _config

try:  # testcontainers 4.8 and later choose how to reach a container's ports ("connection mode")
    from testcontainers.core.config import ConnectionMode
except ImportError:  # earlier ones always use the engine's host
    ConnectionMode = None
from testcontainers.core.container import DockerContainer

__all__ = ["ApnsMockContainer", "ApnsMockNotReady", "EngineNotFound", "Engine", "find_engine"]

DEMO_TEAM_ID = "DEMOTEAM01"
DEMO_KEY_ID = "DEMOKEY001"
DEMO_TOPIC = "com.example.app"
CERTS = "/var/lib/apns-mock/certs"


class ApnsMockNotReady(RuntimeError):
    """The container did not turn healthy in time; the message has its last answer and its log."""


class EngineNotFound(RuntimeError):
    """No container engine answered: the message (one line) says where it looked and what to set."""


# Where engines listen when DOCKER_HOST is not set, in the order they are tried.
DOCKER_SOCKET = "/var/run/docker.sock"
PODMAN_ROOTFUL_SOCKET = "/run/podman/podman.sock"
PROBE_TIMEOUT = 3.0


class Engine:
    """The engine :func:`find_engine` found: ``docker_host`` (``unix://…`` or ``tcp://…``), whether
    it is ``podman``, and whether the Ryuk image is present in it."""

    def __init__(self, docker_host: str, podman: bool, ryuk_image_present: bool) -> None:
        self.docker_host = docker_host
        self.podman = podman
        self.ryuk_image_present = ryuk_image_present

    def __repr__(self) -> str:
        return f"Engine({self.docker_host!r}, podman={self.podman}, ryuk_image_present={self.ryuk_image_present})"


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _engine_get(docker_host: str, path: str, timeout: float) -> Tuple[int, bytes]:
    """One GET to the engine's API at ``docker_host`` (unix:// or tcp://), bounded by ``timeout``."""
    parsed = urlparse(docker_host)
    if parsed.scheme == "unix":
        connection: http.client.HTTPConnection = _UnixConnection(parsed.path, timeout)
    elif parsed.scheme in ("tcp", "http"):
        connection = http.client.HTTPConnection(parsed.hostname or "localhost", parsed.port or 2375, timeout=timeout)
    else:
        raise ValueError(f"cannot probe {docker_host}")
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _probe(docker_host: str, timeout: float) -> Optional[str]:
    """None when the engine at ``docker_host`` answers ``GET /_ping``, else why not."""
    try:
        status, body = _engine_get(docker_host, "/_ping", timeout)
    except socket.timeout:
        return f"no answer in {timeout:g} s"
    except OSError as error:
        return error.strerror or str(error)
    except http.client.HTTPException as error:
        return f"not an engine's API ({error.__class__.__name__})"
    return None if status == 200 else f"GET /_ping answered {status}"


def _candidates() -> List[str]:
    sockets = [DOCKER_SOCKET, PODMAN_ROOTFUL_SOCKET]
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    sockets.append(os.path.join(runtime, "podman", "podman.sock"))
    return sockets


def find_engine(timeout: float = PROBE_TIMEOUT) -> Engine:
    """The container engine to use, probed (each candidate gets ``timeout`` seconds): DOCKER_HOST
    when set, else the first of the Docker socket, podman's rootful socket and podman's rootless
    socket that answers. Raises :class:`EngineNotFound` with one line saying what to set."""
    docker_host = os.environ.get("DOCKER_HOST")
    if docker_host:
        if urlparse(docker_host).scheme in ("unix", "tcp", "http"):
            problem = _probe(docker_host, timeout)
            if problem:
                raise EngineNotFound(
                    f"DOCKER_HOST={docker_host} does not answer ({problem}): start that engine, "
                    "or set DOCKER_HOST to one that answers (unset it to use /var/run/docker.sock or podman's socket)")
        return _describe(docker_host, timeout)
    tried = []
    for path in _candidates():
        if not os.path.exists(path):
            tried.append(f"{path} (absent)")
            continue
        problem = _probe(f"unix://{path}", timeout)
        if problem is None:
            return _describe(f"unix://{path}", timeout)
        tried.append(f"{path} ({problem})")
    raise EngineNotFound(
        "no container engine answers at " + ", ".join(tried) + ": start Docker, or podman's socket "
        "(`systemctl --user start podman.socket`; as root `systemctl start podman.socket` or "
        "`podman system service --time=0 &`), or set DOCKER_HOST (e.g. unix:///path/to/engine.sock)")


def _describe(docker_host: str, timeout: float) -> Engine:
    podman = False
    ryuk_present = True
    try:
        status, body = _engine_get(docker_host, "/version", timeout)
        if status == 200:
            version = json.loads(body)
            names = [(version.get("Platform") or {}).get("Name", "")]
            names += [component.get("Name", "") for component in version.get("Components") or []]
            podman = any("podman" in name.lower() for name in names)
        status, _ = _engine_get(docker_host, "/images/" + quote(_config.ryuk_image, safe="") + "/json", timeout)
        ryuk_present = status == 200
    except (OSError, ValueError, http.client.HTTPException):
        pass  # an engine reached another way (ssh://…): Testcontainers' own defaults
    return Engine(docker_host, podman, ryuk_present)


_engine: Optional[Engine] = None
_engine_lock = threading.Lock()


def _user_set_ryuk() -> bool:
    return "TESTCONTAINERS_RYUK_DISABLED" in os.environ or "ryuk.disabled" in (getattr(_config, "tc_properties", None) or {})


def _configure_engine() -> Engine:
    """Finds the engine once per process and sets what Testcontainers needs for it."""
    global _engine
    with _engine_lock:
        if _engine is None:
            engine = find_engine()
            # Testcontainers' client reads DOCKER_HOST (and sets it itself when it finds one).
            os.environ["DOCKER_HOST"] = engine.docker_host
            if not _user_set_ryuk() and (engine.podman or not engine.ryuk_image_present):
                _config.ryuk_disabled = True
            if engine.podman:
                # podman serves the ports it maps on this machine; Testcontainers' guesses for a
                # process inside a container (the bridge's or the gateway's address) do not apply.
                if ConnectionMode is not None and getattr(_config, "connection_mode_override", None) is None:
                    _config.connection_mode_override = ConnectionMode.docker_host
                if not getattr(_config, "tc_host_override", None):
                    _config.tc_host_override = "127.0.0.1"
            _engine = engine
        return _engine


# Containers started and not stopped yet: removed when Python exits (Ryuk's work when it is off).
_running: "set[ApnsMockContainer]" = set()


@atexit.register
def _remove_left_behind() -> None:
    for container in list(_running):
        try:
            container.stop()
        except Exception:
            pass


class ApnsMockContainer(DockerContainer):
    APNS_PORT = 2197
    ADMIN_PORT = 2198
    BROADCAST_SANDBOX_PORT = 2195
    BROADCAST_PRODUCTION_PORT = 2196

    def __init__(
        self,
        image: str = "apns-mock:local",
        *,
        team_id: Optional[str] = None,
        key_id: Optional[str] = None,
        key_pem: Optional[str] = None,
        topics: Optional[Iterable[str]] = None,
        environment: Optional[str] = None,
        admin_token: Optional[str] = None,
        startup_timeout: float = 60.0,
        **kwargs,
    ) -> None:
        self.engine = _configure_engine()
        super().__init__(image, **kwargs)
        self.with_exposed_ports(self.APNS_PORT, self.ADMIN_PORT, self.BROADCAST_SANDBOX_PORT, self.BROADCAST_PRODUCTION_PORT)
        # Tests reach the mock through its mapped 2197; its 443 serves compose networks, and an
        # unprivileged process binds it only where the engine lowers ip_unprivileged_port_start
        # (Docker does, podman does not by default).
        self.with_env("APNS_MOCK_ADDITIONAL_PORTS", "none")
        self.team_id = team_id or DEMO_TEAM_ID
        self.key_id = key_id or DEMO_KEY_ID
        self.topics = list(topics) if topics else [DEMO_TOPIC]
        self._key_pem = key_pem
        self.admin_token = admin_token
        self.startup_timeout = startup_timeout
        self._ca_directory: Optional[tempfile.TemporaryDirectory] = None
        settings = {
            "APNS_MOCK_TEAM_ID": team_id,
            "APNS_MOCK_KEY_ID": key_id,
            "APNS_MOCK_KEY_PEM": key_pem,
            "APNS_MOCK_TOPICS": ",".join(topics) if topics else None,
            "APNS_MOCK_ENVIRONMENT": environment,
            "APNS_MOCK_ADMIN_TOKEN": admin_token,
        }
        for name, value in settings.items():
            if value is not None:
                self.with_env(name, value)

    # Lifecycle

    def start(self) -> "ApnsMockContainer":
        _running.add(self)
        try:
            super().start()
            self._wait_until_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, force: bool = True, delete_volume: bool = True) -> None:
        _running.discard(self)
        if self._ca_directory is not None:
            self._ca_directory.cleanup()
            self._ca_directory = None
        if self._container is not None:
            super().stop(force=force, delete_volume=delete_volume)

    def _wait_until_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            self.reload()
            if self.status in ("exited", "dead"):
                raise ApnsMockNotReady(f"apns-mock exited before it was healthy:\n{self._log()}")
            try:
                status, body = self._admin_get("/v1/health", timeout=2)
                if status == 200:
                    return
                last = f"{status} {body.decode(errors='replace')}"
            except (OSError, urllib.error.URLError, ConnectionError) as error:
                last = str(error)
            time.sleep(0.2)
        raise ApnsMockNotReady(f"apns-mock not healthy after {self.startup_timeout} s ({last}):\n{self._log()}")

    def _log(self) -> str:
        stdout, stderr = self.get_logs()
        return (stdout + stderr).decode(errors="replace")[-4000:]

    # Where it is

    @property
    def apns_host(self) -> str:
        return self.get_container_host_ip()

    @property
    def apns_port(self) -> int:
        return int(self.get_exposed_port(self.APNS_PORT))

    @property
    def apns_url(self) -> str:
        """`https://<host>:<port>`: device pushes (`/3/device/<token>`) and broadcasts."""
        return f"https://{self.apns_host}:{self.apns_port}"

    @property
    def admin_url(self) -> str:
        """`http://<host>:<port>`: the admin and query API (`/v1/…`) and the inbox page."""
        return f"http://{self.get_container_host_ip()}:{self.get_exposed_port(self.ADMIN_PORT)}"

    def channel_management_url(self, environment: str = "sandbox") -> str:
        port = self.BROADCAST_SANDBOX_PORT if environment == "sandbox" else self.BROADCAST_PRODUCTION_PORT
        return f"https://{self.get_container_host_ip()}:{self.get_exposed_port(port)}"

    @property
    def topic(self) -> str:
        """The first app of the configured team: a topic the mock accepts."""
        return self.topics[0]

    # What a client needs

    def ca_pem(self) -> str:
        """The CA certificate the mock's TLS listeners are issued under (`GET /v1/ca.pem`)."""
        status, body = self._admin_get("/v1/ca.pem")
        if status != 200:
            raise RuntimeError(f"GET /v1/ca.pem answered {status}: {body.decode(errors='replace')}")
        return body.decode()

    def ca_file(self) -> str:
        """A file holding :meth:`ca_pem`, kept until the container stops."""
        if self._ca_directory is None:
            self._ca_directory = tempfile.TemporaryDirectory(prefix="apns-mock-ca-")
        path = os.path.join(self._ca_directory.name, "ca.pem")
        if not os.path.exists(path):
            with open(path, "w") as file:
                file.write(self.ca_pem())
        return path

    def key_pem(self) -> str:
        """The provider key (PEM) the mock verifies tokens with: the one given, or the key it made."""
        if self._key_pem is not None:
            return self._key_pem
        return self._exec(["cat", f"{CERTS}/AuthKey_{self.key_id}.p8"])

    def provider_token(self) -> str:
        """A provider token (JWT, ES256) the mock accepts, signed inside the container by
        `apns-mock token` with the configured key; valid for an hour."""
        return self._exec(["apns-mock", "token"]).strip()

    # Helpers

    def _exec(self, command: list) -> str:
        exit_code, output = self.exec(command)
        text = output.decode(errors="replace")
        if exit_code != 0:
            raise RuntimeError(f"{' '.join(command)} in the container exited {exit_code}: {text}")
        return text

    def _admin_get(self, path: str, timeout: float = 10):
        request = urllib.request.Request(self.admin_url + path)
        if self.admin_token:
            request.add_header("Authorization", f"Bearer {self.admin_token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def admin(self):
        """An :class:`apns_mock.AdminClient` of this container's admin API (waits, faults, …)."""
        from .admin import AdminClient

        return AdminClient(self.admin_url, token=self.admin_token)

    def notifications(self, **query) -> list:
        """`GET /v1/notifications` with its filters as keyword arguments (`token=…`,
        `outcome="all"`); the records, oldest first."""
        from urllib.parse import urlencode

        status, body = self._admin_get("/v1/notifications" + ("?" + urlencode(query) if query else ""))
        if status != 200:
            raise RuntimeError(f"GET /v1/notifications answered {status}: {body.decode(errors='replace')}")
        return json.loads(body)["notifications"]
