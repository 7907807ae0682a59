"""Sends pushes through apns-mock with aapns (h2 3.x), unmodified (see driver_common for the
interface). aapns needs h2 < 4, so it lives in its own venv (.venv-aapns).

aapns is certificate-only. It is pointed at the mock through its own Server target (host, port,
ca_file) and takes one file holding certificate and key. Its own targets dial
api.development.push.apple.com (sandbox) or api.push.apple.com. Success returns the apns-id;
errors raise a ResponseError subclass named after the reason carrying the apns-id but neither the
status nor the 410 timestamp (it drops the body's other members).
"""
import asyncio

import driver_common as common
from aapns.api import Server
from aapns.errors import ResponseError
from aapns.models import Alert, Notification


async def run(args):
    if args.auth != "certificate":
        raise SystemExit("aapns supports certificate auth only")
    server = Server(client_cert_path=common.combined_pem(args.cert, args.cert_key), host="127.0.0.1",
                    port=args.port, ca_file=args.ca, pool_size=1)
    client = await server.create_client()
    results = []
    try:
        for device in args.device:
            notification = Notification(alert=Alert(body=common.alert_text("aapns")))
            try:
                apns_id = await client.send_notification(device, notification, topic=args.topic)
                results.append(common.result(device, True, apns_id=apns_id))
            except ResponseError as error:
                results.append(common.result(device, False, reason=error.reason, apns_id=error.apns_id))
            except Exception as error:  # noqa: BLE001 - reported, the test decides
                results.append(common.result(device, False, error=common.describe(error)))
    finally:
        await client.close()
    return results


def main():
    args = common.parse_arguments(__doc__)
    results = asyncio.run(asyncio.wait_for(run(args), timeout=args.timeout))
    common.emit("aapns", "aapns", args, results)


main()
