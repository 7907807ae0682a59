"""ApnsMockContainer against a real engine (podman's Docker-compatible socket here), with pushes
sent by a real APNs client of the language: aioapns, unmodified, and httpx over HTTP/2."""

import asyncio
import ssl
import uuid

import httpx
from aioapns import APNs, NotificationRequest
from aioapns.connection import APNsDevelopmentClientProtocol, APNsTLSClientProtocol
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from testcontainers.core.config import testcontainers_config

from apns_mock.testcontainers import ApnsMockContainer


def push_with_aioapns(mock, key_pem, device, alert):
    """One push as a provider using aioapns sends it, to the container's mapped port."""

    async def send():
        APNsDevelopmentClientProtocol.APNS_SERVER = mock.apns_host
        APNsTLSClientProtocol.APNS_PORT = mock.apns_port
        client = APNs(key=key_pem, key_id=mock.key_id, team_id=mock.team_id, topic=mock.topic, use_sandbox=True,
                      ssl_context=ssl.create_default_context(cafile=mock.ca_file()))
        request = NotificationRequest(device_token=device, message={"aps": {"alert": alert}},
                                      notification_id=str(uuid.uuid4()))
        return await client.send_notification(request)

    return asyncio.run(asyncio.wait_for(send(), timeout=30))


def test_demo_team_out_of_the_box(engine, image):
    device = "d1" * 32
    with ApnsMockContainer(image) as mock:
        if mock.engine.podman:  # found by itself; Ryuk (a Docker Hub image) off without being told
            assert testcontainers_config.ryuk_disabled
        assert mock.team_id == "DEMOTEAM01" and mock.key_id == "DEMOKEY001"
        assert mock.ca_pem().startswith("-----BEGIN CERTIFICATE-----")
        result = push_with_aioapns(mock, mock.key_pem(), device, "from testcontainers")
        assert result.is_successful, (result.status, result.description)

        # The ready token, over HTTP/2 with httpx.
        with httpx.Client(http2=True, verify=ssl.create_default_context(cafile=mock.ca_file()), timeout=20) as client:
            response = client.post(
                f"{mock.apns_url}/3/device/{device}",
                headers={"authorization": f"bearer {mock.provider_token()}", "apns-topic": mock.topic,
                         "apns-push-type": "alert"},
                content=b'{"aps":{"alert":"with the ready token"}}')
            assert response.http_version == "HTTP/2"
            assert response.status_code == 200, response.text

        records = mock.notifications(token=device)
        assert [record["payload"]["aps"]["alert"] for record in records] == ["from testcontainers", "with the ready token"]
        assert all(record["status"] == 200 and record["auth"]["teamId"] == "DEMOTEAM01" for record in records)


def test_own_team_and_key(engine, image):
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    device = "d2" * 32
    with ApnsMockContainer(image, team_id="TEAMTC0001", key_id="KEYTC00001", key_pem=pem,
                           topics=["com.example.tc"], environment="production", admin_token="s3cret") as mock:
        assert mock.key_pem() == pem
        result = push_with_aioapns(mock, pem, device, "own key")
        assert result.is_successful, (result.status, result.description)
        # A topic the team does not own.
        mock.topics = ["com.example.app"]
        refused = push_with_aioapns(mock, pem, "d3" * 32, "not ours")
        assert str(refused.status) == "400" and refused.description == "TopicDisallowed"

        records = mock.admin().wait_for(token=device, count=1, timeout=5)  # the admin token is sent
        auth = records[0]["auth"]
        assert (auth["method"], auth["teamId"], auth["keyId"]) == ("token", "TEAMTC0001", "KEYTC00001")
        assert records[0]["environment"] == "production"
        assert records[0]["topic"] == "com.example.tc"
