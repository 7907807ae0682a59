"""Sends pushes through apns-mock with aioapns, unmodified (see driver_common for the interface).

aioapns is pointed at the mock through its protocol classes' APNS_SERVER / APNS_PORT attributes
and an ssl_context trusting the mock's CA. Token auth takes the key's PEM text; certificate auth
one file holding certificate and key. aioapns answers every push with a NotificationResult (it
raises nothing for an APNs error) carrying status, reason and, for 410, the timestamp; it signs a
new token only when its own is 30 minutes old, never because APNs said ExpiredProviderToken.
"""
import asyncio
import ssl
import uuid

import driver_common as common
from aioapns import APNs, NotificationRequest
from aioapns.connection import APNsDevelopmentClientProtocol, APNsTLSClientProtocol


async def run(args):
    APNsDevelopmentClientProtocol.APNS_SERVER = "127.0.0.1"
    APNsTLSClientProtocol.APNS_PORT = args.port
    context = ssl.create_default_context(cafile=args.ca)
    if args.auth == "token":
        with open(args.key) as handle:
            key = handle.read()
        client = APNs(key=key, key_id=args.key_id, team_id=args.team, topic=args.topic, use_sandbox=True,
                      ssl_context=context)
    else:
        client = APNs(client_cert=common.combined_pem(args.cert, args.cert_key), topic=args.topic,
                      use_sandbox=True, ssl_context=context)
    results = []
    for device in args.device:
        request = NotificationRequest(
            device_token=device, message={"aps": {"alert": common.alert_text("aioapns")}},
            notification_id=str(uuid.uuid4()))
        try:
            answer = await client.send_notification(request)
            results.append(common.result(device, answer.is_successful, answer.status, answer.description, answer.notification_id,
                                         answer.timestamp))
        except Exception as error:  # noqa: BLE001 - reported, the test decides
            results.append(common.result(device, False, error=common.describe(error)))
    return results


def main():
    args = common.parse_arguments(__doc__)
    results = asyncio.run(asyncio.wait_for(run(args), timeout=args.timeout))
    common.emit("aioapns", "aioapns", args, results)


main()
