"""apns-mock as a Testcontainers container.

    from apns_mock.testcontainers import ApnsMockContainer

    with ApnsMockContainer() as mock:
        client = YourAPNsClient(url=mock.apns_url, ca=mock.ca_file(), token=mock.provider_token())
        ...

The container runs the image's own unprivileged user with the default capabilities; it is
configured by APNS_MOCK_* variables only (the project's docs/configuration.md lists them), and
ready once GET /v1/health answers 200 (every listener bound).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.error
import urllib.request
from typing import Iterable, Optional

from testcontainers.core.container import DockerContainer

__all__ = ["ApnsMockContainer", "ApnsMockNotReady"]

DEMO_TEAM_ID = "DEMOTEAM01"
DEMO_KEY_ID = "DEMOKEY001"
DEMO_TOPIC = "com.example.app"
CERTS = "/var/lib/apns-mock/certs"


class ApnsMockNotReady(RuntimeError):
    """The container did not turn healthy in time; the message has its last answer and its log."""


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
        super().start()
        self._wait_until_healthy()
        return self

    def stop(self, force: bool = True, delete_volume: bool = True) -> None:
        if self._ca_directory is not None:
            self._ca_directory.cleanup()
            self._ca_directory = None
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
