"""Fixtures: a Docker-compatible socket served by podman when no Docker engine is configured.

The suite runs where Debian's podman is the only container engine (no Docker daemon): the
`docker_host` fixture starts `podman system service` on a socket of its own for the session and
points testcontainers at it (Ryuk off: podman removes nothing by itself, the tests stop what they
start). With DOCKER_HOST already set, that engine is used as it is.
"""

import os
import shutil
import subprocess
import tempfile
import time

import pytest

# Read by testcontainers when it is imported: no Ryuk (its image comes from a registry), and the
# engine's own address for the containers' ports.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")


@pytest.fixture(scope="session")
def docker_host():
    if os.environ.get("DOCKER_HOST"):
        yield os.environ["DOCKER_HOST"]
        return
    if shutil.which("podman") is None:
        pytest.fail("no DOCKER_HOST and no podman: run scripts/image, which installs podman")
    directory = tempfile.mkdtemp(prefix="apns-mock-podman-")
    socket = os.path.join(directory, "docker.sock")
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(socket):
            if time.monotonic() > deadline or service.poll() is not None:
                pytest.fail("podman system service did not start")
            time.sleep(0.1)
        os.environ["DOCKER_HOST"] = f"unix://{socket}"
        yield os.environ["DOCKER_HOST"]
    finally:
        os.environ.pop("DOCKER_HOST", None)
        service.terminate()
        try:
            service.wait(timeout=10)
        except subprocess.TimeoutExpired:
            service.kill()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def image():
    """The image under test: CONTAINER_IMAGE_UNDER_TEST (scripts/test sets it), else apns-mock:local."""
    return os.environ.get("CONTAINER_IMAGE_UNDER_TEST") or "apns-mock:local"
