"""Sends pushes through apns-mock with kalyke-apns (httpx2 over HTTP/2), unmodified (see
driver_common for the interface).

kalyke has no host, port or CA option: it posts to https://api.sandbox.push.apple.com (port 443)
with httpx2's default TLS context. So the driver resolves Apple's names to the mock
(driver_common.redirect_apple_hosts; or the mock's CONNECT proxy with --proxy, through
HTTPS_PROXY, which httpx2 honours) and trusts the mock's CA through SSL_CERT_FILE, which
httpx2 reads. Token auth: ApnsClient (its `iat` is a string of digits). Certificate auth:
VoIPCertificateClient, VoIP pushes only (topic <bundle>.voip). Every push opens a new
connection; success returns the apns-id; errors surface as exceptions named after the reason
whose `error` dict holds the rest of the body (the 410 timestamp); the status is not exposed.
"""
import asyncio
import warnings

import driver_common as common
from kalyke import ApnsClient, ApnsConfig, Payload, PayloadAlert, VoIPApnsConfig, VoIPCertificateClient
from kalyke.exceptions import ApnsProviderException


async def run(args):
    if args.auth == "token":
        client = ApnsClient(use_sandbox=True, team_id=args.team, auth_key_id=args.key_id, auth_key_filepath=args.key)
        config = ApnsConfig(topic=args.topic)
        payload = Payload(alert=PayloadAlert(body=common.alert_text("kalyke")))
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            client = VoIPCertificateClient(use_sandbox=True, auth_key_filepath=args.cert, key_filepath=args.cert_key)
        config = VoIPApnsConfig(topic=args.topic + ".voip")
        payload = {"aps": {"alert": common.alert_text("kalyke")}}
    results = []
    for device in args.device:
        try:
            apns_id = await client.send_message(device_token=device, payload=payload, apns_config=config)
            results.append(common.result(device, True, apns_id=apns_id))
        except ApnsProviderException as error:
            results.append(common.result(device, False, reason=type(error).__name__,
                                         timestamp=error.error.get("timestamp")))
        except Exception as error:  # noqa: BLE001 - reported, the test decides
            results.append(common.result(device, False, error=common.describe(error)))
    return results


def main():
    args = common.parse_arguments(__doc__)
    common.reach_apple_hosts(args)
    common.trust_ca_through_environment(args.ca)
    results = asyncio.run(asyncio.wait_for(run(args), timeout=args.timeout))
    common.emit("kalyke", "kalyke-apns", args, results)


main()
