"""A fake Prolific, held to Prolific's own contract, for the tests and the crowd simulator.

Prolific cannot be reached from our machines, so the Prolific code is tested (and ``turkflow simulate
--provider prolific`` runs) against this small HTTP server on a free local port. Given Prolific's OpenAPI
description (``contract``, ``../shared/prolific/publicapi.yaml``), it checks every request it receives
and every response it gives against it with openapi-core (``prolific_contract.py``); a request or
response that breaks it is recorded in ``violations`` (the tests' fixture fails on any; a test that means
to send a bad request takes its violations with ``take_violations()``). A request the contract refuses
is answered 400, as Prolific would. Without a contract (``contract=None``) nothing is checked.

It plays Prolific's states: studies (UNPUBLISHED; PUBLISHING for a moment after PUBLISH, then ACTIVE; SCHEDULED
when a person schedules a draft in Prolific's app; PAUSED, by the researcher or by Prolific itself when the
median completion time makes the study pay under its hourly minimum, as Prolific's help says it does;
AWAITING REVIEW once every place is used and the last submissions wait for review, which takes new
participants again only after a START; COMPLETED), submissions (RESERVED, ACTIVE, AWAITING
REVIEW, APPROVED, REJECTED, RETURNED, TIMED-OUT; a timed-out one may be approved, as Prolific lets a
researcher, unless ``approves_timed_out`` is off), submission lists filtered by study and status and
ordered by start (at most ``max_page_size`` a page), bonus set-up and payment (paying the same bulk id
twice pays twice, every payment is recorded, and ``lose_pays`` makes the next pay calls fail without
paying), participant groups and the allow/block list filters that read them, completion codes whose
actions add a participant to a group or take them out of it (the group must exist when the code is set;
the group lists the study as a feeder), webhook secrets and subscriptions (a new subscription's
``X-Hook-Secret`` comes back as a response header and confirms it through the API, either way Prolific
documents it: in the body of a POST to the subscription, as its API description says, or in the path, as
its "Monitoring study progress" guide says; ``hook_confirmation`` keeps only one of them; nothing is sent
to the target before), test participants and test studies as Prolific runs them (a beta feature a
workspace must have enabled, ``test_studies_enabled``: one test participant per researcher account; a test
study's rewards and bonuses are charged to the workspace's balance and refunded within 24 hours,
``refund_test_charges``). It refuses what Prolific refuses beyond the contract's shapes: a
study field Prolific does not have (``STUDY_FIELDS``, the contract's BaseStudy), a filter it does not know
or a group that is not the workspace's, a reward under GBP 6 / USD 8 an hour (``currency``) at the
estimated time, a maximum time under 2 + 2 x estimate + 2 x sqrt(estimate) minutes or of 24 hours or
more. The participant's
side has no API, so helpers play it: ``reserve``, ``start``, ``complete``, ``return_submission``,
``time_out``, ``fill_places``, and ``send_webhook`` POSTs a signed event (with its ``X-Event-ID``) to a URL
of ours; ``make_group`` is a group the researcher made by hand in Prolific's app. A browser plays a
participant through ``/participant/take`` and ``/participant/complete`` (``turkflow prolific
rehearse``); ``listing`` says what is published, test or real, for a rehearsal to end with.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Optional

import requests
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.routing import Map, Rule
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

# Prolific's own description of its API, shipped in the package (its source and license beside it).
SPEC_PATH = Path(__file__).resolve().parents[1] / "hits" / "prolific" / "publicapi" / "publicapi.yaml"
# Submissions in these statuses hold one of the study's places; the others gave theirs back.
HOLDS_PLACE = {"RESERVED", "ACTIVE", "AWAITING REVIEW", "APPROVED", "PARTIALLY APPROVED"}
# Prolific's study transition table (the spec's description of POST /studies/{id}/transition/).
STUDY_TRANSITIONS = {
    ("UNPUBLISHED", "PUBLISH"): "PUBLISHING",  # then ACTIVE, a moment later (``publishing_requests``)
    ("UNPUBLISHED", "SCHEDULE_PUBLISH"): "SCHEDULED",
    ("SCHEDULED", "CANCEL_PUBLISH"): "UNPUBLISHED",
    ("ACTIVE", "PAUSE"): "PAUSED",
    ("ACTIVE", "STOP"): "COMPLETED",
    ("PAUSED", "START"): "ACTIVE",
    ("PAUSED", "STOP"): "COMPLETED",
    # A study waiting for review takes new participants again only once started, its places grown.
    ("AWAITING REVIEW", "START"): "ACTIVE",
    ("AWAITING REVIEW", "STOP"): "COMPLETED",
}
# Prolific's longest maximum time: always under 24 hours.
MAX_ALLOWED_MINUTES = 24 * 60
# Completed submissions after which Prolific judges a study's pay at their median completion time.
UNDERPAID_AFTER = 3
# How long Prolific takes to refund what a test study's participants were paid ("within 24 hours").
TEST_REFUND_SECONDS = 24 * 3600
# What may change on a published study (the spec's description of PATCH /studies/{id}/).
PUBLISHED_FIELDS = {"internal_name", "total_available_places", "submissions_config"}
REJECT_MESSAGE_MIN = 100
PARTICIPANT_PATH = "/participant/"  # a rehearsal's participant pages (``FakeProlific._participant``)
# A study's fields: the properties of the contract's BaseStudy (tests/test_prolific_launch.py keeps the two
# the same); Prolific refuses any other.
STUDY_FIELDS = {
    "access_details", "completion_codes", "content_warning_details", "content_warnings", "credential_pool_id",
    "data_collection_id", "data_collection_metadata", "data_collection_method", "description",
    "device_compatibility", "estimated_completion_time", "external_study_url", "filter_set_id",
    "filter_set_version", "filters", "has_credentials", "internal_name", "is_external_study_url_secure",
    "maximum_allowed_time", "metadata", "naivety_distribution_rate", "name", "peripheral_requirements",
    "project", "prolific_id_option", "reward", "study_labels", "submissions_config", "total_available_places",
}
# The filters this fake knows (Prolific has many more, such as age; turkflow sends only these two).
GROUP_FILTERS = {"participant_group_allowlist", "participant_group_blocklist"}
# Prolific's least pay an hour, in the minor unit of the workspace's currency ("Prolific's payment
# principles": GBP 6 / USD 8).
MIN_HOURLY = {"GBP": 600, "USD": 800}


class Refused(Exception):
    """The fake Prolific would not let a participant do this (a test helper was asked the impossible)."""


class ApiError(Exception):
    """Answer the current request with Prolific's error body."""

    def __init__(self, status: int, detail: Any):
        self.status, self.detail = status, detail


def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class Study:
    id: str
    fields: dict[str, Any]
    status: str = "UNPUBLISHED"
    stopped: bool = False
    date_created: str = field(default_factory=_now)
    published_at: Optional[str] = None
    test: bool = False  # a test study: only the workspace's test participants see it
    paused_by_prolific: bool = False  # Prolific paused it: it pays under the minimum at its median time
    publishing_left: int = 0  # further requests it stays PUBLISHING for


@dataclass
class Submission:
    id: str
    study_id: str
    participant_id: str
    status: str
    started_at: str = field(default_factory=_now)
    completed_at: Optional[str] = None
    study_code: Optional[str] = None
    bonus_payments: list[int] = field(default_factory=list)


@dataclass
class TestCharge:
    """What a test study's submission cost the workspace (a reward or a bonus), refunded within 24 hours."""

    submission_id: str
    cents: int
    charged_at: float
    refunded: bool = False


@dataclass
class BulkBonus:
    id: str
    study_id: str
    lines: list[tuple[str, int]]  # (submission id, cents)
    fees_cents: int


@dataclass
class Payment:
    """One bonus paid to one submission by one call of the pay endpoint."""

    bulk_id: str
    submission_id: str
    participant_id: str
    cents: int


@dataclass
class Group:
    id: str
    workspace_id: str
    name: str
    description: Optional[str]
    members: dict[str, str] = field(default_factory=dict)  # participant id -> when added


class FakeProlific:
    """Prolific's API on ``url`` (use it as the client's base URL) with ``token`` as the only valid token.

    ``contract`` is Prolific's OpenAPI description to check every call against (None: nothing is checked;
    a file that is missing, or openapi-core not installed, is an error: asked to check, the fake never
    quietly does not). ``id_prefix`` starts every id it makes, so two fakes used on one database never
    give two studies one id (Prolific's ids are unique).
    """

    def __init__(self, token: str = "test-token", workspace_id: str = "workspace-1",
                 balance_cents: int = 100_000, fee_percent: int = 0, contract: Optional[Path] = SPEC_PATH,
                 id_prefix: str = "", currency: str = "GBP"):
        if contract is not None:
            from turkflow.simulator.prolific_contract import Contract  # openapi-core: a test dependency

            self.contract: Optional[Contract] = Contract(contract)
        else:
            self.contract = None
        self.token, self.workspace_id, self.id_prefix = token, workspace_id, id_prefix
        self.user = {"id": "researcher-1", "email": "lab@example.org"}
        self.balance_cents, self.fee_percent, self.currency = balance_cents, fee_percent, currency
        self.violations: list[str] = []
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request received
        self.studies: dict[str, Study] = {}
        self.submissions: dict[str, Submission] = {}
        self.bulk_bonuses: dict[str, BulkBonus] = {}
        self.payments: list[Payment] = []
        self.pay_later = False  # True: payments wait for settle_payments(), as Prolific pays asynchronously
        self.unsettled: list[Payment] = []
        self.lose_pays = 0  # the next N pay calls fail (500) and pay nothing: a pay that never took effect
        self.approves_timed_out = True  # Prolific lets a researcher approve a TIMED-OUT submission by hand
        self.max_page_size: Optional[int] = None  # the most a list answers per page, whatever was asked
        self.groups: dict[str, Group] = {}
        self.secrets: dict[str, dict[str, str]] = {}
        self.subscriptions: dict[str, dict[str, Any]] = {}
        self.hook_secrets: dict[str, str] = {}  # subscription id -> the X-Hook-Secret sent to its target
        self.test_participants: list[str] = []
        self.test_studies_enabled = True  # Prolific's beta: enabled per workspace on request
        self.test_charges: list[TestCharge] = []
        self.publishing_requests = 0  # further API requests a study stays PUBLISHING for after PUBLISH
        self.hook_confirmation = "either"  # "body" (the API description), "path" (the guide) or "either"
        self.rehearsal_web: Optional[tuple[str, str]] = None  # (public origin, local origin) for participants
        self.messages: list[tuple[str, str, str]] = []  # (study id, participant id, body) of every message
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._urls = Map([Rule(path, endpoint=name, methods=[method]) for method, path, name in self._ROUTES],
                         strict_slashes=False)
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True, request_handler=_QuietHandler)
        self.url = f"http://127.0.0.1:{self._server.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> "FakeProlific":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def take_violations(self) -> list[str]:
        """The contract violations so far, forgotten (for tests that send a bad request on purpose)."""
        with self._lock:
            taken, self.violations = self.violations, []
        return taken

    def new_id(self, kind: str) -> str:
        return f"{self.id_prefix}{kind}-{next(self._ids)}"

    # ---- the HTTP side -------------------------------------------------------------------------------

    _ROUTES = [
        ("GET", "/api/v1/users/me/", "get_me"),
        ("GET", "/api/v1/workspaces/", "list_workspaces"),
        ("GET", "/api/v1/workspaces/<workspace_id>/balance/", "get_balance"),
        ("GET", "/api/v1/studies/", "list_studies"),
        ("POST", "/api/v1/studies/", "create_study"),
        ("GET", "/api/v1/studies/<study_id>/", "get_study"),
        ("PATCH", "/api/v1/studies/<study_id>/", "update_study"),
        ("POST", "/api/v1/studies/<study_id>/transition/", "transition_study"),
        ("POST", "/api/v1/studies/<study_id>/test-study", "create_test_study"),
        ("GET", "/api/v1/submissions/", "list_submissions"),
        ("GET", "/api/v1/submissions/<submission_id>/", "get_submission"),
        ("POST", "/api/v1/submissions/<submission_id>/transition/", "transition_submission"),
        ("POST", "/api/v1/submissions/bulk-approve/", "bulk_approve"),
        ("POST", "/api/v1/submissions/bonus-payments/", "set_up_bonuses"),
        ("POST", "/api/v1/bulk-bonus-payments/<bulk_id>/pay/", "pay_bonuses"),
        ("POST", "/api/v1/messages/bulk/", "send_messages"),
        ("POST", "/api/v1/researchers/participants/", "create_test_participant"),
        ("GET", "/api/v1/participant-groups/", "list_groups"),
        ("POST", "/api/v1/participant-groups/", "create_group"),
        ("GET", "/api/v1/participant-groups/<group_id>/", "get_group"),
        ("GET", "/api/v1/participant-groups/<group_id>/participants/", "list_members"),
        ("POST", "/api/v1/participant-groups/<group_id>/participants/", "add_members"),
        ("DELETE", "/api/v1/participant-groups/<group_id>/participants/", "remove_members"),
        ("GET", "/api/v1/hooks/secrets/", "list_secrets"),
        ("POST", "/api/v1/hooks/secrets/", "create_secret"),
        ("GET", "/api/v1/hooks/subscriptions/", "list_subscriptions"),
        ("POST", "/api/v1/hooks/subscriptions/", "create_subscription"),
        ("POST", "/api/v1/hooks/subscriptions/<subscription_id>/", "confirm_subscription"),
        ("DELETE", "/api/v1/hooks/subscriptions/<subscription_id>/", "delete_subscription"),
    ]

    def _wsgi(self, environ: dict, start_response: Callable) -> Any:
        """One request at a time: the state is shared, and so is the parsed contract."""
        request = Request(environ)
        with self._lock:
            response = self._answer(request)
            if not request.path.startswith(PARTICIPANT_PATH):  # a participant's page is not the API
                self._check_response(request, response)
        return response(environ, start_response)

    def _answer(self, request: Request) -> Response:
        if request.path.startswith(PARTICIPANT_PATH):  # a browser playing a participant, not the API
            return self._participant(request)
        self.requests.append((request.method, request.path))
        problems = self.contract.request_problems(request) if self.contract else []
        if problems:
            self._violate(request, "request", problems)
            security = all("Security" in problem for problem in problems)
            return _error(401 if security else 400, "; ".join(problems))
        if request.headers.get("Authorization") != f"Token {self.token}":
            return _error(401, "Invalid token.")
        try:
            endpoint, args = self._urls.bind_to_environ(request.environ).match()
        except HTTPException as exc:
            return _error(exc.code or 404, "Not found.")
        try:
            status, body, *headers = getattr(self, f"_{endpoint}")(request, **args)
        except ApiError as exc:
            return _error(exc.status, exc.detail)
        finally:
            self._advance()
        if body is None:
            return Response(status=status, headers=headers[0] if headers else None)
        return Response(json.dumps(body), status=status, mimetype="application/json",
                        headers=headers[0] if headers else None)

    def _check_response(self, request: Request, response: Response) -> None:
        """Our answer must be one Prolific could give (``Contract.response_problems``)."""
        problems = self.contract.response_problems(request, response) if self.contract else []
        if problems:
            self._violate(request, f"response {response.status_code}", problems)

    def _violate(self, request: Request, what: str, problems: list[str]) -> None:
        where = f"{request.method} {request.full_path.rstrip('?')}"
        self.violations.append(f"{where} {what}: {'; '.join(problems)}")

    # -- account --

    def _get_me(self, request: Request) -> tuple[int, Any]:
        return 200, dict(self.user)

    def _list_workspaces(self, request: Request) -> tuple[int, Any]:
        return 200, {"results": [{"id": self.workspace_id, "title": "Lab", "owner": self.user["id"]}]}

    def _get_balance(self, request: Request, workspace_id: str) -> tuple[int, Any]:
        if workspace_id != self.workspace_id:
            raise ApiError(404, "Workspace not found.")
        return 200, {"currency_code": self.currency, "total_balance": self.balance_cents,
                     "available_balance": self.balance_cents}

    # -- studies --

    def _list_studies(self, request: Request) -> tuple[int, Any]:
        return 200, {"results": [self._study_short(study) for study in self.studies.values()]}

    def _create_study(self, request: Request) -> tuple[int, Any]:
        self._check_group_actions(request.get_json())
        self._check_rules(request.get_json(), {})
        study = Study(id=self.new_id("study"), fields=dict(request.get_json()))
        self.studies[study.id] = study
        return 201, self._study_json(study)

    def _get_study(self, request: Request, study_id: str) -> tuple[int, Any]:
        return 200, self._study_json(self._study(study_id))

    def _update_study(self, request: Request, study_id: str) -> tuple[int, Any]:
        study, changes = self._study(study_id), request.get_json()
        self._check_group_actions(changes)
        self._check_rules(changes, study.fields)
        if study.status != "UNPUBLISHED":
            fixed = sorted(set(changes) - PUBLISHED_FIELDS)
            if fixed:
                raise ApiError(400, {name: ["This field cannot be changed once the study is published."]
                                     for name in fixed})
            places = changes.get("total_available_places")
            if places is not None and places < study.fields["total_available_places"]:
                raise ApiError(400, {"total_available_places": ["Places can only be increased."]})
            grown = places is not None and places > study.fields["total_available_places"]
            if grown:
                self._check_funds(study, places - study.fields["total_available_places"])
                study.stopped = False
        else:
            grown = False
        study.fields.update(changes)
        self._settle_study(study, grown)
        return 200, self._study_json(study)

    def _check_group_actions(self, fields: dict[str, Any]) -> None:
        """A completion code's ``ADD_TO_PARTICIPANT_GROUP`` / ``REMOVE_FROM_PARTICIPANT_GROUP`` action must
        name a participant group of the workspace (the contract has already checked its shape)."""
        for code in fields.get("completion_codes") or []:
            for action in code.get("actions") or []:
                group = action.get("participant_group")
                if action.get("action", "").endswith("_PARTICIPANT_GROUP") and group not in self.groups:
                    raise ApiError(400, {"completion_codes": [f"Participant group {group} does not exist."]})

    def _check_rules(self, changes: dict[str, Any], before: dict[str, Any]) -> None:
        """What Prolific refuses of a study beyond its shape: fields it does not have, filters it does not
        know or groups that are not the workspace's, a reward under its least pay an hour at the estimated
        time, and a maximum time under 2 + 2 x estimate + 2 x sqrt(estimate) minutes (the contract's
        description of ``maximum_allowed_time``)."""
        unknown = sorted(set(changes) - STUDY_FIELDS)
        if unknown:
            raise ApiError(400, {name: ["This field is not a field of a study."] for name in unknown})
        for found in changes.get("filters") or []:
            if found.get("filter_id") not in GROUP_FILTERS:
                raise ApiError(400, {"filters": [f"Unknown filter_id {found.get('filter_id')!r}."]})
            strangers = [g for g in found.get("selected_values") or [] if g not in self.groups]
            if strangers:
                raise ApiError(400, {"filters": [f"Participant groups not found: {', '.join(strangers)}."]})
        fields = {**before, **changes}
        estimate, reward = fields.get("estimated_completion_time"), fields.get("reward")
        if estimate is not None and estimate < 1:
            raise ApiError(400, {"estimated_completion_time": ["Ensure this value is at least 1."]})
        if estimate is not None and reward is not None:
            hourly = MIN_HOURLY.get(self.currency, max(MIN_HOURLY.values()))
            if reward * 60 < hourly * estimate:
                raise ApiError(400, {"reward": [f"The reward must be at least {hourly / 100:.2f} "
                                                f"{self.currency} an hour at the estimated time."]})
        longest = fields.get("maximum_allowed_time")
        if longest is not None and longest >= MAX_ALLOWED_MINUTES:
            raise ApiError(400, {"maximum_allowed_time": ["Must be less than 24 hours."]})
        if estimate is not None and longest is not None and longest < 2 + 2 * estimate + 2 * estimate ** 0.5:
            raise ApiError(400, {"maximum_allowed_time": ["Must be at least 2 minutes plus two times the "
                                                          "estimated time plus two times its square root."]})

    def _transition_study(self, request: Request, study_id: str) -> tuple[int, Any]:
        study, action = self._study(study_id), request.get_json()["action"]
        after = STUDY_TRANSITIONS.get((study.status, action))
        if after is None:
            raise ApiError(400, f"A study cannot {action} while it is {study.status}.")
        if action == "PUBLISH":
            missing = [name for name in ("name", "description", "external_study_url", "reward",
                                         "total_available_places", "estimated_completion_time",
                                         "completion_codes") if not study.fields.get(name)]
            if missing:
                raise ApiError(400, {name: ["This field is required to publish."] for name in missing})
            self._check_funds(study, study.fields["total_available_places"])
            study.published_at, study.publishing_left = _now(), self.publishing_requests
        if action == "START" and study.status == "AWAITING REVIEW" and self.places_free(study.id) <= 0:
            raise ApiError(400, "A study awaiting review needs more places before it can start again.")
        study.status, study.stopped = after, action == "STOP"
        study.paused_by_prolific = study.paused_by_prolific and after == "PAUSED"
        self._settle_study(study)
        return 200, self._study_json(study)

    def _check_funds(self, study: Study, places: int) -> None:
        """"To increase places for a study, or to publish a new one, your workspace balance must be high
        enough to cover the costs of the additional participants" (researcher help, "Finance")."""
        reward = int(study.fields.get("reward") or 0) * places
        cost = reward + reward * self.fee_percent // 100
        if cost > self.balance_cents:
            raise ApiError(400, f"Insufficient funds: {places} more places cost {cost}, the workspace balance "
                                f"is {self.balance_cents}.")

    def _create_test_study(self, request: Request, study_id: str) -> tuple[int, Any]:
        """A published copy of a draft that only the workspace's test participants see ("Create a test
        study"); the draft stays a draft."""
        self._check_test_feature()
        study = self._study(study_id)
        if study.status != "UNPUBLISHED" or not self.test_participants:
            raise ApiError(400, "A test study needs a draft study and at least one test participant.")
        test = Study(id=self.new_id("study"), fields=dict(study.fields), status="ACTIVE", published_at=_now(),
                     test=True)
        self.studies[test.id] = test
        return 200, {"study_id": test.id, "study_url": f"https://app.prolific.com/studies/{test.id}"}

    def _create_test_participant(self, request: Request) -> tuple[int, Any]:
        """"Creates a test participant with the same details as the researcher": one per researcher account."""
        self._check_test_feature()
        if self.test_participants:
            raise ApiError(400, "This researcher already has a test participant "
                                f"({self.test_participants[0]}); there is one per researcher account.")
        participant_id = self.new_id("test-participant")
        self.test_participants.append(participant_id)
        return 201, {"participant_id": participant_id}

    def _check_test_feature(self) -> None:
        if not self.test_studies_enabled:
            raise ApiError(403, "Test participants and test studies are not enabled for this workspace "
                                "(a beta feature: ask Prolific support).")

    def refund_test_charges(self, now: Optional[float] = None) -> int:
        """Refund what test studies were charged at least 24 hours before ``now`` (default: every charge, as
        a day later); returns the cents refunded."""
        with self._lock:
            due = [c for c in self.test_charges if not c.refunded
                   and (now is None or now - c.charged_at >= TEST_REFUND_SECONDS)]
            for charge in due:
                charge.refunded = True
                self.balance_cents += charge.cents
            return sum(c.cents for c in due)

    def _charge_test(self, submission: Submission, cents: int) -> None:
        """A test study's participant is paid like any other, from the workspace's balance; Prolific refunds
        it within 24 hours."""
        self.balance_cents -= cents
        self.test_charges.append(TestCharge(submission.id, cents, time.time()))

    # -- submissions --

    def _list_submissions(self, request: Request) -> tuple[int, Any]:
        """Filtered by study and status (Prolific's ``AWAITING_REVIEW`` is ``AWAITING REVIEW``), ordered by
        ``started_at`` either way, a page of at most ``max_page_size``."""
        status = (request.args.get("status") or "").upper().replace("_", " ")
        chosen = [s for s in self.submissions.values()
                  if request.args.get("study") in (None, s.study_id) and status in ("", s.status)]
        ordering = request.args.get("ordering", "")
        if ordering.lstrip("-") == "started_at":
            chosen.sort(key=lambda s: s.started_at, reverse=ordering.startswith("-"))
        page = request.args.get("page", 1, type=int)
        size = request.args.get("page_size", 20, type=int)
        size = min(size, self.max_page_size or size)
        return 200, {"results": [self._submission_short(s) for s in chosen[(page - 1) * size:page * size]]}

    def _get_submission(self, request: Request, submission_id: str) -> tuple[int, Any]:
        submission = self._submission(submission_id)
        return 200, {**self._submission_json(submission), "bonus_payments": list(submission.bonus_payments)}

    def _transition_submission(self, request: Request, submission_id: str) -> tuple[int, Any]:
        submission, body = self._submission(submission_id), request.get_json()
        action = body["action"]
        target = {"APPROVE": "APPROVED", "REJECT": "REJECTED"}.get(action)
        if target is None:
            raise ApiError(400, f"The fake Prolific does not play {action} from the researcher's side.")
        if submission.status != target:  # Prolific ignores a repeated transition
            late = action == "APPROVE" and submission.status == "TIMED-OUT" and self.approves_timed_out
            if submission.status != "AWAITING REVIEW" and not late:
                raise ApiError(400, f"A submission that is {submission.status} cannot be {target.lower()}.")
            if action == "REJECT" and (len(body.get("message") or "") < REJECT_MESSAGE_MIN
                                       or not body.get("rejection_category")):
                raise ApiError(400, {"message": [f"A rejection needs a message of {REJECT_MESSAGE_MIN}+ "
                                                 "characters and a rejection_category."]})
            self._move(submission, target)
        return 200, self._submission_json(submission)

    def _bulk_approve(self, request: Request) -> tuple[int, Any]:
        body = request.get_json()
        if "submission_ids" in body:
            chosen = [self._submission(submission_id) for submission_id in body["submission_ids"]]
        else:
            wanted = set(body["participant_ids"])
            chosen = [s for s in self._submissions_of(body["study_id"]) if s.participant_id in wanted]
        for submission in chosen:
            if submission.status == "AWAITING REVIEW":
                self._move(submission, "APPROVED")
        return 200, "The request to bulk approve has been made successfully."

    def _send_messages(self, request: Request) -> tuple[int, Any]:
        body = request.get_json()
        took_part = {s.participant_id for s in self._submissions_of(self._study(body["study_id"]).id)}
        strangers = [pid for pid in body["ids"] if pid not in took_part]
        if strangers:
            raise ApiError(400, {"ids": [f"Not participants of this study: {', '.join(strangers)}"]})
        self.messages.extend((body["study_id"], pid, body["body"]) for pid in body["ids"])
        return 204, None

    # -- bonuses --

    def _set_up_bonuses(self, request: Request) -> tuple[int, Any]:
        body = request.get_json()
        study = self._study(body.get("study_id") or "")
        lines, unknown = [], []
        for row in (body.get("csv_bonuses") or "").strip().splitlines():
            target, _, amount = row.partition(",")
            taken = [s for s in self._submissions_of(study.id) if target in (s.id, s.participant_id)]
            if not taken:
                unknown.append(target)
                continue
            lines.append((taken[-1].id, int(Decimal(amount.strip()) * 100)))
        if unknown or not lines:
            why = f"These ids did not take part in the study: {', '.join(unknown)}" if unknown else "None."
            raise ApiError(400, {"csv_bonuses": [why]})
        amount = sum(cents for _, cents in lines)
        bulk = BulkBonus(self.new_id("bulk"), study.id, lines, fees_cents=amount * self.fee_percent // 100)
        self.bulk_bonuses[bulk.id] = bulk
        return 201, {"id": bulk.id, "study": study.id, "amount": amount, "fees": bulk.fees_cents, "vat": 0,
                     "total_amount": amount + bulk.fees_cents}

    def _pay_bonuses(self, request: Request, bulk_id: str) -> tuple[int, Any]:
        """Not idempotent, as the spec warns: every call pays every line again."""
        bulk = self.bulk_bonuses.get(bulk_id)
        if bulk is None:
            raise ApiError(404, "Bulk bonus payment not found.")
        if self.lose_pays > 0:
            self.lose_pays -= 1
            raise ApiError(500, "Internal server error.")
        for submission_id, cents in bulk.lines:
            payment = Payment(bulk.id, submission_id, self.submissions[submission_id].participant_id, cents)
            self.unsettled.append(payment)
            if self.studies[bulk.study_id].test:  # charged below with the rest, refunded within 24 hours
                self.test_charges.append(TestCharge(submission_id, cents + cents * self.fee_percent // 100,
                                                    time.time()))
        self.balance_cents -= sum(cents for _, cents in bulk.lines) + bulk.fees_cents
        if not self.pay_later:
            self.settle_payments()
        return 202, "Bonus payments are being processed."

    def settle_payments(self) -> list[Payment]:
        """Make the payments Prolific has accepted show on their submissions (it pays minutes later)."""
        with self._lock:
            settled, self.unsettled = self.unsettled, []
            for payment in settled:
                self.submissions[payment.submission_id].bonus_payments.append(payment.cents)
            self.payments.extend(settled)
        return settled

    # -- participant groups --

    def _list_groups(self, request: Request) -> tuple[int, Any]:
        workspace_id = request.args.get("workspace_id")
        return 200, {"results": [self._group_json(g) for g in self.groups.values()
                                 if workspace_id in (None, g.workspace_id)]}

    def _create_group(self, request: Request) -> tuple[int, Any]:
        body = request.get_json()
        if not body.get("workspace_id"):
            raise ApiError(400, {"workspace_id": ["A workspace or organisation id is required."]})
        group = Group(self.new_id("group"), body["workspace_id"], body["name"], body.get("description"))
        for participant_id in body.get("participant_ids") or []:
            group.members[participant_id] = _now()
        self.groups[group.id] = group
        return 201, self._group_json(group)

    def _get_group(self, request: Request, group_id: str) -> tuple[int, Any]:
        return 200, self._group_json(self._group(group_id))

    def _list_members(self, request: Request, group_id: str) -> tuple[int, Any]:
        return 200, self._members_json(self._group(group_id))

    def _add_members(self, request: Request, group_id: str) -> tuple[int, Any]:
        group = self._group(group_id)
        for participant_id in request.get_json().get("participant_ids") or []:
            group.members.setdefault(participant_id, _now())
        return 200, self._members_json(group)

    def _remove_members(self, request: Request, group_id: str) -> tuple[int, Any]:
        group = self._group(group_id)
        for participant_id in request.get_json().get("participant_ids") or []:
            group.members.pop(participant_id, None)
        return 200, self._members_json(group)

    # -- webhooks --

    def _list_secrets(self, request: Request) -> tuple[int, Any]:
        found = self.secrets.get(request.args["workspace_id"])
        return 200, {"results": [found] if found else []}

    def _create_secret(self, request: Request) -> tuple[int, Any]:
        workspace_id = request.get_json().get("workspace_id") or self.workspace_id
        secret = {"id": self.new_id("secret"), "value": base64.b64encode(hashlib.sha256(  # unique, as Prolific's
            f"{workspace_id}-{uuid.uuid4()}".encode()).digest()).decode(), "workspace_id": workspace_id}
        self.secrets[workspace_id] = secret
        return 201, dict(secret)

    def _list_subscriptions(self, request: Request) -> tuple[int, Any]:
        workspace_id = request.args.get("workspace_id")
        return 200, {"results": [dict(s) for s in self.subscriptions.values()
                                 if workspace_id in (None, s["workspace_id"])]}

    def _create_subscription(self, request: Request) -> tuple[int, Any]:
        body = request.get_json()
        if body["workspace_id"] not in self.secrets:
            raise ApiError(400, "Create a secret for the workspace before subscribing.")
        subscription = {"id": self.new_id("subscription"), "event_type": body["event_type"],
                        "target_url": body["target_url"], "workspace_id": body["workspace_id"],
                        "is_enabled": False}
        self.subscriptions[subscription["id"]] = subscription
        self.hook_secrets[subscription["id"]] = self.new_id("hook-secret")
        # As Prolific documents it ("Monitoring study progress"): the secret that confirms the subscription
        # comes back as a response header; nothing is sent to the target until it is confirmed.
        return 201, {"results": [dict(subscription)]}, {"X-Hook-Secret": self.hook_secrets[subscription["id"]]}

    def _confirm_subscription(self, request: Request, subscription_id: str) -> tuple[int, Any]:
        """Echoing a new subscription's ``X-Hook-Secret`` enables it (``hook_secrets`` holds them). Prolific
        documents two ways: the API description posts the secret in the body to the subscription's id; the
        "Monitoring study progress" guide puts the X-Hook-Secret where the id goes. Both are accepted, unless
        ``hook_confirmation`` keeps one ("body" or "path")."""
        secret = request.get_json()["secret"]
        by_path = {hook: found for found, hook in self.hook_secrets.items()}
        if subscription_id in self.subscriptions and self.hook_confirmation != "path":
            if secret != self.hook_secrets[subscription_id]:
                raise ApiError(400, {"secret": ["This is not the secret sent for this subscription."]})
            subscription = self.subscriptions[subscription_id]
        elif subscription_id in by_path and by_path[subscription_id] in self.subscriptions \
                and self.hook_confirmation != "body" and secret == subscription_id:
            subscription = self.subscriptions[by_path[subscription_id]]
        else:
            raise ApiError(404, "Subscription not found.")
        subscription["is_enabled"] = True
        return 200, dict(subscription)

    def _delete_subscription(self, request: Request, subscription_id: str) -> tuple[int, Any]:
        if self.subscriptions.pop(subscription_id, None) is None:
            raise ApiError(404, "Subscription not found.")
        return 204, None

    # ---- the participant's side (test helpers) --------------------------------------------------------

    def _participant(self, request: Request) -> Response:
        """A browser playing a participant in a rehearsal (``turkflow prolific rehearse``), outside the API:
        ``/participant/take?study=<id>&participant=<id>`` starts a submission and goes to the study's URL
        with Prolific's ids filled in (and remembers the participant in a cookie, as Prolific's sign-in
        does); ``/participant/complete?cc=<code>`` comes back with a completion code, as
        ``app.prolific.com/submissions/complete?cc=`` would: the participant's submission in progress in a
        study with that code (or ``submission=<id>``)."""
        args = request.args
        try:
            if request.path == PARTICIPANT_PATH + "take":
                study_id, participant_id = args.get("study", ""), args.get("participant", "")
                submission_id = self.start(study_id, participant_id)
                url = self.studies[study_id].fields["external_study_url"]
                if self.rehearsal_web is not None and url.startswith(self.rehearsal_web[0] + "/"):
                    url = self.rehearsal_web[1] + url[len(self.rehearsal_web[0]):]
                for name, value in (("PROLIFIC_PID", participant_id), ("STUDY_ID", study_id),
                                    ("SESSION_ID", submission_id)):
                    url = url.replace("{{%" + name + "%}}", value)
                going = Response(status=303, headers={"Location": url})
                going.set_cookie("participant", participant_id)
                return going
            if request.path == PARTICIPANT_PATH + "complete":
                code, participant_id = args.get("cc", ""), request.cookies.get("participant", "")
                submission_id = args.get("submission") or next(
                    (s.id for s in self.submissions.values() if s.participant_id == participant_id
                     and s.status == "ACTIVE" and code in {c["code"] for c in
                                                          self.studies[s.study_id].fields.get("completion_codes") or []}),
                    "")
                self.complete(submission_id, code)
                return Response(f"submission {submission_id} completed with {code}: "
                                f"{self.submissions[submission_id].status}\n", mimetype="text/plain")
        except (Refused, KeyError) as refused:
            return Response(f"refused: {refused}\n", status=409, mimetype="text/plain")
        return Response("not found\n", status=404, mimetype="text/plain")

    def reserve(self, study_id: str, participant_id: str) -> str:
        """A participant takes a place without starting yet (RESERVED); returns the submission id."""
        return self._take_place(study_id, participant_id, "RESERVED")

    def start(self, study_id: str, participant_id: str) -> str:
        """A participant starts the study (ACTIVE): a new submission, or their reserved one."""
        with self._lock:
            reserved = [s for s in self._submissions_of(study_id)
                        if s.participant_id == participant_id and s.status == "RESERVED"]
            if reserved:
                self._move(reserved[0], "ACTIVE")
                return reserved[0].id
            return self._take_place(study_id, participant_id, "ACTIVE")

    def complete(self, submission_id: str, code: str, *, minutes: Optional[float] = None) -> None:
        """The participant returns to Prolific with a completion code; the code's actions run. ``minutes``:
        how long the submission took on Prolific's clock (it started that long ago)."""
        with self._lock:
            submission = self._submission(submission_id, helper=True)
            if minutes is not None:
                started = datetime.now(timezone.utc) - timedelta(minutes=minutes)
                submission.started_at = started.isoformat().replace("+00:00", "Z")
            if submission.status != "ACTIVE":
                raise Refused(f"submission {submission_id} is {submission.status}, not ACTIVE")
            study = self.studies[submission.study_id]
            codes = {c["code"]: c for c in study.fields.get("completion_codes") or []}
            if code not in codes:
                raise Refused(f"{code!r} is not a completion code of study {submission.study_id}")
            submission.completed_at, submission.study_code = _now(), code
            actions = [a["action"] for a in codes[code]["actions"]]
            for action in codes[code]["actions"]:  # the groups were checked when the code was set
                if action["action"] == "ADD_TO_PARTICIPANT_GROUP":
                    group = self.groups[action["participant_group"]]
                    group.members.setdefault(submission.participant_id, _now())
                elif action["action"] == "REMOVE_FROM_PARTICIPANT_GROUP":
                    self.groups[action["participant_group"]].members.pop(submission.participant_id, None)
            self._move(submission, "APPROVED" if "AUTOMATICALLY_APPROVE" in actions else "AWAITING REVIEW")
            self._judge_pay(study)

    def _judge_pay(self, study: Study) -> None:
        """Prolific judges a study's pay at the median completion time of its completed submissions and
        pauses an active study that pays under its hourly minimum there, asking the researcher for
        adjustment payments (researcher help, "Underpaying studies")."""
        taken = median_minutes([s for s in self._submissions_of(study.id) if s.completed_at])
        if taken is None or study.status != "ACTIVE":
            return
        hourly = MIN_HOURLY.get(self.currency, max(MIN_HOURLY.values()))
        if int(study.fields.get("reward") or 0) * 60 < hourly * taken:
            study.status, study.paused_by_prolific = "PAUSED", True

    def median_minutes(self, study_id: str) -> Optional[float]:
        """The median completion time of a study's completed submissions, as Prolific computes it (None
        before it judges: fewer than ``UNDERPAID_AFTER``)."""
        with self._lock:
            return median_minutes([s for s in self._submissions_of(study_id) if s.completed_at])

    def make_group(self, name: str, participant_ids: list[str]) -> str:
        """A participant group the researcher made by hand in Prolific's app; returns its id."""
        with self._lock:
            group = Group(self.new_id("group"), self.workspace_id, name, None)
            for participant_id in participant_ids:
                group.members[participant_id] = _now()
            self.groups[group.id] = group
            return group.id

    def return_submission(self, submission_id: str) -> None:
        """The participant gives the submission back; its place opens again."""
        self._end(submission_id, "RETURNED")

    def time_out(self, submission_id: str) -> None:
        """The participant ran past the study's maximum time; its place opens again."""
        self._end(submission_id, "TIMED-OUT")

    def fill_places(self, study_id: str, code: str) -> list[str]:
        """Fresh participants take and complete every free place; returns their submission ids. A study
        with an allow list gets fresh members of its first allowed group (nobody else could take it)."""
        with self._lock:
            done = []
            allowed = [g for found in self.studies[study_id].fields.get("filters") or []
                       if found["filter_id"] == "participant_group_allowlist"
                       for g in found["selected_values"] if g in self.groups]
            while self.places_free(study_id) > 0:
                participant_id = self.new_id("participant")
                if allowed:
                    self.groups[allowed[0]].members[participant_id] = _now()
                submission_id = self.start(study_id, participant_id)
                self.complete(submission_id, code)
                done.append(submission_id)
            return done

    def places_free(self, study_id: str) -> int:
        with self._lock:
            study = self.studies[study_id]
            return int(study.fields.get("total_available_places") or 0) - self._places_taken(study_id)

    def paid(self, submission_id: str) -> list[int]:
        """Every bonus paid on a submission, in cents (a double payment shows twice)."""
        with self._lock:
            return [p.cents for p in self.payments if p.submission_id == submission_id]

    def send_webhook(self, url: str, payload: dict[str, Any], *, secret: Optional[str] = None,
                     timestamp: Optional[int] = None, signature: Optional[str] = None,
                     event_id: Optional[str] = None) -> requests.Response:
        """POST an event as Prolific does: JSON body, UNIX timestamp, base64 HMAC-SHA256 of timestamp+body
        with the workspace's secret (or the given one; a given ``signature`` replaces the real one), and the
        event's ``X-Event-ID`` (the same on a redelivery: pass the first one's)."""
        body = json.dumps(payload).encode()
        sent_at = str(int(time.time()) if timestamp is None else timestamp)
        key = secret if secret is not None else self.secrets[self.workspace_id]["value"]
        digest = hmac.new(key.encode(), sent_at.encode() + body, hashlib.sha256).digest()
        real = base64.b64encode(digest).decode()
        return requests.post(url, data=body, timeout=10, headers={
            "Content-Type": "application/json", "X-Prolific-Request-Timestamp": sent_at,
            "X-Event-ID": event_id or uuid.uuid4().hex,  # globally unique, as Prolific's are
            "X-Prolific-Request-Signature": signature if signature is not None else real})

    def submission_event(self, submission_id: str) -> dict[str, Any]:
        """A ``submission.status.change`` payload. Its shape is not in the OpenAPI description; this one
        mirrors the spec's ``SubscriptionEvent`` (event type, the submission as resource, its new status)."""
        with self._lock:
            submission = self._submission(submission_id, helper=True)
            return {"event_type": "submission.status.change", "resource_id": submission.id,
                    "status": submission.status, "study_id": submission.study_id,
                    "participant_id": submission.participant_id}

    # ---- state ---------------------------------------------------------------------------------------

    def _take_place(self, study_id: str, participant_id: str, status: str) -> str:
        with self._lock:
            study = self.studies.get(study_id)
            if study is None or study.status != "ACTIVE":
                raise Refused(f"study {study_id} is not taking participants ({study and study.status})")
            if study.test and participant_id not in self.test_participants:
                raise Refused(f"study {study_id} is a test study, for the workspace's test participant only")
            if self.places_free(study_id) <= 0:
                raise Refused(f"study {study_id} has no free place")
            self._check_filters(study, participant_id)
            limit = (study.fields.get("submissions_config") or {}).get("max_submissions_per_participant") or 1
            mine = [s for s in self._submissions_of(study_id) if s.participant_id == participant_id]
            if limit != -1 and len(mine) >= limit:
                raise Refused(f"participant {participant_id} already has {len(mine)} of {limit} submissions")
            if any(s.status in ("RESERVED", "ACTIVE") for s in mine):
                raise Refused(f"participant {participant_id} already has a submission in progress")
            submission = Submission(self.new_id("submission"), study_id, participant_id, status)
            self.submissions[submission.id] = submission
            self._settle_study(study)
            return submission.id

    def _check_filters(self, study: Study, participant_id: str) -> None:
        for found in study.fields.get("filters") or []:
            members = [participant_id in self.groups[g].members for g in found.get("selected_values", [])
                       if g in self.groups]
            if found["filter_id"] == "participant_group_allowlist" and not any(members):
                raise Refused(f"participant {participant_id} is in none of the study's allowed groups")
            if found["filter_id"] == "participant_group_blocklist" and any(members):
                raise Refused(f"participant {participant_id} is in a group the study blocks")

    def _end(self, submission_id: str, status: str) -> None:
        with self._lock:
            submission = self._submission(submission_id, helper=True)
            if submission.status not in ("RESERVED", "ACTIVE"):
                raise Refused(f"submission {submission_id} is {submission.status}, not in progress")
            self._move(submission, status)

    def _move(self, submission: Submission, status: str) -> None:
        study = self.studies[submission.study_id]
        if status == "APPROVED" and submission.status != "APPROVED" and study.test:
            reward = int(study.fields.get("reward") or 0)
            self._charge_test(submission, reward + reward * self.fee_percent // 100)
        submission.status = status
        self._settle_study(study)

    def _advance(self) -> None:
        """A request was answered: a study publishing for ``publishing_requests`` requests is active."""
        for study in self.studies.values():
            if study.status == "PUBLISHING" and study.publishing_left > 0:
                study.publishing_left -= 1
            elif study.status == "PUBLISHING":
                study.status = "ACTIVE"
                self._settle_study(study)

    def _settle_study(self, study: Study, grown: bool = False) -> None:
        """A published study runs while it has free places or work in progress, then waits for review,
        then is complete. Growing its places makes a complete one active again; one awaiting review takes
        new participants only once started (START). Paused, stopped, scheduled and publishing studies stay
        so."""
        if study.status in ("UNPUBLISHED", "PAUSED", "PUBLISHING", "SCHEDULED") or study.stopped:
            return
        statuses = {s.status for s in self._submissions_of(study.id)}
        in_progress = bool({"RESERVED", "ACTIVE"} & statuses)
        takes_new = study.status == "ACTIVE" or (study.status == "COMPLETED" and grown)
        if in_progress or (takes_new and self.places_free(study.id) > 0):
            study.status = "ACTIVE"
        elif "AWAITING REVIEW" in statuses:
            study.status = "AWAITING REVIEW"
        else:
            study.status = "COMPLETED"

    def _places_taken(self, study_id: str) -> int:
        return sum(1 for s in self._submissions_of(study_id) if s.status in HOLDS_PLACE)

    def _submissions_of(self, study_id: str) -> list[Submission]:
        return [s for s in self.submissions.values() if s.study_id == study_id]

    def _study(self, study_id: str) -> Study:
        if study_id not in self.studies:
            raise ApiError(404, "Study not found.")
        return self.studies[study_id]

    def _submission(self, submission_id: str, helper: bool = False) -> Submission:
        if submission_id not in self.submissions:
            if helper:
                raise Refused(f"no submission {submission_id}")
            raise ApiError(404, "Submission not found.")
        return self.submissions[submission_id]

    def _group(self, group_id: str) -> Group:
        if group_id not in self.groups:
            raise ApiError(404, "Participant group not found.")
        return self.groups[group_id]

    def listing(self) -> list[dict[str, Any]]:
        """Every study as a researcher sees it in Prolific's app: test or real, its status, who it admits,
        where it sends participants and its places; what a rehearsal ends with."""
        with self._lock:
            return [{"id": study.id, "kind": "test" if study.test else "real", "status": study.status,
                     "name": study.fields.get("name") or "", "url": study.fields.get("external_study_url") or "",
                     "places": int(study.fields.get("total_available_places") or 0),
                     "taken": self._places_taken(study.id),
                     "paused_by_prolific": study.paused_by_prolific,
                     "published": study.published_at is not None}
                    for study in self.studies.values()]

    # ---- Prolific's JSON ---------------------------------------------------------------------------

    def _study_json(self, study: Study) -> dict[str, Any]:
        return {**study.fields, "id": study.id, "status": study.status,
                "is_ready_to_publish": study.status == "UNPUBLISHED",
                "places_taken": self._places_taken(study.id),
                "number_of_submissions": len(self._submissions_of(study.id))}

    def _study_short(self, study: Study) -> dict[str, Any]:
        return {"id": study.id, "name": study.fields.get("name") or "", "status": study.status,
                "internal_name": study.fields.get("internal_name"),
                "total_available_places": study.fields.get("total_available_places"),
                "places_taken": self._places_taken(study.id),
                "number_of_submissions": len(self._submissions_of(study.id)),
                "reward": study.fields.get("reward"), "date_created": study.date_created,
                "published_at": study.published_at}

    @staticmethod
    def _submission_short(submission: Submission) -> dict[str, Any]:
        return {"id": submission.id, "participant_id": submission.participant_id, "status": submission.status,
                "started_at": submission.started_at, "completed_at": submission.completed_at,
                "has_siblings": True, "study_code": submission.study_code}

    @staticmethod
    def _submission_json(submission: Submission) -> dict[str, Any]:
        return {"id": submission.id, "participant": submission.participant_id, "status": submission.status,
                "study_id": submission.study_id, "started_at": submission.started_at,
                "completed_at": submission.completed_at, "entered_code": submission.study_code}

    def _group_json(self, group: Group) -> dict[str, Any]:
        return {"id": group.id, "name": group.name, "workspace_id": group.workspace_id,
                "description": group.description, "participant_count": len(group.members),
                "is_deleted": False, "feeder_studies": self._feeder_studies(group)}

    def _feeder_studies(self, group: Group) -> list[dict[str, Any]]:
        """The studies whose completion codes add participants to the group or remove them from it."""
        feeders = []
        for study in self.studies.values():
            codes = [{"code": code["code"], "code_type": code.get("code_type"), "action": action["action"]}
                     for code in study.fields.get("completion_codes") or []
                     for action in code.get("actions") or [] if action.get("participant_group") == group.id]
            if codes:
                feeders.append({"id": study.id, "name": study.fields.get("name"), "status": study.status,
                                "internal_name": study.fields.get("internal_name"),
                                "feeder_completion_codes": codes})
        return feeders

    @staticmethod
    def _members_json(group: Group) -> dict[str, Any]:
        return {"results": [{"participant_id": participant_id, "datetime_created": added}
                            for participant_id, added in group.members.items()]}


class _QuietHandler(WSGIRequestHandler):
    """No access log: ``requests`` and ``violations`` already say what was asked."""

    def log_request(self, code: object = "-", size: object = "-") -> None:
        pass


def median_minutes(completed: list[Submission]) -> Optional[float]:
    """The median of the submissions' completion times, in minutes (None for fewer than
    ``UNDERPAID_AFTER``)."""
    if len(completed) < UNDERPAID_AFTER:
        return None

    def moment(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    return statistics.median((moment(s.completed_at) - moment(s.started_at)).total_seconds() / 60
                             for s in completed)


def _error(status: int, detail: Any) -> Response:
    """Prolific's error body (the spec's ``Error`` schema)."""
    body = {"error": {"status": status, "error_code": status * 1000, "title": HTTP_STATUS_CODES[status],
                      "detail": detail}}
    return Response(json.dumps(body), status=status, mimetype="application/json")

