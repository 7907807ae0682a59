"""Sends pushes through apns-mock with pyapns-client (httpx over HTTP/2), unmodified (see
driver_common for the interface).

pyapns-client takes a CA file (root_cert_path) but no host: in 'dev' mode it dials
https://api.development.push.apple.com:443, which the driver resolves to the mock
(driver_common.redirect_apple_hosts), or reaches through the mock's CONNECT proxy with --proxy
(HTTPS_PROXY, which its httpx client honours). Token auth only. Errors surface as exceptions carrying the
status and apns-id (push() returns nothing on success); UnregisteredException carries the 410
timestamp. The token's `iat` is time.time(), a decimal number. Its httpx client keeps no idle
connection (max_keepalive_connections=0), so every push opens a new one. On
ExpiredProviderToken (an APNSServerException) it tries three times in all, each on a new
connection with the same token (it signs a new one only after 45 minutes).
"""
import driver_common as common
from pyapns_client import APNSClient, IOSNotification, IOSPayload, IOSPayloadAlert
from pyapns_client.exceptions import APNSException, UnregisteredException


def main():
    args = common.parse_arguments(__doc__)
    common.reach_apple_hosts(args)
    if args.auth != "token":
        raise SystemExit("pyapns-client supports token auth only")
    client = APNSClient(mode=APNSClient.MODE_DEV, root_cert_path=args.ca, auth_key_path=args.key,
                        auth_key_id=args.key_id, team_id=args.team)
    results = []
    for device in args.device:
        payload = IOSPayload(alert=IOSPayloadAlert(body=common.alert_text("pyapns-client")))
        notification = IOSNotification(payload=payload, topic=args.topic, push_type=IOSNotification.PUSH_TYPE_ALERT)
        try:
            client.push(notification=notification, device_token=device)
            results.append(common.result(device, True))
        except UnregisteredException as error:
            results.append(common.result(device, False, error.status_code, "Unregistered", error.apns_id, error.timestamp))
        except APNSException as error:
            reason = type(error).__name__.removesuffix("Exception")
            results.append(common.result(device, False, error.status_code, reason, error.apns_id))
        except Exception as error:  # noqa: BLE001 - reported, the test decides
            results.append(common.result(device, False, error=common.describe(error)))
    client.close()
    common.emit("pyapns-client", "pyapns-client", args, results)


main()
