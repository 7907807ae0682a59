"""The mock the admin-client tests run against, from scripts/client-tests' MOCK_* variables, and a
push through aioapns (a real APNs client, unmodified, pointed at the mock as its own protocol
classes allow)."""

import asyncio
import os
import secrets
import ssl
import uuid
from urllib.parse import urlsplit

import pytest

REQUIRED = ["MOCK_ADMIN_URL", "MOCK_APNS_URL", "MOCK_CA_FILE", "MOCK_KEY_FILE", "MOCK_KEY_ID", "MOCK_TEAM_ID", "MOCK_TOPIC"]


def environment():
    missing = [name for name in REQUIRED if not os.environ.get(name)]
    if missing:
        pytest.skip("no mock to test against (" + ", ".join(missing) + " unset): run scripts/client-tests python")
    return {name: os.environ[name] for name in REQUIRED}


def device_token() -> str:
    return secrets.token_hex(32)


def push(token: str, title: str = "Hello", *, team=None, topic=None, **extra_aps):
    """Sends one alert push with aioapns' token auth; returns its NotificationResult. With
    ``team`` (an apns_mock.TemporaryTeam) it is signed with that team's key, to its first app
    unless ``topic`` says otherwise; else with the mock's key (MOCK_KEY_*) to MOCK_TOPIC."""
    from aioapns import APNs, NotificationRequest, PushType
    from aioapns.connection import APNsDevelopmentClientProtocol, APNsTLSClientProtocol

    env = environment()
    url = urlsplit(env["MOCK_APNS_URL"])
    APNsDevelopmentClientProtocol.APNS_SERVER = url.hostname
    APNsTLSClientProtocol.APNS_PORT = url.port

    async def send():
        if team is None:
            with open(env["MOCK_KEY_FILE"]) as handle:
                key = handle.read()
            key_id, team_id, default_topic = env["MOCK_KEY_ID"], env["MOCK_TEAM_ID"], env["MOCK_TOPIC"]
        else:
            key, key_id, team_id, default_topic = team.private_key_pem, team.key_id, team.team_id, team.apps[0]
        client = APNs(key=key, key_id=key_id, team_id=team_id, topic=topic or default_topic,
                      use_sandbox=True, ssl_context=ssl.create_default_context(cafile=env["MOCK_CA_FILE"]))
        try:
            request = NotificationRequest(device_token=token, message={"aps": {"alert": {"title": title}, **extra_aps}},
                                          notification_id=str(uuid.uuid4()), push_type=PushType.ALERT)
            return await client.send_notification(request)
        finally:
            client.pool.close()

    return asyncio.run(asyncio.wait_for(send(), timeout=20))
