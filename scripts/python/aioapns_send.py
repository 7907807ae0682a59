"""Sends two pushes through apns-mock with aioapns (token auth), printing the results as JSON.

Usage: aioapns_send.py PORT CA_PEM KEY_P8 TEAM_ID KEY_ID DEVICE_TOKEN
The first push is valid; the second goes to a malformed device token and must be refused.
aioapns offers no ALPN and matches responses by the apns-id it sends.
"""
import asyncio
import json
import ssl
import sys
import uuid

from aioapns import APNs, NotificationRequest
from aioapns.connection import APNsDevelopmentClientProtocol, APNsTLSClientProtocol


async def main() -> None:
    port, ca, key_path, team, kid, device = sys.argv[1:7]
    APNsDevelopmentClientProtocol.APNS_SERVER = "localhost"
    APNsTLSClientProtocol.APNS_PORT = int(port)
    with open(key_path) as handle:
        key = handle.read()
    client = APNs(
        key=key, key_id=kid, team_id=team, topic="com.example.app", use_sandbox=True,
        ssl_context=ssl.create_default_context(cafile=ca),
    )
    results = []
    for token in (device, "abc"):
        apns_id = str(uuid.uuid4())
        request = NotificationRequest(
            device_token=token, message={"aps": {"alert": "hello from aioapns"}}, notification_id=apns_id
        )
        result = await client.send_notification(request)
        results.append({
            "sentApnsId": apns_id, "apnsId": result.notification_id,
            "status": result.status, "reason": result.description,
        })
    print(json.dumps(results))


asyncio.run(asyncio.wait_for(main(), timeout=30))
