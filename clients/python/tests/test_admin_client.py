"""apns_mock.AdminClient against a live mock (scripts/client-tests python), every operation, with
pushes sent by aioapns."""

import time

import pytest

from apns_mock import AdminClient, AdminError, WaitTimeout
from mock_env import device_token, environment, push



def test_health_stats_reasons_metrics_and_ca(admin):
    health = admin.health()
    assert health["status"] == "ok" and health["ports"]["apns"] > 0
    assert admin.stats()["requests"] >= 0
    reasons = {reason["reason"]: reason["status"] for reason in admin.reasons()}
    assert reasons["BadDeviceToken"] == 400 and reasons["Unregistered"] == 410
    with open(environment()["MOCK_CA_FILE"]) as handle:
        assert admin.ca_pem().strip() == handle.read().strip()
    push(device_token())
    assert "apns_requests_total" in admin.metrics()
    assert admin.openapi()["openapi"].startswith("3.1")


def test_wait_for_returns_the_records_with_payload_and_headers(admin):
    token = device_token()
    result = push(token, title="Hello")
    assert result.is_successful, result.description
    [record] = admin.wait_for(token=token, count=1, timeout=5)
    assert record["status"] == 200 and record["payload"]["aps"]["alert"]["title"] == "Hello"
    assert record["headers"]["apns-push-type"] == "alert"
    assert record["apnsId"].lower() == result.notification_id.lower()
    page = admin.notifications(token=token)
    assert [r["seq"] for r in page.notifications] == [record["seq"]] and not page.more
    assert admin.notifications(token=token, since=page.next).notifications == []
    assert [r["seq"] for r in admin.all_notifications(token=token, limit=1)] == [record["seq"]]


def test_a_wait_that_times_out_says_what_arrived(admin):
    token = device_token()
    push(token, title="only one")
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as raised:
        admin.wait_for(token=token, count=2, timeout=0.5)
    assert time.monotonic() - started < 5
    error = raised.value
    assert error.matched == 1 and error.expected == 2 and error.records[0]["token"] == token
    assert "1 arrived" in str(error) and token[:12] in str(error)
    assert isinstance(error, AssertionError)


def test_errors_keep_the_servers_message(admin):
    with pytest.raises(AdminError) as raised:
        admin.advance_clock(-1)
    assert raised.value.status == 400
    assert raised.value.message.startswith("advanceSeconds: ")
    with pytest.raises(AdminError) as raised:
        admin.notifications(outcome="maybe")
    assert raised.value.message.startswith("outcome: ")
    with pytest.raises(AdminError) as raised:
        admin.remove_fault("no-such-rule")
    assert raised.value.status == 404
    with pytest.raises(TypeError):
        admin.notifications(colour="blue")


def test_fault_rules(admin):
    token = device_token()
    rule = admin.add_fault({"match": {"token": token}, "respond": {"reason": "BadDeviceToken"}, "times": 1})
    assert rule["respond"] == {"status": 400, "reason": "BadDeviceToken"} and rule["remaining"] == 1
    assert [r["id"] for r in admin.faults()] == [rule["id"]]
    result = push(token)
    assert result.status == "400" and result.description == "BadDeviceToken"
    [record] = admin.wait_for(token=token, outcome="rejected")
    assert record["injected"] and record["reason"] == "BadDeviceToken"
    assert admin.faults() == []  # times: 1 used it up
    two = admin.add_faults([{"action": "hang", "match": {"token": token}}, {"delayMs": 10, "match": {"token": token}}])
    assert len(two) == 2 and len(admin.faults()) == 2
    admin.remove_fault(two[0]["id"])
    assert [r["id"] for r in admin.faults()] == [two[1]["id"]]
    admin.clear_faults()
    assert admin.faults() == []
    with pytest.raises(AdminError) as raised:
        admin.add_faults([{"delayMs": 1}, {"respond": {"reason": "Nope"}}])
    assert raised.value.message.startswith("[1].respond.reason: ")
    assert admin.faults() == []  # all or none


def test_devices(admin):
    token = device_token()
    device = admin.register_device(token, topic=environment()["MOCK_TOPIC"], environment="sandbox")
    assert device["token"] == token
    assert token in [d["token"] for d in admin.devices()["devices"]]
    unregistered = admin.unregister_device(token, reason="ExpiredToken", timestamp=1_700_000_000_000)
    assert unregistered["reason"] == "ExpiredToken" and unregistered["timestamp"] == 1_700_000_000_000
    result = push(token)
    assert result.status == "410" and result.description == "ExpiredToken"
    admin.remove_device(token)
    assert token not in [d["token"] for d in admin.devices()["devices"]]
    with pytest.raises(AdminError) as raised:
        admin.remove_device(token)
    assert raised.value.status == 404 and raised.value.message.startswith("token: ")


def test_channels(admin):
    topic = environment()["MOCK_TOPIC"]
    channel = admin.create_channel(topic, message_storage_policy=0)
    assert channel["bundleId"] == topic and channel["environment"] == "sandbox" and channel["messageStoragePolicy"] == 0
    named = admin.create_channel(topic, environment="production", channel_id="dGVzdC9jaGFubmVsKw==")
    assert named["channelId"] == "dGVzdC9jaGFubmVsKw=="
    assert {c["channelId"] for c in admin.channels(bundle_id=topic)} == {channel["channelId"], named["channelId"]}
    assert [c["channelId"] for c in admin.channels(environment="production")] == [named["channelId"]]
    admin.delete_channel(named["channelId"])  # holds "/" and "+": percent-encoded
    assert [c["channelId"] for c in admin.channels()] == [channel["channelId"]]
    with pytest.raises(AdminError) as raised:
        admin.create_channel("not.a.configured.app")
    assert raised.value.status == 400 and raised.value.message.startswith("bundleId: ")


def test_clock(admin):
    assert admin.clock()["offsetSeconds"] == 0
    moved = admin.advance_clock(3601)
    assert moved["offsetSeconds"] == 3601 and moved["now"] > moved["wallClock"]
    token = device_token()
    push(token)
    [record] = admin.wait_for(token=token)
    assert record["mockTime"] is not None
    admin.reset()
    assert admin.clock()["offsetSeconds"] == 0


def test_events(admin):
    token = device_token()
    with admin.events(token=token, outcome="all") as stream:
        push(token, title="streamed")
        event = next(iter(stream))
    assert event.type == "message" and event.data["token"] == token
    assert event.data["payload"]["aps"]["alert"]["title"] == "streamed" and event.id == str(event.data["seq"])
    # Replay what the ring holds after a seq, then stop after `limit`.
    replayed = list(admin.events(token=token, since=0, limit=1))
    assert [e.data["seq"] for e in replayed] == [event.data["seq"]]
    with pytest.raises(AdminError) as raised:
        admin.events(max_rate=0)
    assert raised.value.message.startswith("maxRate: ")


def test_delete_notifications(admin):
    token = device_token()
    push(token)
    admin.wait_for(token=token)
    admin.delete_notifications()
    assert admin.notifications(token=token).notifications == []
