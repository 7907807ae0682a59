"""The admin API against its own OpenAPI document (GET /v1/openapi.json), with schemathesis.

scripts/client-tests runs this against a live mock (MOCK_ADMIN_URL, MOCK_APNS_URL …): every
operation gets a bounded number of generated requests, valid and invalid; every answer must be
one the document describes (status, content type, body schema), none may be a 5xx, none may take
longer than the documented timeouts, and afterwards the mock still answers a push with 200.
"""

import os
import time

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

ADMIN_URL = os.environ["MOCK_ADMIN_URL"]
# The document the server serves is the one under test.
schema = schemathesis.openapi.from_url(ADMIN_URL + "/v1/openapi.json")
schema.config.update(base_url=ADMIN_URL)

# Generated cases per operation: enough to reach every field's edges, few enough that the whole
# run stays within a minute or two.
EXAMPLES = int(os.environ.get("OPENAPI_EXAMPLES", "40"))
# The longest any admin answer may take here: /wait's timeout is clamped to 0.2 s below, and every
# other answer is immediate.
ANSWER_SECONDS = 10


# Answers that are right for a request the schema allows, per operation: rules the schema cannot
# say (a reason sent only with its own status, fields that only some actions take, apps that are
# not configured, a Last-Event-ID past 64 bits, a team's key that is no P-256 PEM) are a 400
# naming the field; /wait's 408 is "not yet".
RIGHTFUL_REFUSALS = {
    "/v1/teams": {400},
    "/v1/events": {400},
    "/v1/notifications/wait": {408},
    "/v1/faults": {400},
    "/v1/devices": {400},
    "/v1/channels": {400},
    "/v1/clock": {400},
}


def teams_disagree(case):
    """A case that scopes to one team in the query and another in APNS-Mock-Team: each is allowed
    alone, the two together are a 400 naming `team` (the schema cannot say that)."""
    query = (case.query or {}).get("team")
    header = next((value for name, value in (case.headers or {}).items() if name.lower() == "apns-mock-team"), None)
    return query is not None and header is not None and str(query) != str(header)


def bounded(case):
    """A case the run can afford: /wait waits at most 0.2 s (the document allows 300, and
    its default is 5)."""
    if case.operation.path == "/v1/notifications/wait":
        if case.query is None:
            case.query = {}
        value = case.query.get("timeout", 5)
        try:
            if float(value) > 0.2:
                case.query["timeout"] = 0.2
        except (TypeError, ValueError):
            pass
    return case


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_answer_is_documented(case):
    bounded(case)
    started = time.monotonic()
    # An event stream never ends by itself: schemathesis reads one for the request's timeout,
    # then validates what came.
    timeout = 0.3 if case.operation.path == "/v1/events" else ANSWER_SECONDS
    response = case.call(timeout=timeout)
    assert time.monotonic() - started < ANSWER_SECONDS + timeout
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.status_code} {response.text}"
    excluded = []
    if response.status_code in RIGHTFUL_REFUSALS.get(case.operation.path, ()) or (
            response.status_code == 400 and teams_disagree(case)):
        excluded.append(positive_data_acceptance)
    case.validate_response(response, excluded_checks=excluded)
