# The README's Python example: push with your usual client (here aioapns), then ask the mock.
import asyncio, os, ssl
from aioapns import APNs, NotificationRequest
from aioapns.connection import APNsDevelopmentClientProtocol, APNsTLSClientProtocol
from apns_mock import AdminClient

def test_the_service_sends_a_welcome_push():
    admin = AdminClient(os.environ["MOCK_ADMIN_URL"])  # e.g. http://127.0.0.1:2198
    admin.reset()
    token = "a1" * 32

    # What your service does, with its own client: aioapns, pointed at the mock.
    APNsDevelopmentClientProtocol.APNS_SERVER = "127.0.0.1"
    APNsTLSClientProtocol.APNS_PORT = int(os.environ["MOCK_APNS_PORT"])
    async def send():
        client = APNs(key=open(os.environ["MOCK_KEY_FILE"]).read(), key_id="DEMOKEY001", team_id="DEMOTEAM01",
                      topic="com.example.app", use_sandbox=True,
                      ssl_context=ssl.create_default_context(cafile=os.environ["MOCK_CA_FILE"]))
        await client.send_notification(NotificationRequest(
            device_token=token, message={"aps": {"alert": {"title": "Welcome"}}}))
        client.pool.close()
    asyncio.run(send())

    [push] = admin.wait_for(token=token, count=1, timeout=5)
    assert push["payload"]["aps"]["alert"]["title"] == "Welcome"
    assert push["headers"]["apns-topic"] == "com.example.app"
    assert push["pushType"] == "alert"  # aioapns sends no apns-push-type; the mock reads alert
