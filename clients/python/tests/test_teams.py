"""Teams: AdminClient made for one team, create/list/delete, temporary_team and its provider tokens.

The first tests need no mock: a small local HTTP server records what the client sends and answers
what each test scripts. The others run against the live mock of scripts/client-tests, with pushes
sent by aioapns signed with each team's own key, and are skipped without one.
"""

import base64
import http.server
import json
import secrets
import threading
import time

import pytest

from apns_mock import AdminClient, AdminError, TemporaryTeam
from apns_mock.tokens import generate_key, provider_token, random_id
from mock_env import device_token, environment, push

TEAM_ID_CHARACTERS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


# Without a mock: what the client sends.


class _Recorder(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        self.seen = []
        self.answers = {}  # (method, path without query) -> (status, body)

        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorder.seen.append({
                    "method": self.command, "path": self.path,
                    "headers": {name.lower(): value for name, value in self.headers.items()},
                    "body": json.loads(body) if body else None,
                })
                status, answer = recorder.answers.get((self.command, self.path.split("?")[0]), (200, {}))
                content = b"" if answer is None else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_DELETE = _answer

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/prefix/"


@pytest.fixture()
def fake():
    server = _Recorder()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _team_view(body):
    """What the mock answers a POST /v1/teams, from the body it got."""
    keys = [{"keyId": key["keyId"], "environment": key.get("environment", "any"), "topics": body["apps"],
             "relatedKeyId": None} for key in body.get("keys", [])]
    return {"teamId": body["teamId"], "apps": body["apps"], "keys": keys,
            "devices": {"policy": (body.get("devices") or {}).get("policy"), "count": 0}, "source": "api"}


def test_a_client_for_a_team_sends_its_header_on_every_call(fake):
    fake.answers[("GET", "/prefix/v1/notifications")] = (200, {"notifications": [], "next": 0, "more": False})
    unscoped = AdminClient(fake.url, token="s3cret", timeout=3)
    scoped = AdminClient(fake.url, token="s3cret", team="TEAM000001")
    derived = unscoped.for_team("TEAM000002")
    assert unscoped.team is None and derived.team == "TEAM000002"
    assert (derived.url, derived.token, derived.timeout) == (unscoped.url, "s3cret", 3)
    assert derived.for_team(None).team is None

    unscoped.notifications(token="ab")
    scoped.notifications(token="ab")
    scoped.reset()
    scoped.add_fault({"respond": {"reason": "BadDeviceToken"}})
    derived.advance_clock(5)
    assert [seen["headers"].get("apns-mock-team") for seen in fake.seen] == [
        None, "TEAM000001", "TEAM000001", "TEAM000001", "TEAM000002"]
    assert all(seen["headers"]["authorization"] == "Bearer s3cret" for seen in fake.seen)
    assert fake.seen[1]["path"] == "/prefix/v1/notifications?token=ab"


def test_create_list_and_delete_teams(fake):
    body = {"teamId": "TEAM000001", "apps": ["com.example.one"],
            "keys": [{"keyId": "KEY0000001", "pem": "-----BEGIN PUBLIC KEY-----\n…"}]}
    fake.answers[("POST", "/prefix/v1/teams")] = (201, _team_view(body))
    fake.answers[("GET", "/prefix/v1/teams")] = (200, {"teams": [_team_view(body)]})
    fake.answers[("DELETE", "/prefix/v1/teams/TEAM000001")] = (204, None)
    fake.answers[("DELETE", "/prefix/v1/teams/NOSUCHTEAM")] = (
        404, {"error": "team: NOSUCHTEAM is not a team of this mock (GET /v1/teams lists them)"})
    admin = AdminClient(fake.url)

    created = admin.create_team(body)
    assert created["teamId"] == "TEAM000001" and created["source"] == "api"
    assert fake.seen[0]["method"] == "POST" and fake.seen[0]["body"] == body
    assert [team["teamId"] for team in admin.list_teams()] == ["TEAM000001"]
    admin.delete_team("TEAM000001")
    assert (fake.seen[2]["method"], fake.seen[2]["path"]) == ("DELETE", "/prefix/v1/teams/TEAM000001")
    with pytest.raises(AdminError) as raised:
        admin.delete_team("NOSUCHTEAM")
    assert raised.value.status == 404 and raised.value.message.startswith("team: NOSUCHTEAM ")


def test_temporary_team_sends_a_fresh_public_key_and_deletes_the_team(fake):
    from cryptography.hazmat.primitives import serialization

    admin = AdminClient(fake.url, team="OTHERTEAM1")  # the team is made and deleted unscoped all the same
    fake.answers[("POST", "/prefix/v1/teams")] = (201, {"teamId": "PLACEHOLDR", "apps": ["com.example.one"]})
    fake.answers[("DELETE", "/prefix/v1/teams/PLACEHOLDR")] = (204, None)
    with admin.temporary_team(["com.example.one"], devices={"policy": "registered"}) as team:
        assert isinstance(team, TemporaryTeam)
        sent = fake.seen[0]["body"]
        assert set(sent) == {"teamId", "apps", "keys", "devices"}
        assert sent["apps"] == ["com.example.one"] and sent["devices"] == {"policy": "registered"}
        [key] = sent["keys"]
        assert set(key) == {"keyId", "pem"}  # environment left to the server's default ("any")
        assert len(sent["teamId"]) == 10 and set(sent["teamId"]) <= TEAM_ID_CHARACTERS
        assert len(key["keyId"]) == 10 and set(key["keyId"]) <= TEAM_ID_CHARACTERS
        # The mock gets the public half of the key the team holds the private half of.
        assert key["pem"].startswith("-----BEGIN PUBLIC KEY-----")
        assert "PRIVATE" not in key["pem"]
        private = serialization.load_pem_private_key(team.private_key_pem.encode(), password=None)
        assert team.private_key_pem.startswith("-----BEGIN PRIVATE KEY-----")  # PKCS #8, as a .p8
        assert private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode() == key["pem"]
        assert team.key_id == key["keyId"] and team.team_id == "PLACEHOLDR"  # the server's answer names the team
        assert team.apps == ["com.example.one"]
        assert team.admin.team == "PLACEHOLDR" and team.admin.url == admin.url
        assert "apns-mock-team" not in fake.seen[0]["headers"]
        team.admin.stats()
        assert fake.seen[-1]["headers"]["apns-mock-team"] == "PLACEHOLDR"
    assert (fake.seen[-1]["method"], fake.seen[-1]["path"]) == ("DELETE", "/prefix/v1/teams/PLACEHOLDR")
    assert "apns-mock-team" not in fake.seen[-1]["headers"]
    assert team.deleted
    count = len(fake.seen)
    team.delete()  # once only
    assert len(fake.seen) == count


def test_temporary_team_takes_given_ids_and_environment(fake):
    fake.answers[("POST", "/prefix/v1/teams")] = (201, {"teamId": "ABCDE12345", "apps": ["com.example.two"]})
    fake.answers[("DELETE", "/prefix/v1/teams/ABCDE12345")] = (404, {"error": "team: ABCDE12345 is not a team"})
    team = AdminClient(fake.url).temporary_team(
        "com.example.two", team_id="ABCDE12345", key_id="KEY1234567", environment="sandbox")
    sent = fake.seen[0]["body"]
    assert sent["teamId"] == "ABCDE12345" and sent["apps"] == ["com.example.two"]
    assert sent["keys"][0]["keyId"] == "KEY1234567" and sent["keys"][0]["environment"] == "sandbox"
    assert "devices" not in sent
    team.delete()  # already gone (404): deleted all the same
    assert team.deleted


def test_temporary_team_draws_generated_ids_again_on_a_conflict_but_not_given_ones(fake):
    fake.answers[("POST", "/prefix/v1/teams")] = (409, {"error": "teamId: taken"})
    with pytest.raises(AdminError) as raised:
        AdminClient(fake.url).temporary_team(["com.example.one"])
    assert raised.value.status == 409
    ids = [seen["body"]["teamId"] for seen in fake.seen]
    assert len(ids) == 3 and len(set(ids)) == 3
    fake.seen.clear()
    with pytest.raises(AdminError):
        AdminClient(fake.url).temporary_team(["com.example.one"], team_id="ABCDE12345", key_id="KEY1234567")
    assert len(fake.seen) == 1


def _decode(part):
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def test_provider_tokens_are_es256_jwts_of_the_team_and_key():
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    private_pem, public_pem = generate_key()
    before = int(time.time())
    token = provider_token(private_pem, "KEY0000001", "TEAM000001")
    header, claims, signature = token.split(".")
    assert json.loads(_decode(header)) == {"alg": "ES256", "kid": "KEY0000001"}
    decoded = json.loads(_decode(claims))
    assert decoded["iss"] == "TEAM000001" and isinstance(decoded["iat"], int)
    assert before <= decoded["iat"] <= int(time.time())
    raw = _decode(signature)
    assert len(raw) == 64 and "=" not in token
    public = serialization.load_pem_public_key(public_pem.encode())
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, f"{header}.{claims}".encode(), ec.ECDSA(hashes.SHA256()))  # raises when wrong
    assert json.loads(_decode(provider_token(private_pem, "K", "T", issued_at=1700000000.9).split(".")[1])) == {
        "iss": "T", "iat": 1700000000}
    other = ec.generate_private_key(ec.SECP384R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    with pytest.raises(ValueError):
        provider_token(other, "K", "T")


def test_random_ids_are_ten_uppercase_letters_and_digits():
    ids = {random_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(value) == 10 and set(value) <= TEAM_ID_CHARACTERS for value in ids)


# Against the live mock (scripts/client-tests python).


def _app():
    """A bundle ID no other team has."""
    return "com.example.teams.t" + secrets.token_hex(4)



def test_two_teams_on_one_mock_see_only_their_own_pushes(admin):
    with admin.temporary_team([_app()]) as a, admin.temporary_team([_app()]) as b:
        listed = {team["teamId"]: team for team in admin.list_teams()}
        assert listed[a.team_id]["source"] == "api" and listed[a.team_id]["apps"] == a.apps
        assert [key["keyId"] for key in listed[b.team_id]["keys"]] == [b.key_id]
        assert a.team["teamId"] == a.team_id and a.team["source"] == "api"

        token = device_token()
        result = push(token, title="for A", team=a)
        assert result.is_successful, result.description
        [record] = a.admin.wait_for(token=token, count=1, timeout=5)
        assert record["auth"]["teamId"] == a.team_id and record["auth"]["keyId"] == a.key_id
        assert record["topic"] == a.apps[0] and record["payload"]["aps"]["alert"]["title"] == "for A"
        assert b.admin.notifications(token=token, outcome="all").notifications == []
        assert [r["seq"] for r in admin.notifications(token=token).notifications] == [record["seq"]]  # unscoped: all

        a_stats, b_stats = a.admin.stats(), b.admin.stats()
        assert a_stats["team"] == a.team_id and b_stats["team"] == b.team_id
        assert a_stats["requests"] >= 1 and b_stats["requests"] == 0

        # A team's clock moves alone.
        moved = a.admin.advance_clock(60)
        assert moved["teamOffsetSeconds"] == 60 and moved["offsetSeconds"] == 60
        assert b.admin.clock()["offsetSeconds"] == 0 and admin.clock()["offsetSeconds"] == 0

        # A scoped reset forgets A's records, in A's view and the unscoped one, and A's clock.
        a.admin.reset()
        assert a.admin.notifications(token=token, outcome="all").notifications == []
        assert admin.notifications(token=token, outcome="all").notifications == []
        assert a.admin.clock()["offsetSeconds"] == 0


def test_one_teams_faults_do_not_touch_another_teams_pushes(admin):
    with admin.temporary_team([_app()]) as a, admin.temporary_team([_app()]) as b:
        rule = b.admin.add_fault({"respond": {"reason": "BadDeviceToken"}})  # every push of B's
        assert [r["id"] for r in b.admin.faults()] == [rule["id"]]
        assert a.admin.faults() == []

        a_token, b_token = device_token(), device_token()
        a_result = push(a_token, team=a)
        assert a_result.is_successful, a_result.description
        b_result = push(b_token, team=b)
        assert b_result.status == "400" and b_result.description == "BadDeviceToken"
        mock_result = push(device_token())  # the mock's own team (MOCK_TEAM_ID): B's rule is not global
        assert mock_result.is_successful, mock_result.description

        [a_record] = a.admin.wait_for(token=a_token)
        assert not a_record["injected"]
        [b_record] = b.admin.wait_for(token=b_token, outcome="rejected")
        assert b_record["injected"] and b_record["reason"] == "BadDeviceToken"


def test_a_teams_device_policy_applies_to_its_pushes_only(admin):
    app = _app()
    known = device_token()
    devices = {"policy": "registered", "tokens": [{"token": known, "topic": app, "environment": "sandbox"}]}
    with admin.temporary_team([app], devices=devices) as team:
        assert team.team["devices"] == {"policy": "registered", "count": 1}
        assert push(known, team=team).is_successful
        stranger = device_token()
        refused = push(stranger, team=team)
        assert refused.status == "400" and refused.description == "BadDeviceToken"
        assert push(stranger).is_successful  # the mock's own team: the global (open) policy
        assert known in [d["token"] for d in team.admin.devices()["devices"]]


def test_a_deleted_teams_tokens_are_refused_and_its_calls_are_404(admin):
    team = admin.temporary_team([_app()])
    try:
        token = device_token()
        assert push(token, team=team).is_successful
        team.admin.wait_for(token=token)
    finally:
        team.delete()
    assert team.team_id not in [t["teamId"] for t in admin.list_teams()]
    refused = push(device_token(), team=team)
    assert refused.status == "403" and refused.description == "InvalidProviderToken"
    assert admin.notifications(token=token, outcome="all").notifications == []  # its records went too
    with pytest.raises(AdminError) as raised:
        team.admin.notifications()
    assert raised.value.status == 404 and raised.value.message.startswith(f"team: {team.team_id} ")
    with pytest.raises(AdminError) as raised:
        admin.delete_team(team.team_id)
    assert raised.value.status == 404


def test_a_teams_event_stream_and_channels_are_its_own(admin):
    with admin.temporary_team([_app()]) as a, admin.temporary_team([_app()]) as b:
        a_token, b_token = device_token(), device_token()
        with b.admin.events(outcome="all") as stream:
            assert push(a_token, team=a).is_successful
            assert push(b_token, team=b).is_successful
            event = next(iter(stream))
        assert event.type == "message" and event.data["token"] == b_token  # B's stream skips A's push
        assert event.data["auth"]["teamId"] == b.team_id

        channel = a.admin.create_channel(a.apps[0])
        with pytest.raises(AdminError) as raised:
            a.admin.create_channel(b.apps[0])
        assert raised.value.status == 400 and raised.value.message.startswith("bundleId: ")
        assert [c["channelId"] for c in a.admin.channels()] == [channel["channelId"]]
        assert b.admin.channels() == []
        assert channel["channelId"] in [c["channelId"] for c in admin.channels()]  # unscoped: every team's
        a.admin.reset()  # the channels of its apps go with it
        assert a.admin.channels() == []


def test_unknown_and_malformed_teams(admin):
    with pytest.raises(AdminError) as raised:
        admin.for_team("NOSUCHTEAM").notifications()
    assert raised.value.status == 404 and raised.value.message.startswith("team: NOSUCHTEAM ")
    with pytest.raises(AdminError) as raised:
        admin.for_team("NOSUCHTEAM").add_fault({"respond": {"reason": "BadDeviceToken"}})
    assert raised.value.status == 404
    assert admin.faults() == []
    with pytest.raises(AdminError) as raised:
        admin.for_team("not-a-team").stats()
    assert raised.value.status == 400 and raised.value.message.startswith("team")


def test_create_team_errors_name_the_field(admin):
    private_pem, public_pem = generate_key()
    team_id, key_id, app = random_id(), random_id(), _app()
    with pytest.raises(AdminError) as raised:
        admin.create_team({"teamId": team_id, "apps": []})
    assert raised.value.status == 400 and raised.value.message.startswith("apps: ")
    with pytest.raises(AdminError) as raised:
        admin.create_team({"teamId": team_id, "apps": [app], "keys": [{"keyId": key_id, "pem": "not a key"}]})
    assert raised.value.status == 400 and raised.value.message.startswith("keys[0].pem: ")
    created = admin.create_team({"teamId": team_id, "apps": [app], "keys": [{"keyId": key_id, "pem": public_pem}]})
    try:
        assert created["teamId"] == team_id and created["source"] == "api"
        assert created["keys"][0]["keyId"] == key_id and created["keys"][0]["environment"] == "any"
        with pytest.raises(AdminError) as raised:
            admin.create_team({"teamId": team_id, "apps": [_app()]})
        assert raised.value.status == 409
        with pytest.raises(AdminError) as raised:
            admin.create_team({"teamId": random_id(), "apps": [app]})  # the app is the first team's
        assert raised.value.status == 409
        configured = [t["teamId"] for t in admin.list_teams() if t["source"] == "configuration"]
        assert environment()["MOCK_TEAM_ID"] in configured
        with pytest.raises(AdminError) as raised:
            admin.delete_team(environment()["MOCK_TEAM_ID"])
        assert raised.value.status == 409
    finally:
        admin.delete_team(team_id)
