"""A small client of apns-mock's admin API, for asserting from tests on what a service sent.

    from apns_mock import AdminClient

    admin = AdminClient("http://127.0.0.1:2198")
    admin.reset()
    ...  # your service pushes through its usual APNs client
    [record] = admin.wait_for(token=device_token, count=1, timeout=5)
    assert record["payload"]["aps"]["alert"]["title"] == "Hello"

The standard library only (urllib). Every answer the API documents (its OpenAPI document is
served at /v1/openapi.json) is returned as plain JSON values: records are dicts shaped as
docs/admin-api.md's "The record". An error answer raises :class:`AdminError` carrying the
server's message intact (``"advanceSeconds: expected a whole number …"``); a wait that times out
raises :class:`WaitTimeout` (an ``AssertionError``) with what did arrive.

A client made for one team (``AdminClient(url, team="TEAM000001")``, or ``admin.for_team(…)``)
sends ``APNS-Mock-Team: <teamId>`` with every call: records, stats, devices, faults, channels,
the clock and reset are then that team's only. :meth:`AdminClient.temporary_team` creates a team
with a fresh key for one test and deletes it afterwards.
"""

from __future__ import annotations

import dataclasses
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Union

__all__ = ["AdminClient", "AdminError", "WaitTimeout", "NotificationPage", "Event", "EventStream", "TemporaryTeam"]

DEFAULT_URL = "http://127.0.0.1:2198"
# The header that scopes an admin call to one team (the server also takes ?team=).
TEAM_HEADER = "APNS-Mock-Team"

# The record filters, as keyword arguments: Python's name -> the API's query parameter.
_FILTERS = {
    "token": "token",
    "topic": "topic",
    "push_type": "pushType",
    "apns_id": "apnsId",
    "collapse_id": "collapseId",
    "outcome": "outcome",
    "reason": "reason",
    "kind": "kind",
    "channel_id": "channelId",
    "since": "since",
    "limit": "limit",
}


class AdminError(Exception):
    """An answer outside 2xx: ``status``, and ``message`` as the server wrote it (``"<field>: …"``)."""

    def __init__(self, status: int, message: str, method: str = "", path: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.method = method
        self.path = path

    def __str__(self) -> str:
        return f"{self.message} ({self.method} {self.path} answered {self.status})" if self.method else self.message


class WaitTimeout(AssertionError):
    """:meth:`AdminClient.wait_for` timed out: ``matched`` of ``expected`` records arrived;
    ``records`` are those, and the message shows the last of them."""

    def __init__(self, expected: int, records: List[dict], timeout: float, query: Dict[str, Any]) -> None:
        self.expected = expected
        self.matched = len(records)
        self.records = records
        self.timeout = timeout
        shown = "; ".join(_brief(record) for record in records[-5:]) or "none"
        where = ", ".join(f"{name}={value}" for name, value in query.items()) or "any record"
        super().__init__(
            f"waited {timeout:g} s for {expected} notification(s) matching {where}: {self.matched} arrived"
            f" (last seen: {shown})"
        )


def _brief(record: dict) -> str:
    token = record.get("token") or "-"
    status = record.get("status")
    what = f"{status}" if status is not None else (record.get("action") or "no answer")
    if record.get("reason"):
        what += f" {record['reason']}"
    return f"#{record.get('seq')} {what} token={token[:12]}… topic={record.get('topic')}"


@dataclass
class NotificationPage:
    """One page of records, oldest first; pass ``next`` as ``since`` while ``more`` is true."""

    notifications: List[dict]
    next: int
    more: bool


@dataclass
class Event:
    """One Server-Sent Event of ``/v1/events``: ``type`` is ``"message"`` for a record (``data`` the
    record, ``id`` its seq), ``"skipped"`` or ``"refused-streams"`` for the others."""

    type: str
    data: Any
    id: Optional[str] = None


@dataclass
class AdminClient:
    """The admin API at ``url`` (``http://127.0.0.1:2198`` by default). ``token`` is
    ``admin.token`` when the mock has one; ``timeout`` bounds each request (a wait gets its own
    timeout on top). ``team`` (a team ID) makes every call scoped to that team: it is sent as the
    ``APNS-Mock-Team`` header, and the records, stats, devices, faults, channels, clock and reset
    are that team's only; without it calls act on the whole mock."""

    url: str = DEFAULT_URL
    token: Optional[str] = None
    timeout: float = 10.0
    team: Optional[str] = None
    _base: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._base = self.url.rstrip("/")

    def for_team(self, team_id: Optional[str]) -> "AdminClient":
        """The same mock (URL, admin token, timeout) scoped to the team ``team_id``; ``None`` gives
        an unscoped client. This client is left as it is."""
        return dataclasses.replace(self, team=team_id)

    # Records

    def notifications(self, **filters: Any) -> NotificationPage:
        """``GET /v1/notifications``: one page of records. Filters: ``token``, ``topic``,
        ``push_type``, ``apns_id``, ``collapse_id``, ``outcome`` (``accepted`` by default,
        ``rejected``, ``all``), ``reason``, ``kind``, ``channel_id``, ``since``, ``limit``."""
        body = self._json("GET", "/v1/notifications", query=_query(filters))
        return NotificationPage(body["notifications"], body["next"], body["more"])

    def all_notifications(self, **filters: Any) -> List[dict]:
        """Every record that matches, following ``next`` until ``more`` is false."""
        records: List[dict] = []
        while True:
            page = self.notifications(**filters)
            records.extend(page.notifications)
            if not page.more:
                return records
            filters["since"] = page.next

    def wait_for(self, count: int = 1, timeout: float = 5.0, **filters: Any) -> List[dict]:
        """``GET /v1/notifications/wait``: returns ``count`` matching records (records already
        stored count; pass ``since`` to wait for new ones only) as soon as they are there, or
        raises :class:`WaitTimeout` after ``timeout`` seconds with what matched."""
        query = _query(filters)
        query.update(count=count, timeout=timeout)
        status, body = self._request("GET", "/v1/notifications/wait", query=query, timeout=timeout + self.timeout)
        page = json.loads(body)
        if status == 408:
            raise WaitTimeout(count, page["notifications"], timeout, _query(filters))
        return page["notifications"]

    def delete_notifications(self) -> None:
        """``DELETE /v1/notifications``: forgets every record (``seq`` keeps counting)."""
        self._request("DELETE", "/v1/notifications")

    def events(
        self, *, max_rate: Optional[int] = None, last_event_id: Optional[Union[int, str]] = None, **filters: Any
    ) -> "EventStream":
        """``GET /v1/events``, opened now: returns once the mock answered, which it does after
        subscribing the stream, so whatever is pushed afterwards arrives on it. Iterate the stream
        for :class:`Event` values (records, and ``skipped``/``refused-streams`` notices) until it
        ends (``limit`` records) or is closed: ``close()`` or a ``with`` block closes the
        connection. Filters as :meth:`notifications`; ``since`` or ``last_event_id`` replay what
        the ring holds after that seq first."""
        query = _query(filters)
        if max_rate is not None:
            query["maxRate"] = max_rate
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        request = self._make_request("GET", "/v1/events", query=query, headers=headers)
        try:
            # Reads wait longer than the mock's 15-second keep-alive comments.
            response = urllib.request.urlopen(request, timeout=max(self.timeout, 30))
        except urllib.error.HTTPError as error:
            raise _admin_error(error.code, error.read(), "GET", "/v1/events") from None
        stream = EventStream(response)
        # The mock writes its opening comment once the stream is subscribed (the head can come
        # before): from then on nothing stored is missed.
        stream._read_opening()
        return stream

    def reasons(self) -> List[dict]:
        """``GET /v1/reasons``: every reason APNs sends, with its status and explanation."""
        return self._json("GET", "/v1/reasons")["reasons"]

    # Fault rules

    def add_fault(self, rule: dict) -> dict:
        """``POST /v1/faults`` with one rule (docs/admin-api.md, "Faults"); returns it as listed."""
        return self._json("POST", "/v1/faults", body=rule)

    def add_faults(self, rules: List[dict]) -> List[dict]:
        """``POST /v1/faults`` with a list: all are added, or none (and :class:`AdminError`)."""
        return self._json("POST", "/v1/faults", body=list(rules))["faults"]

    def faults(self) -> List[dict]:
        """``GET /v1/faults``: the rules, with ``remaining`` and ``applied``."""
        return self._json("GET", "/v1/faults")["faults"]

    def remove_fault(self, fault_id: str) -> None:
        """``DELETE /v1/faults/{id}``; :class:`AdminError` 404 for an unknown id."""
        self._request("DELETE", "/v1/faults/" + _segment(fault_id))

    def clear_faults(self) -> None:
        """``DELETE /v1/faults``."""
        self._request("DELETE", "/v1/faults")

    # Devices

    def register_device(
        self,
        token: str,
        *,
        topic: Optional[str] = None,
        environment: Optional[str] = None,
        unregistered_at: Optional[Union[int, str]] = None,
        reason: Optional[str] = None,
    ) -> dict:
        """``POST /v1/devices``: registers (or replaces) a device; returns it."""
        device = _without_none(
            token=token, topic=topic, environment=environment, unregisteredAt=unregistered_at, reason=reason
        )
        return self._json("POST", "/v1/devices", body=device)

    def devices(self) -> dict:
        """``GET /v1/devices``: ``{"policy": …, "devices": [...]}``."""
        return self._json("GET", "/v1/devices")

    def unregister_device(
        self, token: str, *, reason: Optional[str] = None, timestamp: Optional[Union[int, str]] = None
    ) -> dict:
        """``POST /v1/devices/{token}/unregister``: from now on pushes to it get 410 with ``reason``
        (``Unregistered`` by default, or ``ExpiredToken``) and ``timestamp`` (ms or RFC 3339;
        default now)."""
        body = _without_none(reason=reason, timestamp=timestamp)
        return self._json("POST", f"/v1/devices/{_segment(token)}/unregister", body=body)

    def remove_device(self, token: str) -> None:
        """``DELETE /v1/devices/{token}``; :class:`AdminError` 404 for an unknown token."""
        self._request("DELETE", "/v1/devices/" + _segment(token))

    # Channels

    def channels(self, *, bundle_id: Optional[str] = None, environment: Optional[str] = None) -> List[dict]:
        """``GET /v1/channels``: broadcast channels, optionally of one app and environment."""
        query = _without_none(bundleId=bundle_id, environment=environment)
        return self._json("GET", "/v1/channels", query=query)["channels"]

    def create_channel(
        self,
        bundle_id: str,
        *,
        environment: Optional[str] = None,
        channel_id: Optional[str] = None,
        message_storage_policy: Optional[int] = None,
    ) -> dict:
        """``POST /v1/channels``: returns the channel (its ``channelId`` generated unless given)."""
        body = _without_none(
            bundleId=bundle_id, environment=environment, channelId=channel_id,
            messageStoragePolicy=message_storage_policy,
        )
        return self._json("POST", "/v1/channels", body=body)

    def delete_channel(self, channel_id: str) -> None:
        """``DELETE /v1/channels/{channelId}`` (the ID percent-encoded here)."""
        self._request("DELETE", "/v1/channels/" + _segment(channel_id))

    # Clock, state, observability

    def clock(self) -> dict:
        """``GET /v1/clock``: ``{"offsetSeconds", "now", "wallClock"}`` (for a team, also
        ``teamOffsetSeconds``, its own part of the offset)."""
        return self._json("GET", "/v1/clock")

    def advance_clock(self, seconds: int) -> dict:
        """``POST /v1/clock``: moves the mock's time ``seconds`` ahead (tokens age, rate limits
        refill); returns the clock."""
        return self._json("POST", "/v1/clock", body={"advanceSeconds": seconds})

    def reset(self) -> None:
        """``POST /v1/reset``: records, devices, channels, faults, clock and token state back to
        the configuration's (every team's too); for a client made for a team, that team's only."""
        self._request("POST", "/v1/reset")

    def stats(self) -> dict:
        """``GET /v1/stats``."""
        return self._json("GET", "/v1/stats")

    def health(self) -> dict:
        """``GET /v1/health``: ``{"status": "ok", "ports": {...}}``; :class:`AdminError` (503) while
        starting or stopping."""
        return self._json("GET", "/v1/health")

    def ca_pem(self) -> str:
        """``GET /v1/ca.pem``: the CA certificate to trust for the mock's TLS listeners."""
        return self._request("GET", "/v1/ca.pem")[1].decode()

    def metrics(self) -> str:
        """``GET /metrics``: Prometheus text."""
        return self._request("GET", "/metrics")[1].decode()

    def openapi(self) -> dict:
        """``GET /v1/openapi.json``: the API's OpenAPI 3.1 document."""
        return self._json("GET", "/v1/openapi.json")

    # Teams

    def create_team(self, team: dict) -> dict:
        """``POST /v1/teams`` with a team (``{"teamId", "apps", "keys"?, "devices"?}``, see
        docs/admin-api.md): returns the team as listed (``source`` ``"api"``). :class:`AdminError`
        400 names the field at fault; 409 when the team ID, a key ID or an app is taken."""
        return self._json("POST", "/v1/teams", body=team)

    def list_teams(self) -> List[dict]:
        """``GET /v1/teams``: the teams, configured ones first, then those added, in order."""
        return self._json("GET", "/v1/teams")["teams"]

    def delete_team(self, team_id: str) -> None:
        """``DELETE /v1/teams/{teamId}``: the team, its keys (its tokens are refused from now on),
        records, devices, faults, channels and clock go. :class:`AdminError` 404 for an unknown
        team, 409 for one of the configuration file."""
        self._request("DELETE", "/v1/teams/" + _segment(team_id))

    def temporary_team(
        self,
        apps: List[str],
        *,
        devices: Optional[dict] = None,
        environment: Optional[str] = None,
        team_id: Optional[str] = None,
        key_id: Optional[str] = None,
    ) -> "TemporaryTeam":
        """Creates a team of its own for one test (or one test worker): ``apps`` (bundle IDs no
        other team has), a fresh P-256 key made here (its public half is what the mock gets), a
        random team ID and key ID unless given, ``devices`` (``{"policy", "tokens"}``) when given,
        the key's ``environment`` (``any`` by default). Returns a :class:`TemporaryTeam` (team ID,
        key ID, the private key's PEM, a provider token signer, an admin client scoped to it);
        leaving a ``with`` block, or ``delete()``, deletes the team. Needs ``cryptography``."""
        from .tokens import generate_key, random_id

        if isinstance(apps, str):
            apps = [apps]
        owner = self.for_team(None)  # teams are made and deleted unscoped
        private_pem, public_pem = generate_key()
        # A generated ID that happens to be taken (409) is drawn again; given ones are not.
        attempts = 1 if team_id is not None and key_id is not None else 3
        for attempt in range(attempts):
            chosen_team, chosen_key = team_id or random_id(), key_id or random_id()
            key = _without_none(keyId=chosen_key, pem=public_pem, environment=environment)
            body = _without_none(teamId=chosen_team, apps=list(apps), keys=[key], devices=devices)
            try:
                view = owner.create_team(body)
            except AdminError as error:
                if error.status == 409 and attempt + 1 < attempts:
                    continue
                raise
            return TemporaryTeam(owner, view, chosen_key, private_pem)
        raise AssertionError("unreachable")  # pragma: no cover

    # HTTP

    def _make_request(self, method: str, path: str, query=None, body=None, headers=None) -> urllib.request.Request:
        url = self._base + path
        if query:
            url += "?" + urllib.parse.urlencode({name: _text(value) for name, value in query.items()})
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        if self.team:
            request.add_header(TEAM_HEADER, self.team)
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        return request

    def _request(self, method: str, path: str, query=None, body=None, timeout=None):
        request = self._make_request(method, path, query=query, body=body)
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            content = error.read()
            if error.code == 408 and path == "/v1/notifications/wait":
                return error.code, content
            raise _admin_error(error.code, content, method, path) from None

    def _json(self, method: str, path: str, query=None, body=None) -> Any:
        return json.loads(self._request(method, path, query=query, body=body)[1])


class TemporaryTeam:
    """A team made by :meth:`AdminClient.temporary_team`, for one test: ``team_id``, ``key_id``,
    ``private_key_pem`` (the key's PKCS #8 PEM, as a ``.p8`` file holds it, for your APNs client),
    ``apps``, ``team`` (the team as the mock listed it) and ``admin``, an :class:`AdminClient`
    scoped to the team. ``provider_token()`` signs a token the mock attributes to the team.
    ``delete()`` (or leaving a ``with`` block) deletes the team; deleting twice is harmless."""

    def __init__(self, owner: AdminClient, team: dict, key_id: str, private_key_pem: str) -> None:
        self._owner = owner
        self.team = team
        self.team_id: str = team["teamId"]
        self.key_id = key_id
        self.private_key_pem = private_key_pem
        self.apps: List[str] = list(team.get("apps") or [])
        self.admin = owner.for_team(self.team_id)
        self.deleted = False

    def provider_token(self, issued_at: Optional[Union[int, float]] = None) -> str:
        """An ES256 provider token of this team's key: ``iss`` the team ID, ``kid`` the key ID,
        ``iat`` ``issued_at`` (whole seconds since the epoch; now by default)."""
        from .tokens import provider_token

        return provider_token(self.private_key_pem, self.key_id, self.team_id, issued_at)

    def delete(self) -> None:
        """``DELETE /v1/teams/{teamId}``, once; a team already gone (404) counts as deleted."""
        if self.deleted:
            return
        try:
            self._owner.delete_team(self.team_id)
        except AdminError as error:
            if error.status != 404:
                raise
        self.deleted = True

    def __enter__(self) -> "TemporaryTeam":
        return self

    def __exit__(self, *exc) -> None:
        self.delete()

    def __repr__(self) -> str:
        return f"TemporaryTeam(team_id={self.team_id!r}, key_id={self.key_id!r}, apps={self.apps!r})"


class EventStream:
    """An open ``/v1/events`` stream: iterate it for :class:`Event` values; ``close()`` (or leaving
    a ``with`` block) closes the connection."""

    def __init__(self, response) -> None:
        self._response = response
        self.closed = False

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._response.close()

    def _read_opening(self) -> None:
        while True:
            raw = self._response.readline()
            if not raw or raw in (b"\n", b"\r\n"):
                return

    def __iter__(self) -> Iterator[Event]:
        kind, data, event_id = None, [], None
        while not self.closed:
            # A read times out only when not even a keep-alive came for 30 s: the socket can no
            # longer be read then (socket.timeout propagates).
            raw = self._response.readline()
            if not raw:
                return
            line = raw.decode("utf-8").rstrip("\r\n")
            if line == "":
                if data:
                    text = "\n".join(data)
                    try:
                        value = json.loads(text)
                    except ValueError:
                        value = text
                    yield Event(kind or "message", value, event_id)
                kind, data, event_id = None, [], None
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "data":
                    data.append(value)
                elif name == "event":
                    kind = value
                elif name == "id":
                    event_id = value


def _admin_error(status: int, content: bytes, method: str, path: str) -> AdminError:
    text = content.decode(errors="replace")
    try:
        message = json.loads(text)["error"]
    except (ValueError, KeyError, TypeError):
        message = text or f"HTTP {status}"
    return AdminError(status, message, method, path)


def _query(filters: Dict[str, Any]) -> Dict[str, Any]:
    query = {}
    for name, value in filters.items():
        if name not in _FILTERS:
            raise TypeError(f"unknown filter {name!r} (expected one of {', '.join(_FILTERS)})")
        if value is not None:
            query[_FILTERS[name]] = value
    return query


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _without_none(**fields: Any) -> Dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}
