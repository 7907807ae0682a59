"""Sends pushes through apns-mock with apns2-up (PyPI's maintained fork of PyAPNs2, on hyper-up),
unmodified (see driver_common for the interface).

apns2-up has no host or CA option for token auth: it dials api.development.push.apple.com:443
(sandbox) and trusts hyper's bundled CA file plus OpenSSL's default paths. So the driver resolves
Apple's names to the mock (driver_common.redirect_apple_hosts) and trusts the mock's CA through
SSL_CERT_FILE. Certificate auth takes one file holding certificate and key. Errors surface as
exceptions named after the reason (no HTTP status); Unregistered carries the 410 timestamp. The
token's `iat` is time.time(), a decimal number, and is renewed only after token_lifetime (45 min).
"""
import driver_common as common
from apns2.client import APNsClient
from apns2.credentials import CertificateCredentials, TokenCredentials
from apns2.errors import APNsException, Unregistered
from apns2.payload import Payload


def main():
    args = common.parse_arguments(__doc__)
    common.redirect_apple_hosts(args.port)
    common.trust_ca_through_environment(args.ca)
    if args.auth == "token":
        credentials = TokenCredentials(auth_key_path=args.key, auth_key_id=args.key_id, team_id=args.team)
    else:
        credentials = CertificateCredentials(common.combined_pem(args.cert, args.cert_key))
    client = APNsClient(credentials, use_sandbox=True)
    results = []
    for device in args.device:
        try:
            client.send_notification(device, Payload(alert=common.alert_text("apns2-up")), topic=args.topic)
            results.append(common.result(device, True))
        except Unregistered as error:
            results.append(common.result(device, False, reason="Unregistered", timestamp=error.timestamp))
        except APNsException as error:
            results.append(common.result(device, False, reason=type(error).__name__))
        except Exception as error:  # noqa: BLE001 - reported, the test decides
            results.append(common.result(device, False, error=common.describe(error)))
    common.emit("apns2-up", "apns2-up", args, results)


main()
