"""Fixtures: a container engine for the Testcontainers tests, found as a user's engine is found.

The Testcontainers module finds the engine by itself (DOCKER_HOST; else Docker's socket; else
podman's rootful or rootless socket) and sets what podman needs (no Ryuk, the mapped ports on
127.0.0.1): nothing here configures Testcontainers. Where no engine answers and podman is
installed (this project's CI: Debian's podman, no Docker daemon), the `engine` fixture does what a
podman user does to get a socket, `podman system service`, at podman's rootless place
($XDG_RUNTIME_DIR/podman/podman.sock, XDG_RUNTIME_DIR a directory of its own for the session),
and the module finds it there.
"""

import os
import shutil
import subprocess
import tempfile
import time

import pytest


@pytest.fixture(scope="session")
def engine():
    from apns_mock.testcontainers import EngineNotFound, find_engine

    try:
        yield find_engine()
        return
    except EngineNotFound as error:
        if os.environ.get("DOCKER_HOST"):
            pytest.fail(str(error))  # the engine the user named does not answer: nothing to start
        if shutil.which("podman") is None:
            pytest.fail(f"{error} (or run scripts/image, which installs podman)")
    runtime = tempfile.mkdtemp(prefix="apns-mock-runtime-")
    socket = os.path.join(runtime, "podman", "podman.sock")
    os.makedirs(os.path.dirname(socket))
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    previous = os.environ.get("XDG_RUNTIME_DIR")
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(socket):
            if time.monotonic() > deadline or service.poll() is not None:
                pytest.fail("podman system service did not start")
            time.sleep(0.1)
        os.environ["XDG_RUNTIME_DIR"] = runtime
        yield find_engine()
    finally:
        if previous is None:
            os.environ.pop("XDG_RUNTIME_DIR", None)
        else:
            os.environ["XDG_RUNTIME_DIR"] = previous
        service.terminate()
        try:
            service.wait(timeout=10)
        except subprocess.TimeoutExpired:
            service.kill()
        shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture(scope="session")
def image():
    """The image under test: CONTAINER_IMAGE_UNDER_TEST (scripts/test sets it), else apns-mock:local."""
    return os.environ.get("CONTAINER_IMAGE_UNDER_TEST") or "apns-mock:local"


@pytest.fixture()
def admin():
    """An admin client of the live mock (MOCK_ADMIN_URL), the whole mock reset before and after
    the test."""
    from apns_mock import AdminClient
    from mock_env import environment

    client = AdminClient(environment()["MOCK_ADMIN_URL"])
    client.reset()
    yield client
    client.reset()
