#!/usr/bin/env python3
"""Drives the inbox page (GET / on apns-mock's admin listener) in headless Chromium with selenium,
as a person would: pushes are sent with curl while the page is open, and the page must show them.

Run by Tests/APNSMockTests/InboxPageTests.swift against a mock in its own, unprivileged process (selenium from
.venv-browser/, Debian's chromium and chromium-driver; see scripts/setup). Prints one JSON
document: {"checks": [{"name", "ok", "detail"}...], "console": [...]}; the Swift test asserts on
it. Screenshots go to --screenshots.

  inbox_check.py --admin http://127.0.0.1:PORT --apns https://localhost:PORT --ca ca.pem \
                 --authorization 'bearer JWT' --screenshots DIR [--scenario truth]

--scenario truth checks that the page tells the truth at a glance, against a mock whose ring holds
15,000 records: the header's counts equal the cards' after a mixed run, after Clear and after
POST /v1/reset; after 20,000 pushes (h2load) it says how many older records it does not show and
how many were evicted, pages back with "Load older", and draws answers per second by outcome.
Screenshots: records-0.png, records-10.png, records-20000.png, older.png.

--scenario teams adds a team at run time (POST /v1/teams, with a P-256 key made by openssl) and
checks that the page opened as /?team=<teamId> shows only that team's records and counts, names the
team in its header, offers every team in its picker, and that "all teams" and another team reload
the page for them. Screenshot: team.png.
"""
import argparse
import base64
import json
import os
import re
import tempfile
import urllib.error
import urllib.request
import socket
import ssl
import struct
import subprocess
import sys
import time
import traceback
from urllib.parse import urlparse

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

TOKEN_A = "ab" * 32
TOKEN_B = "cd" * 32
TOKEN_C = "ef" * 32

checks = []


def check(name, ok, detail=""):
    checks.append({"name": name, "ok": bool(ok), "detail": str(detail)[:2000]})


def push(args, token, payload, headers=None):
    """One push with curl, as the Swift tests' Curl.send sends it; returns (status, body)."""
    headers = dict(headers or {})
    headers.setdefault("apns-topic", "com.example.app")
    headers.setdefault("authorization", args.authorization)
    command = ["curl", "-sS", "--http2", "--cacert", args.ca, "-X", "POST", "--max-time", "20",
               "-w", "\n%{http_code}", "--data-binary", "@-"]
    for name, value in sorted(headers.items()):
        command += ["-H", f"{name}: {value}"]
    command.append(f"{args.apns}/3/device/{token}")
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    result = subprocess.run(command, input=data, capture_output=True, timeout=30)
    text = result.stdout.decode(errors="replace")
    body, _, status = text.rpartition("\n")
    return int(status or 0), body


def request(args, url, method="POST", headers=None, payload=None):
    """Any HTTP/2 request with curl (channel management); returns (status, headers, body)."""
    command = ["curl", "-sS", "--http2", "--cacert", args.ca, "-i", "-X", method, "--max-time", "20",
               "-H", f"authorization: {args.authorization}"]
    for name, value in sorted((headers or {}).items()):
        command += ["-H", f"{name}: {value}"]
    if payload is not None:
        command += ["--data-binary", json.dumps(payload)]
    command.append(url)
    text = subprocess.run(command, capture_output=True, timeout=30).stdout.decode(errors="replace")
    head, _, body = text.partition("\r\n\r\n")
    lines = head.split("\r\n")
    status = int(lines[0].split(" ")[1]) if lines and " " in lines[0] else 0
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return status, fields, body


def refused_burst(args, count):
    """Opens `count` streams at once on a new connection, as node-apn does before it has read the
    server's SETTINGS: every HEADERS frame, then every body. On a cold token connection APNs (and the
    mock) allows one stream until a token is accepted; the others are refused (RST_STREAM
    REFUSED_STREAM). Hand-made HTTP/2 (HPACK literals without indexing); returns the stream ids the
    server reset with REFUSED_STREAM."""
    url = urlparse(args.apns)
    context = ssl.create_default_context(cafile=args.ca)
    context.set_alpn_protocols(["h2"])

    def frame(kind, flags, stream, payload):
        return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload

    def literal(name, value):
        name, value = name.encode(), value.encode()
        return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value if len(value) < 127 else (
            b"\x00" + bytes([len(name)]) + name + b"\x7f" + _varint(len(value) - 127) + value)

    def _varint(number):
        out = b""
        while number >= 128:
            out += bytes([(number & 0x7F) | 0x80])
            number >>= 7
        return out + bytes([number])

    body = json.dumps({"aps": {"alert": "refused?"}}).encode()
    streams = [1 + 2 * index for index in range(count)]
    data = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"")
    for stream in streams:
        block = b"".join(literal(name, value) for name, value in [
            (":method", "POST"), (":scheme", "https"), (":path", f"/3/device/{TOKEN_C}"),
            (":authority", url.hostname), ("apns-topic", "com.example.app"), ("authorization", args.authorization)])
        data += frame(1, 0x4, stream, block)
    for stream in streams:
        data += frame(0, 0x1, stream, body)
    refused = []
    with socket.create_connection((url.hostname, url.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=url.hostname) as tls:
            tls.sendall(data)
            received = b""
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and len(refused) < count - 1:
                try:
                    chunk = tls.recv(65536)
                except socket.timeout:
                    break
                if not chunk:
                    break
                received += chunk
                refused, offset = [], 0
                while offset + 9 <= len(received):
                    length = int.from_bytes(received[offset:offset + 3], "big")
                    kind, stream = received[offset + 3], int.from_bytes(received[offset + 5:offset + 9], "big") & 0x7FFFFFFF
                    if offset + 9 + length > len(received):
                        break
                    if kind == 3 and received[offset + 9:offset + 13] == b"\x00\x00\x00\x07":
                        refused.append(stream)
                    offset += 9 + length
    return refused


def admin(args, method, path, body=None):
    """A request to the admin API; the answer's JSON (None when it has no body)."""
    data = None if body is None else json.dumps(body).encode()
    request_ = urllib.request.Request(args.admin + path, data=data, method=method,
                                      headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(request_, timeout=20) as response:
        text = response.read()
    return json.loads(text) if text else None


def h2load(args, count, token, clients=8):
    """`count` pushes with h2load (one stream at a time per connection: a token connection allows
    one until its first token is accepted); h2load's summary."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as payload:
        json.dump({"aps": {"alert": {"title": "Load", "body": "h2load"}}}, payload)
    try:
        result = subprocess.run(["h2load", "-n", str(count), "-c", str(clients), "-m", "1", "-t", "1",
                                 "-d", payload.name, "-H", "apns-topic: com.example.app",
                                 "-H", f"authorization: {args.authorization}", f"{args.apns}/3/device/{token}"],
                                capture_output=True, timeout=120)
    finally:
        os.unlink(payload.name)
    return result.stdout.decode(errors="replace")


def number(text):
    """A count as the page shows it (1,234), or None."""
    digits = re.sub(r"[^0-9]", "", text or "")
    return int(digits) if digits else None


def page_counts(driver):
    """The header's counts and what the cards show, read in one go."""
    return driver.execute_script("""
        const cards = [...document.querySelectorAll('#feed .record')];
        const text = (id) => document.getElementById(id).textContent;
        return {accepted: text('count-accepted'), rejected: text('count-rejected'), shown: text('count-shown'),
                basis: text('count-basis'),
                cardsAccepted: cards.filter((c) => !c.classList.contains('rejected')).length,
                cardsRejected: cards.filter((c) => c.classList.contains('rejected')).length,
                seqs: cards.map((c) => Number(c.dataset.seq))};""")


def counts_match(driver, accepted, rejected):
    """The header says `accepted` and `rejected`, and the cards are that many of each."""
    counts = page_counts(driver)
    return (number(counts["accepted"]) == accepted and number(counts["rejected"]) == rejected
            and counts["cardsAccepted"] == accepted and counts["cardsRejected"] == rejected) and counts


def wait_for(driver, seconds, predicate):
    """predicate(driver) until truthy; returns (value, seconds taken) or (None, None)."""
    started = time.monotonic()
    try:
        value = WebDriverWait(driver, seconds, poll_frequency=0.05).until(lambda d: predicate(d))
        return value, time.monotonic() - started
    except TimeoutException:
        return None, None


def record_with(driver, css, text):
    # The page re-renders its lists (faults, devices) as they change: an element found a moment
    # ago may be gone, which is "not there yet" for a wait.
    try:
        for element in driver.find_elements(By.CSS_SELECTOR, css):
            if text in element.text:
                return element
    except StaleElementReferenceException:
        pass
    return None


def text_of_record(driver, css, text):
    """The text of the first element matching css that contains text, read in one go (None: none)."""
    try:
        element = record_with(driver, css, text)
        return element.text if element is not None else None
    except StaleElementReferenceException:
        return None


def click_in_record(driver, css, text, button_css="button"):
    """Clicks a button inside the element matching css that contains text, looking it up again
    whenever the page re-rendered the list in between; whether it clicked."""
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        element = record_with(driver, css, text)
        if element is not None:
            try:
                element.find_element(By.CSS_SELECTOR, button_css).click()
                return True
            except StaleElementReferenceException:
                pass
        time.sleep(0.05)
    return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--admin", required=True)
    parser.add_argument("--apns", required=True)
    parser.add_argument("--channels", required=True, help="the sandbox channel-management listener's URL")
    parser.add_argument("--ca", required=True)
    parser.add_argument("--authorization", required=True)
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--admin-token", help="the mock's admin.token: check only the page's token prompt")
    parser.add_argument("--scenario", choices=["page", "truth", "teams"], default="page",
                        help="truth: the counts, older records and rate chart (a mock with recording.capacity 15000); "
                             "teams: the page for one team (/?team=)")
    args = parser.parse_args()
    os.makedirs(args.screenshots, exist_ok=True)

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1100", "--force-device-scale-factor=1", "--lang=en-US"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option("prefs", {"download.default_directory": args.screenshots})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(20)
    try:
        if args.admin_token:
            run_with_token(driver, args)
        elif args.scenario == "truth":
            run_truth(driver, args)
        elif args.scenario == "teams":
            run_teams(driver, args)
        else:
            run(driver, args)
    finally:
        console = driver.get_log("browser")
        driver.quit()
    severe = [entry for entry in console if entry.get("level") == "SEVERE"]
    if args.admin_token:
        # The requests made before the token was given are refused, and Chromium logs each 401.
        severe = [entry for entry in severe if "status of 401" not in entry.get("message", "")]
    if args.scenario == "teams":
        # The page for a team the mock does not have: each of its calls is refused 404, as it should be.
        severe = [entry for entry in severe
                  if not ("team=NOTATEAM00" in entry.get("message", "") and "status of 404" in entry.get("message", ""))]
    check("the page logs no console errors", not severe, json.dumps(severe)[:1500])
    print(json.dumps({"checks": checks, "console": console}))


def run(driver, args):
    driver.get(args.admin + "/")
    status, took = wait_for(driver, 10, lambda d: d.find_element(By.ID, "stream-status").text == "live")
    check("the page connects to the event stream", status, driver.find_element(By.ID, "stream-status").text)
    # Errors thrown by the page's own script, beside what the console log shows.
    driver.execute_script("window.__errors = []; window.addEventListener('error', e => window.__errors.push(String(e.message)));")

    # An alert banner: title, subtitle, body, badge, sound, thread, interruption level.
    alert = {"aps": {"alert": {"title": "Gate 12", "subtitle": "Flight 42", "body": "Boarding now"}, "badge": 3,
                     "sound": "default", "thread-id": "trip-1", "interruption-level": "time-sensitive",
                     "relevance-score": 0.8}}
    code, body = push(args, TOKEN_A, alert)
    check("the alert push is accepted", code == 200, f"{code} {body}")
    banner, took = wait_for(driver, 2, lambda d: record_with(d, ".record.banner", "Gate 12"))
    check("the banner appears within two seconds", banner, f"after {took} s")
    if banner:
        check("the banner shows title, subtitle and body",
              banner.find_element(By.CSS_SELECTOR, ".title").text == "Gate 12"
              and banner.find_element(By.CSS_SELECTOR, ".subtitle").text == "Flight 42"
              and banner.find_element(By.CSS_SELECTOR, ".body").text == "Boarding now", banner.text)
        check("the banner shows badge, sound, level and thread",
              all(text in banner.text for text in ("3", "default", "time-sensitive", "trip-1", "relevance 0.8")),
              banner.text)
        check("the banner names the app", "COM.EXAMPLE.APP" in banner.text.upper(), banner.text)

    # The same thread again, with a localized body: stacked under the thread.
    code, _ = push(args, TOKEN_A, {"aps": {"alert": {"title": "Gate 14", "loc-key": "GATE_CHANGE",
                                                     "loc-args": ["14", "B"]}, "thread-id": "trip-1"}})
    stacked, _ = wait_for(driver, 2, lambda d: record_with(d, ".group .record.banner", "Gate 14"))
    check("a second push of the thread is stacked with the first", stacked and code == 200,
          driver.find_element(By.ID, "feed").text[:500])
    if stacked:
        check("a loc-key is shown with its arguments", "GATE_CHANGE" in stacked.text and "14, B" in stacked.text,
              stacked.text)

    # A rejection in the same stream: status, reason and its explanation.
    code, body = push(args, "zz", {"aps": {"alert": "bad token"}})
    check("the bad-token push is refused", code == 400, f"{code} {body}")
    rejection, took = wait_for(driver, 2, lambda d: record_with(d, ".record.rejected", "BadDeviceToken"))
    check("the rejection shows its reason within two seconds", rejection, f"after {took} s")
    if rejection:
        explanation = rejection.find_element(By.CSS_SELECTOR, ".explanation").text
        check("the rejection explains its reason", "malformed" in explanation and "400" in rejection.text,
              rejection.text)

    # A background push is a quiet row; a Live Activity a card with its content state.
    code, body = push(args, TOKEN_B, {"aps": {"content-available": 1}, "sync": True},
                      {"apns-push-type": "background", "apns-priority": "5"})
    quiet, _ = wait_for(driver, 2, lambda d: record_with(d, ".record.quiet", "silent push"))
    check("a background push is a quiet row", quiet and code == 200, f"{code} {body}")
    activity_payload = {"aps": {"timestamp": int(time.time()), "event": "update",
                                "content-state": {"score": "2-1", "period": "2nd half"}}}
    code, body = push(args, TOKEN_B, activity_payload,
                      {"apns-push-type": "liveactivity", "apns-topic": "com.example.app.push-type.liveactivity"})
    card, _ = wait_for(driver, 2, lambda d: record_with(d, ".record.activity", "2-1"))
    check("a Live Activity is a card with event and content-state",
          card and code == 200 and "update" in card.text.lower() and "2nd half" in card.text, f"{code} {body}")

    # Streams refused before authentication are no records: the page warns, naming connection and cause.
    refused = refused_burst(args, 3)
    check("a burst of three streams on a cold connection has two refused", len(refused) == 2, refused)
    warning, took = wait_for(driver, 3, lambda d: d.find_element(By.ID, "refused-notice").is_displayed()
                             and "before authentication" in d.find_element(By.ID, "refused-notice").text
                             and d.find_element(By.ID, "refused-notice"))
    check("the page warns about refused streams within three seconds", warning, f"after {took} s")
    if warning:
        check("the warning names the connection, the count and the cause",
              "Connection " in warning.text and "2 streams refused before authentication" in warning.text, warning.text)
    counted, _ = wait_for(driver, 3, lambda d: d.find_element(By.ID, "count-refused").text == "2")
    check("the header counts the refused streams", counted, driver.find_element(By.ID, "count-refused").text)
    driver.save_screenshot(os.path.join(args.screenshots, "refused.png"))

    # A channel and a broadcast on it: grouped under the channel.
    status, fields, body = request(args, f"{args.channels}/1/apps/com.example.app/channels",
                                   payload={"message-storage-policy": 1, "push-type": "LiveActivity"})
    channel = fields.get("apns-channel-id", "")
    check("a channel is created", status == 201 and channel, f"{status} {body}")
    status, _, body = request(args, f"{args.apns}/4/broadcasts/apps/com.example.app",
                              headers={"apns-channel-id": channel, "apns-push-type": "liveactivity",
                                       "apns-expiration": "0", "apns-priority": "10"},
                              payload={"aps": {"event": "update", "timestamp": int(time.time()),
                                               "content-state": {"score": "3-1"}}})
    check("a broadcast on it is accepted", status == 200, f"{status} {body}")
    broadcast, _ = wait_for(driver, 2, lambda d: record_with(d, ".group[data-kind='channel'] .record.broadcast", "3-1"))
    check("the broadcast is shown in its channel's group", broadcast,
          driver.find_element(By.ID, "feed").text[:600])
    if broadcast:
        group = broadcast.find_element(By.XPATH, "./ancestor::div[contains(@class,'group')]")
        check("the channel's group names the channel and holds its creation", channel in group.text
              and "2 notifications" in group.text, group.text)

    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(os.path.join(args.screenshots, "inbox.png"))

    # Hostile content stays text.
    hostile_title = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'
    deep = {}
    node = deep
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    hostile = {"aps": {"alert": {"title": hostile_title, "body": "A" * 3000}}, "deep": deep}
    code, body = push(args, TOKEN_C, hostile)
    shown, _ = wait_for(driver, 2, lambda d: record_with(d, ".record.banner", "<script>"))
    check("a hostile payload is accepted and shown", shown and code == 200, f"{code} {body}")
    if shown:
        feed = driver.find_element(By.ID, "feed")
        check("no element of the payload became markup",
              not feed.find_elements(By.CSS_SELECTOR, "img, script, iframe")
              and driver.execute_script("return window.__pwned === undefined"),
              feed.get_attribute("outerHTML")[:800])
        check("the title is shown as text", shown.find_element(By.CSS_SELECTOR, ".title").text == hostile_title,
              shown.find_element(By.CSS_SELECTOR, ".title").text)
        body_text = shown.find_element(By.CSS_SELECTOR, ".body").text
        check("a huge body is truncated", 0 < len(body_text) <= 401 and body_text.endswith("…"), len(body_text))
        shown.click()
        payload, _ = wait_for(driver, 2, lambda d: d.find_element(By.ID, "detail-payload").text or None)
        detail = driver.find_element(By.ID, "detail")
        check("the hostile payload's detail view is text too",
              payload and "<script>" in payload and not detail.find_elements(By.CSS_SELECTOR, "img, script")
              and driver.execute_script("return window.__pwned === undefined"), (payload or "")[:300])
        driver.find_element(By.ID, "detail-close").click()
    driver.save_screenshot(os.path.join(args.screenshots, "hostile.png"))

    # The detail view of the first banner, then unregister its token from there: the next push is 410.
    # The thread's stack shows its newest banner; open it to reach the first.
    for toggle in driver.find_elements(By.CSS_SELECTOR, ".group .group-head button"):
        if toggle.text == "Show all":
            toggle.click()
    banner = record_with(driver, ".record.banner", "Gate 12")
    check("an opened stack shows every banner of the thread", banner)
    if banner:
        driver.execute_script("arguments[0].scrollIntoView()", banner)
        banner.click()
        shown, _ = wait_for(driver, 2, lambda d: d.find_element(By.ID, "detail").is_displayed()
                            and "DEMOTEAM01" in d.find_element(By.ID, "detail").text)
        detail = driver.find_element(By.ID, "detail")
        text = detail.text
        check("the detail view shows headers, payload, auth, environment, connection and timing",
              shown and all(part in text for part in ("apns-topic", "com.example.app", "Gate 12", "DEMOTEAM01",
                                                        "DEMOKEY001", "integer", "sandbox", "connection", "stream",
                                                        "received at")), text[:1500])
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(os.path.join(args.screenshots, "detail.png"))
        detail.find_element(By.CSS_SELECTOR, "button[data-action='unregister'][data-reason='Unregistered']").click()
        done, _ = wait_for(driver, 3, lambda d: "410" in d.find_element(By.ID, "detail-message").text)
        check("the page unregisters the token", done, driver.find_element(By.ID, "detail-message").text)
        driver.find_element(By.ID, "detail-close").click()
    code, body = push(args, TOKEN_A, {"aps": {"alert": "are you there?"}})
    check("the next push to the unregistered token is 410 Unregistered", code == 410 and "Unregistered" in body,
          f"{code} {body}")
    gone, _ = wait_for(driver, 2, lambda d: record_with(d, ".record.rejected", "Unregistered"))
    check("the 410 shows up on the page", gone)

    # A fault rule from the form (its reasons come from /v1/reasons) answers the next push.
    Select(driver.find_element(By.ID, "fault-reason")).select_by_value("TooManyRequests")
    explanation = driver.find_element(By.ID, "fault-explanation").text
    check("the fault form explains the chosen reason", "Too many requests" in explanation, explanation)
    driver.find_element(By.ID, "fault-topic").send_keys("com.example.app")
    driver.find_element(By.ID, "fault-times").send_keys("1")
    driver.find_element(By.ID, "fault-add").click()
    listed, _ = wait_for(driver, 3, lambda d: record_with(d, "#fault-list .fault", "TooManyRequests"))
    check("the added fault is listed", listed, driver.find_element(By.ID, "fault-list").text)
    code, body = push(args, TOKEN_B, {"aps": {"alert": "fault?"}})
    check("the fault answers the next push", code == 429 and "TooManyRequests" in body, f"{code} {body}")
    faulted, _ = wait_for(driver, 2, lambda d: record_with(d, ".record.rejected", "TooManyRequests"))
    check("the fault's answer shows on the page, marked", faulted and "fault" in faulted.text,
          faulted.text if faulted else "")
    code, body = push(args, TOKEN_B, {"aps": {"alert": "after the fault"}})
    check("the fault fired once", code == 200, f"{code} {body}")
    emptied, _ = wait_for(driver, 3, lambda d: "No fault rules" in d.find_element(By.ID, "fault-list").text)
    check("the fault list follows: the rule is gone once it fired", emptied, driver.find_element(By.ID, "fault-list").text)

    # A connection action with parameters: the streams and durationMs fields show for
    # shrink-streams only, and the rule is listed with them; removing it from the list removes it.
    check("the streams field is hidden until shrink-streams is chosen",
          not driver.find_element(By.ID, "fault-maxConcurrentStreams").is_displayed())
    Select(driver.find_element(By.ID, "fault-reason")).select_by_value("")
    Select(driver.find_element(By.ID, "fault-action")).select_by_value("shrink-streams")
    topic = driver.find_element(By.ID, "fault-topic")
    topic.clear()
    topic.send_keys("com.example.elsewhere")
    driver.find_element(By.ID, "fault-times").clear()
    driver.find_element(By.ID, "fault-maxConcurrentStreams").send_keys("3")
    driver.find_element(By.ID, "fault-duration").send_keys("500")
    driver.find_element(By.ID, "fault-add").click()
    shrink, _ = wait_for(driver, 3, lambda d: text_of_record(d, "#fault-list .fault", "shrink-streams"))
    check("a shrink-streams rule is added with its parameters",
          shrink is not None and "streams 3" in shrink and "for 500 ms" in shrink,
          shrink if shrink else driver.find_element(By.ID, "fault-message").text)
    if shrink is not None:
        check("the rule's remove button is clicked", click_in_record(driver, "#fault-list .fault", "shrink-streams"))
    removed, _ = wait_for(driver, 3, lambda d: "No fault rules" in d.find_element(By.ID, "fault-list").text)
    check("a rule removed from the list is gone", removed, driver.find_element(By.ID, "fault-list").text)
    Select(driver.find_element(By.ID, "fault-action")).select_by_value("")

    # Pause and resume: nothing is lost that the page would show.
    driver.find_element(By.ID, "pause").click()
    wait_for(driver, 2, lambda d: d.find_element(By.ID, "stream-status").text == "paused")
    push(args, TOKEN_B, {"aps": {"alert": {"title": "While paused"}}})
    time.sleep(0.5)
    check("nothing renders while paused", record_with(driver, ".record.banner", "While paused") is None)
    driver.find_element(By.ID, "pause").click()
    resumed, _ = wait_for(driver, 3, lambda d: record_with(d, ".record.banner", "While paused"))
    check("resume shows what arrived meanwhile", resumed)

    counts, _ = wait_for(driver, 3, lambda d: d.find_element(By.ID, "count-accepted").text not in ("–", "0")
                         and d.find_element(By.ID, "count-rejected").text not in ("–", "0"))
    check("the header counts accepted and rejected pushes", counts,
          driver.find_element(By.TAG_NAME, "header").text)
    errors = driver.execute_script("return window.__errors")
    check("the page's script threw nothing", not errors, errors)
    driver.save_screenshot(os.path.join(args.screenshots, "inbox-end.png"))


def run_truth(driver, args):
    """The counts equal the cards; older records are announced and paged back; the rate chart."""
    screenshots = args.screenshots
    driver.get(args.admin + "/")
    live, _ = wait_for(driver, 10, lambda d: d.find_element(By.ID, "stream-status").text == "live")
    check("the page connects to the event stream", live, driver.find_element(By.ID, "stream-status").text)
    driver.execute_script("window.__errors = []; window.addEventListener('error', e => window.__errors.push(String(e.message)));")

    # No records: zero counts, no older-records notice, an empty chart that says so.
    empty, _ = wait_for(driver, 5, lambda d: counts_match(d, 0, 0))
    check("with no records the counts are 0 and there are no cards", empty, page_counts(driver))
    check("with no records there is no older-records notice", not driver.find_element(By.ID, "older-notice").is_displayed(),
          driver.find_element(By.ID, "older-notice").text)
    chart = driver.find_element(By.ID, "rate-chart")
    measured, _ = wait_for(driver, 5, lambda d: int(d.find_element(By.ID, "rate-chart").get_attribute("data-samples") or 0) >= 1)
    check("the rate chart is there and samples with no requests", chart.is_displayed() and measured
          and "No answers" in driver.find_element(By.ID, "rate-legend").text, driver.find_element(By.ID, "rate-legend").text)
    driver.save_screenshot(os.path.join(screenshots, "records-0.png"))

    # A mixed run: 7 accepted, 3 rejected (2 BadDeviceToken, 1 BadPriority).
    codes = [push(args, TOKEN_A if index % 2 else TOKEN_B, {"aps": {"alert": {"title": f"Mixed {index}", "body": "a push"}}})[0]
             for index in range(1, 8)]
    codes += [push(args, "zz", {"aps": {"alert": "bad token"}})[0], push(args, "zz", {"aps": {"alert": "bad token"}})[0],
              push(args, TOKEN_A, {"aps": {"alert": "bad priority"}}, {"apns-priority": "7"})[0]]
    check("the mixed run is 7 accepted and 3 rejected", codes == [200] * 7 + [400] * 3, codes)
    matched, took = wait_for(driver, 5, lambda d: counts_match(d, 7, 3))
    check("after a mixed run the header's counts equal the cards' (7 accepted, 3 rejected)", matched,
          f"after {took} s: {page_counts(driver)}")
    stats = admin(args, "GET", "/v1/stats")
    accepted = admin(args, "GET", "/v1/notifications?outcome=accepted&limit=100")["notifications"]
    rejected = admin(args, "GET", "/v1/notifications?outcome=rejected&limit=100")["notifications"]
    check("the counts are the records' (GET /v1/stats and /v1/notifications agree)",
          stats["accepted"] == len(accepted) == 7 and stats["rejected"] == len(rejected) == 3,
          f"stats {stats['accepted']}/{stats['rejected']}, records {len(accepted)}/{len(rejected)}")
    check("the counts say since when", page_counts(driver)["basis"] == "since start", page_counts(driver)["basis"])
    updated, _ = wait_for(driver, 5, lambda d: d.find_element(By.CSS_SELECTOR, "#rate-legend li[data-outcome='accepted']")
                          if d.find_elements(By.CSS_SELECTOR, "#rate-legend li[data-outcome='BadDeviceToken']")
                          and d.find_elements(By.CSS_SELECTOR, "#rate-legend li[data-outcome='BadPriority']") else None)
    check("the chart's legend has accepted, BadDeviceToken and BadPriority", updated,
          driver.find_element(By.ID, "rate-legend").text)
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(os.path.join(screenshots, "records-10.png"))

    # Clear: no card and zero counts, also for a moment; then new pushes count from zero.
    driver.find_element(By.ID, "clear").click()
    cleared, took = wait_for(driver, 5, lambda d: counts_match(d, 0, 0))
    check("after Clear the counts are 0 and there are no cards", cleared, f"after {took} s: {page_counts(driver)}")
    check("after Clear the counts say since the Clear", "since Clear at" in page_counts(driver)["basis"],
          page_counts(driver)["basis"])
    since_start = driver.find_element(By.ID, "count-since-start").text
    check("after Clear the totals since start are labelled as such", since_start == "10 requests since start", since_start)
    codes = [push(args, TOKEN_A, {"aps": {"alert": "after clear 1"}})[0], push(args, TOKEN_B, {"aps": {"alert": "after clear 2"}})[0],
             push(args, "zz", {"aps": {"alert": "after clear 3"}})[0]]
    matched, took = wait_for(driver, 5, lambda d: counts_match(d, 2, 1))
    check("after Clear the counts equal the cards' (2 accepted, 1 rejected)", matched and codes == [200, 200, 400],
          f"{codes} after {took} s: {page_counts(driver)}")

    # A reset by someone else (a test's POST /v1/reset): the page drops what the mock forgot.
    admin(args, "POST", "/v1/reset")
    reset, took = wait_for(driver, 5, lambda d: counts_match(d, 0, 0))
    check("after POST /v1/reset the page drops the cards and the counts are 0", reset, f"after {took} s: {page_counts(driver)}")
    check("after POST /v1/reset the counts say since the reset", "since a reset at" in page_counts(driver)["basis"],
          page_counts(driver)["basis"])
    code, _ = push(args, TOKEN_A, {"aps": {"alert": "after reset"}})
    matched, _ = wait_for(driver, 5, lambda d: counts_match(d, 1, 0))
    check("after the reset a push is one card and one count", matched and code == 200, page_counts(driver))

    # 20,000 pushes in three phases (accepted; BadDeviceToken; a fault answering TooManyRequests or
    # resetting the stream), into a ring of 15,000: 5,000 are evicted.
    driver.find_element(By.ID, "clear").click()
    wait_for(driver, 5, lambda d: counts_match(d, 0, 0))
    samples_before = int(chart.get_attribute("data-samples") or 0)
    summaries = [h2load(args, 12000, TOKEN_A)]
    time.sleep(2)
    summaries.append(h2load(args, 4000, "zz"))
    time.sleep(2)
    faults = [admin(args, "POST", "/v1/faults", {"match": {}, "respond": {"reason": "TooManyRequests"}, "probability": 0.3}),
              admin(args, "POST", "/v1/faults", {"match": {}, "action": "reset", "probability": 0.05})]
    summaries.append(h2load(args, 4000, TOKEN_B))
    admin(args, "DELETE", "/v1/faults")
    check("h2load made 20,000 requests", all("requests: %d total" % n in text for n, text in zip((12000, 4000, 4000), summaries))
          and all(fault and fault.get("id") for fault in faults), " | ".join(line for text in summaries
                                                                            for line in text.splitlines() if "requests:" in line))
    stats = admin(args, "GET", "/v1/stats")
    check("the mock counted 20,000 requests and holds 15,000", stats["requests"] == 20000 and stats["recording"]["records"] == 15000,
          {"requests": stats["requests"], "recording": stats["recording"]})
    first = admin(args, "GET", "/v1/notifications?outcome=all&limit=1")["notifications"][0]["seq"]

    # Settled: the mock's counts in the header, 300 cards, and no new card for 1.5 s (the stream
    # may skip the very last records: it sends the page at most 1000 a second).
    last = {"seqs": None, "since": time.monotonic()}

    def settled(d):
        counts = page_counts(d)
        if counts["seqs"] != last["seqs"]:
            last.update(seqs=counts["seqs"], since=time.monotonic())
        return (number(counts["accepted"]) == stats["accepted"] and number(counts["rejected"]) == stats["rejected"]
                and counts["shown"] == "300" and time.monotonic() - last["since"] > 1.5) and counts
    counts, took = wait_for(driver, 15, settled)
    check("after 20,000 pushes the header has the mock's counts and the page shows the newest 300", counts,
          f"after {took} s: {page_counts(driver)} vs {stats['accepted']}/{stats['rejected']}")
    oldest = min(page_counts(driver)["seqs"])
    expected = oldest - first
    notice = driver.find_element(By.ID, "older-notice")
    text = notice.text
    check("the page says how many older records it does not show", notice.is_displayed()
          and f"{expected:,} older records not shown" in text, f"oldest shown {oldest}, first held {first}: {text}")
    check("the page says that 5,000 older records were evicted and are gone",
          "5,000 older records were evicted and are gone" in text and "15,000" in text, text)
    summary = driver.find_element(By.ID, "skip-notice").text
    skipped = 15000 - 300 - expected  # what the stream skipped among the newest (none when the page kept up)
    check("above the feed the page says what it shows of what the mock holds, and where the rest is",
          f"Showing 300 of the 15,000 records the mock holds: {expected:,} older than these" in summary
          and ((f"{skipped:,} between and after them were skipped" in summary) if skipped else "skipped" not in summary)
          and "5,000 more were evicted and are gone" in summary, summary)
    check("the header counts the records held and not shown", number(driver.find_element(By.ID, "count-skipped").text) == 14700,
          driver.find_element(By.ID, "count-skipped").text)
    legend = driver.find_element(By.ID, "rate-legend").text
    check("the chart's legend has every outcome of the load",
          all(driver.find_elements(By.CSS_SELECTOR, f"#rate-legend li[data-outcome='{key}']")
              for key in ("accepted", "BadDeviceToken", "TooManyRequests", "no answer (fault action)")), legend)
    samples_after = int(chart.get_attribute("data-samples") or 0)
    peak = int(chart.get_attribute("data-peak") or 0)
    green = driver.execute_script("""
        const c = document.getElementById('rate-chart'), x = c.getContext('2d');
        const d = x.getImageData(0, 0, c.width, c.height).data; let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] === 36 && d[i + 1] === 138 && d[i + 2] === 61) n++;
        return n;""")
    check("the chart keeps sampling and draws the load's accepted answers",
          samples_after > samples_before and peak > 0 and green > 50, f"samples {samples_before} -> {samples_after}, peak {peak}/s, {green} green pixels")
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(os.path.join(screenshots, "records-20000.png"))

    # Load older: the 100 records before the oldest shown, in order, below the live feed.
    driver.find_element(By.ID, "older-load").click()
    loaded, took = wait_for(driver, 10, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#older-feed .record")) == 100)
    seqs = [int(card.get_attribute("data-seq")) for card in driver.find_elements(By.CSS_SELECTOR, "#older-feed .record")]
    check("Load older shows the 100 records before the oldest shown, newest first", loaded
          and seqs == list(range(oldest - 1, oldest - 101, -1)), f"after {took} s: {seqs[:3]}…{seqs[-3:]} (oldest shown {oldest})")
    text = driver.find_element(By.ID, "older-text").text
    check("the notice counts 100 fewer older records", f"{expected - 100:,} older records not shown" in text, text)
    href = driver.find_element(By.ID, "older-link").get_attribute("href")
    query = admin(args, "GET", href[len(args.admin):])["notifications"]
    check("the JSON link lists the 1,000 records before the oldest shown", [r["seq"] for r in query]
          == list(range(oldest - 1100, oldest - 100)), f"{href}: {len(query)} records from {query[0]['seq'] if query else None}")
    older_card = driver.find_elements(By.CSS_SELECTOR, "#older-feed .record")[0]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", older_card)
    older_card.click()
    detail, _ = wait_for(driver, 3, lambda d: f"Record {oldest - 1}" in d.find_element(By.ID, "detail").text)
    check("an older record opens its detail view", detail, driver.find_element(By.ID, "detail").text[:200])
    driver.find_element(By.ID, "detail-close").click()
    driver.execute_script("window.scrollTo(0, document.getElementById('older').getBoundingClientRect().top + window.scrollY - 420)")
    driver.save_screenshot(os.path.join(screenshots, "older.png"))

    # With a filter nothing matches: Load older looks back to the oldest record held and says so.
    driver.find_element(By.ID, "f-topic").send_keys("com.example.nothing")
    driver.find_element(By.ID, "filter-apply").click()
    maybe, _ = wait_for(driver, 5, lambda d: "may be held" in d.find_element(By.ID, "older-text").text
                        and not d.find_elements(By.CSS_SELECTOR, "#feed .record, #older-feed .record"))
    check("with a filter the page says older matching records may be held", maybe, driver.find_element(By.ID, "older-notice").text)
    driver.find_element(By.ID, "older-load").click()
    exhausted, took = wait_for(driver, 20, lambda d: "No older records match the filter" in d.find_element(By.ID, "older-text").text)
    message = driver.find_element(By.ID, "older-message").text
    check("Load older looks back to the oldest record held and says nothing older matches", exhausted
          and f"before seq {first:,}" in message and not driver.find_element(By.ID, "older-load").is_displayed(),
          f"after {took} s: {driver.find_element(By.ID, 'older-notice').text}")
    driver.find_element(By.ID, "filter-reset").click()

    errors = driver.execute_script("return window.__errors")
    check("the page's script threw nothing", not errors, errors)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def new_team_key(directory):
    """A fresh P-256 key, made by openssl: (the private key's path, the public key as PEM)."""
    private = os.path.join(directory, "team-key.p8")
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", private],
                   check=True, capture_output=True, timeout=30)
    public = subprocess.run(["openssl", "pkey", "-in", private, "-pubout"], check=True, capture_output=True, timeout=30)
    return private, public.stdout.decode()


def provider_token(private_key, team_id, key_id):
    """An APNs provider token (ES256 JWT) signed with openssl; the DER signature becomes JWT's r||s."""
    header = b64url(json.dumps({"alg": "ES256", "kid": key_id}, separators=(",", ":")).encode())
    claims = b64url(json.dumps({"iss": team_id, "iat": int(time.time())}, separators=(",", ":")).encode())
    signing_input = f"{header}.{claims}".encode()
    der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", private_key], input=signing_input,
                         check=True, capture_output=True, timeout=30).stdout
    # SEQUENCE { INTEGER r, INTEGER s }, each at most 33 bytes: short lengths only.
    assert der[0] == 0x30 and der[2] == 0x02, der.hex()
    r_length = der[3]
    r = der[4:4 + r_length]
    assert der[4 + r_length] == 0x02, der.hex()
    s_length = der[5 + r_length]
    s = der[6 + r_length:6 + r_length + s_length]
    raw = int.from_bytes(r, "big").to_bytes(32, "big") + int.from_bytes(s, "big").to_bytes(32, "big")
    return f"bearer {header}.{claims}.{b64url(raw)}"


def card_titles(driver):
    """The titles of the banners the page shows, read in one go."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#feed .record.banner .title')].map((t) => t.textContent);")


def run_teams(driver, args):
    """The page for one team: /?team=<teamId> shows that team's records and counts only."""
    team, key_id, app = "INBOXTEAM1", "INBOXKEY01", "com.example.inbox"
    with tempfile.TemporaryDirectory() as directory:
        private_key, public_pem = new_team_key(directory)
        try:
            added = admin(args, "POST", "/v1/teams", {"teamId": team, "apps": [app], "keys": [{"keyId": key_id, "pem": public_pem}]})
        except urllib.error.HTTPError as error:
            added = {"status": error.code, "error": error.read().decode(errors="replace")}
        check("a team is added at run time (POST /v1/teams)", added.get("teamId") == team and added.get("source") == "api", added)
        team_authorization = provider_token(private_key, team, key_id)

    def team_push(title, token=TOKEN_A):
        return push(args, token, {"aps": {"alert": {"title": title, "body": "for the team"}}},
                    {"apns-topic": app, "authorization": team_authorization})

    def demo_push(title, token=TOKEN_B):
        return push(args, token, {"aps": {"alert": {"title": title, "body": "for the demo team"}}})

    codes = [team_push("Team 1")[0], team_push("Team 2")[0], team_push("Team bad", "zz")[0],
             demo_push("Demo 1")[0], demo_push("Demo 2")[0]]
    check("the team's pushes and the demo team's are answered", codes == [200, 200, 400, 200, 200], codes)

    driver.get(args.admin + "/?team=" + team)
    live, _ = wait_for(driver, 10, lambda d: d.find_element(By.ID, "stream-status").text == "live")
    check("the page for the team connects to the event stream", live, driver.find_element(By.ID, "stream-status").text)
    driver.execute_script("window.__errors = []; window.addEventListener('error', e => window.__errors.push(String(e.message)));")
    named = driver.find_element(By.ID, "team-name").text
    check("the header names the team", named == team and team in driver.title, f"{named!r}, title {driver.title!r}")
    counted, took = wait_for(driver, 5, lambda d: counts_match(d, 2, 1))
    check("the header's counts and the cards are the team's (2 accepted, 1 rejected)", counted,
          f"after {took} s: {page_counts(driver)}")
    titles = card_titles(driver)
    check("only the team's records are shown", sorted(titles) == ["Team 1", "Team 2"], titles)

    # New pushes: the team's shows up, the demo team's does not.
    team_push("Team 3")
    demo_push("Demo 3")
    shown, _ = wait_for(driver, 3, lambda d: record_with(d, ".record.banner", "Team 3"))
    time.sleep(0.5)
    titles = card_titles(driver)
    check("a new push of the team shows up, one of another team does not", shown and not any(t.startswith("Demo") for t in titles),
          titles)

    # The picker: every team, this one chosen.
    picker, _ = wait_for(driver, 5, lambda d: d.find_element(By.ID, "team-picker").is_displayed()
                         and len(Select(d.find_element(By.ID, "team-picker")).options) >= 3 and d.find_element(By.ID, "team-picker"))
    values = [option.get_attribute("value") for option in Select(picker).options] if picker else []
    check("the picker offers all teams and every team, with this one chosen",
          picker and values[0] == "" and team in values and "DEMOTEAM01" in values
          and Select(picker).first_selected_option.get_attribute("value") == team, values)
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(os.path.join(args.screenshots, "team.png"))

    # The JSON link and the stream carry the team: the link lists the team's records only.
    errors = driver.execute_script("return window.__errors")
    check("the page's script threw nothing", not errors, errors)

    # Clear on the team's page forgets the team's records only.
    driver.find_element(By.ID, "clear").click()
    cleared, _ = wait_for(driver, 5, lambda d: counts_match(d, 0, 0))
    check("Clear on the team's page empties it", cleared, page_counts(driver))
    everyone = admin(args, "GET", "/v1/notifications?outcome=all&limit=100")["notifications"]
    check("Clear on the team's page keeps the other teams' records",
          sorted(r["payload"]["aps"]["alert"]["title"] for r in everyone if r.get("auth", {}).get("teamId") == "DEMOTEAM01")
          == ["Demo 1", "Demo 2", "Demo 3"] and not any(r.get("auth", {}).get("teamId") == team for r in everyone),
          [(r["seq"], (r.get("auth") or {}).get("teamId")) for r in everyone])
    team_push("Team 4")

    # "all teams": the page without ?team=, every team's records.
    Select(driver.find_element(By.ID, "team-picker")).select_by_value("")
    reloaded, _ = wait_for(driver, 10, lambda d: "team=" not in d.current_url
                           and d.find_element(By.ID, "stream-status").text == "live")
    check("choosing all teams opens the page without ?team=", reloaded, driver.current_url)
    every, _ = wait_for(driver, 5, lambda d: sorted(card_titles(d)) == ["Demo 1", "Demo 2", "Demo 3", "Team 4"] or None)
    check("for all teams every team's records are shown", every and driver.find_element(By.ID, "team-name").text == "all teams",
          card_titles(driver))

    # Another team from the picker: its records only.
    Select(driver.find_element(By.ID, "team-picker")).select_by_value("DEMOTEAM01")
    demo, _ = wait_for(driver, 10, lambda d: d.current_url.endswith("team=DEMOTEAM01")
                       and d.find_element(By.ID, "stream-status").text == "live"
                       and sorted(card_titles(d)) == ["Demo 1", "Demo 2", "Demo 3"])
    check("choosing another team shows its records only", demo, f"{driver.current_url}: {card_titles(driver)}")

    # A team the mock does not have: the page says so.
    driver.get(args.admin + "/?team=NOTATEAM00")
    said, _ = wait_for(driver, 10, lambda d: "not a team" in d.find_element(By.ID, "stream-status").text)
    check("for a team the mock does not have the page says so", said, driver.find_element(By.ID, "stream-status").text)

    try:
        admin(args, "DELETE", "/v1/teams/" + team)
        deleted = True
    except urllib.error.HTTPError as error:
        deleted = f"{error.code} {error.read()[:300]!r}"
    check("the team is deleted afterwards", deleted is True, deleted)


def run_with_token(driver, args):
    """With admin.token set: the page asks for the token, then works with it."""
    driver.get(args.admin + "/")
    bar, _ = wait_for(driver, 5, lambda d: d.find_element(By.ID, "token-bar").is_displayed())
    check("without the token the page asks for it", bar, driver.find_element(By.ID, "stream-status").text)
    driver.find_element(By.ID, "token-input").send_keys("not-the-token")
    driver.find_element(By.ID, "token-save").click()
    refused, _ = wait_for(driver, 5, lambda d: d.find_element(By.ID, "token-bar").is_displayed()
                          and "refused" in d.find_element(By.ID, "token-message").text)
    check("a wrong token is refused", refused, driver.find_element(By.ID, "token-message").text)
    field = driver.find_element(By.ID, "token-input")
    field.clear()
    field.send_keys(args.admin_token)
    driver.find_element(By.ID, "token-save").click()
    live, _ = wait_for(driver, 5, lambda d: d.find_element(By.ID, "stream-status").text == "live")
    check("with the token the stream is live", live, driver.find_element(By.ID, "stream-status").text)
    code, body = push(args, TOKEN_A, {"aps": {"alert": {"title": "Behind a token", "body": "still shown"}}})
    banner, _ = wait_for(driver, 2, lambda d: record_with(d, ".record.banner", "Behind a token"))
    check("a push shows up behind the token", banner and code == 200, f"{code} {body}")


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # reported to the Swift test, which fails on it
        print(json.dumps({"checks": checks + [{"name": "the script ran", "ok": False, "detail": repr(error) + " " + traceback.format_exc(limit=-3)}],
                          "console": []}))
        sys.exit(1)
