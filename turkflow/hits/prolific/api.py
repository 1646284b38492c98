"""Prolific's REST API, one small function per operation turkflow uses.

Each function takes a ``ProlificClient`` and plain values and returns Prolific's JSON as it came (the
field names are Prolific's, documented in ``../shared/prolific/publicapi.yaml``). Nothing here retries:
a refused or failed call raises ``ProlificError`` (a ``turkflow.errors.ProviderError``, the only import
from turkflow) and the caller (a Celery task with bounded backoff) decides. That matters for the one call
that is not idempotent, ``pay_bonus_payments``: a blind retry would pay twice, so the provider records its
intent first and reconciles from Prolific's state before ever calling it again (see docs/prolific.md).

Money: ``reward`` and every amount Prolific returns are in the study currency's minor unit (pence or
cents); only the bonus CSV takes a decimal amount ("1.50"), which ``bonus_csv`` writes from cents.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any, Optional
from urllib.parse import urlsplit

import requests
from urllib3.exceptions import ConnectTimeoutError  # also the base of "connection refused"

from turkflow.errors import ProviderError

DEFAULT_BASE_URL = "https://api.prolific.com"
COMPLETE_URL = "https://app.prolific.com/submissions/complete?cc="
# Prolific fills these in when it sends a participant to the study URL.
URL_PARAMETERS = "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
STUDY_ACTIONS = ("PUBLISH", "PAUSE", "START", "STOP", "CANCEL_PUBLISH")
SIGNATURE_HEADER = "X-Prolific-Request-Signature"
HOOK_SECRET_HEADER = "X-Hook-Secret"  # returned with a new subscription, sent back to confirm it
EVENT_ID_HEADER = "X-Event-ID"  # one event's id, the same on every redelivery
TIMESTAMP_HEADER = "X-Prolific-Request-Timestamp"
# Prolific's recommended ceilings per request.
MAX_BONUSES_PER_REQUEST = 200
MAX_APPROVALS_PER_REQUEST = 1000


class ProlificError(ProviderError):
    """Prolific refused or failed a request: a ``ProviderError``, so the web's one error handler and the CLI's
    one wrapper say so in the user's words (a page or JSON with 503 when Prolific could not be reached or
    failed, so trying again later may work; 502 when it refused the request).

    ``prolific_status`` is Prolific's HTTP status (0: no answer at all); ``status`` is ours, as for every
    ``TurkflowError``. ``sent`` is False only when no connection was ever made, so the request cannot have
    had an effect; after a read timeout or a 5xx it may have, which matters for the one call that is not
    idempotent.
    """

    def __init__(self, method: str, path: str, status: int, detail: str, sent: bool = True, where: str = ""):
        self.method, self.path, self.detail, self.sent, self.where = method, path, detail, sent, where
        self.prolific_status = status
        self.status = 503 if status == 0 or status == 429 or status >= 500 else 502
        if status == 0:
            message = (f"Prolific could not be reached ({method} {path}: no answer: {detail}); "
                       "try again in a minute")
        elif self.status == 503:
            message = (f"Prolific could not be reached ({method} {path} failed with {status}: {detail}); "
                       "try again in a minute")
        else:
            message = f"Prolific refused {method} {path} ({status}): {detail}"
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:  # a Celery result or retry carries it pickled
        return type(self), (self.method, self.path, self.prolific_status, self.detail, self.sent, self.where)


class InvalidSignature(Exception):
    """A webhook request that Prolific did not sign with our secret, or signed too long ago."""


class ProlificClient:
    """A session with Prolific: base URL, API token and timeouts, shared by every call of one provider."""

    def __init__(self, token: str, base_url: str = DEFAULT_BASE_URL, *, connect_timeout: float = 5.0,
                 read_timeout: float = 30.0):
        if not token:
            raise ValueError("a Prolific API token is required (Prolific: Settings > API tokens)")
        self.base_url = base_url.rstrip("/")
        self.timeout = (connect_timeout, read_timeout)
        self.http = requests.Session()
        self.http.headers.update({"Authorization": f"Token {token}", "Accept": "application/json"})

    def call(self, method: str, path: str, *, json: Any = None,
             params: Optional[Mapping[str, Any]] = None) -> Any:
        """One request; the decoded JSON answer (None when Prolific answers with no body)."""
        return self.call_with_headers(method, path, json=json, params=params)[0]

    def call_with_headers(self, method: str, path: str, *, json: Any = None,
                          params: Optional[Mapping[str, Any]] = None) -> tuple[Any, Mapping[str, str]]:
        """One request; the decoded JSON answer and the response's headers (Prolific returns a new webhook
        subscription's ``X-Hook-Secret`` as a header)."""
        try:
            response = self.http.request(method, self.base_url + path, json=json, params=params,
                                         timeout=self.timeout)
        except requests.RequestException as exc:
            raise ProlificError(method, path, 0, _why_unreached(exc), sent=not _never_connected(exc),
                                where=self.base_url) from exc
        if response.status_code >= 400:
            raise ProlificError(method, path, response.status_code, _error_detail(response))
        if not response.content:
            return None, response.headers
        return response.json(), response.headers


def _never_connected(exc: requests.RequestException) -> bool:
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(exc, requests.ConnectTimeout) or isinstance(reason, ConnectTimeoutError)


def _why_unreached(exc: requests.RequestException) -> str:
    """What failed, in a person's words, instead of urllib3's chain of wrapped exceptions."""
    chain, cause = [], exc
    while cause is not None and len(chain) < 10:
        chain.append(cause)
        cause = getattr(cause, "reason", None) or cause.__cause__ or cause.__context__
    names = " ".join(type(found).__name__ for found in chain) + " " + str(exc)
    if "NameResolution" in names or "Name or service not known" in names or "getaddrinfo" in names:
        return "name resolution failed"
    if isinstance(exc, requests.exceptions.SSLError):
        return "the TLS handshake failed"
    if isinstance(exc, requests.ConnectTimeout) or "ConnectTimeout" in names:
        return "the connection timed out"
    if isinstance(exc, requests.ReadTimeout):
        return "no answer in time"
    if "Connection refused" in names or "ConnectionRefused" in names:
        return "the connection was refused"
    if isinstance(exc, requests.ConnectionError):
        return "the connection failed"
    return type(exc).__name__


def _error_detail(response: requests.Response) -> str:
    """Prolific's own words from its error body ``{"error": {"title", "detail", ...}}``, flattened."""
    try:
        error = response.json().get("error", {})
    except (ValueError, AttributeError):
        return response.text[:500] or response.reason
    detail = error.get("detail", error.get("title", ""))
    if isinstance(detail, Mapping):
        return "; ".join(f"{name}: {' '.join(map(str, problems)) if isinstance(problems, list) else problems}"
                         for name, problems in detail.items())
    if isinstance(detail, list):
        return "; ".join(map(str, detail))
    return str(detail) or response.reason


# ---- the account -------------------------------------------------------------------------------------


def get_me(client: ProlificClient) -> dict[str, Any]:
    """The token's user (id, email): the cheapest way to check a token works."""
    return client.call("GET", "/api/v1/users/me/")


def list_workspaces(client: ProlificClient) -> list[dict[str, Any]]:
    return client.call("GET", "/api/v1/workspaces/")["results"]


def get_workspace_balance(client: ProlificClient, workspace_id: str) -> dict[str, Any]:
    """``available_balance`` (minor units of ``currency_code``) is what new studies and bonuses can spend."""
    return client.call("GET", f"/api/v1/workspaces/{workspace_id}/balance/")


# ---- studies -----------------------------------------------------------------------------------------


def study_url(page_url: str) -> str:
    """Our page's URL with the parameters Prolific fills in (participant, study, submission ids)."""
    return f"{page_url}{'&' if urlsplit(page_url).query else '?'}{URL_PARAMETERS}"


def completion_url(code: str) -> str:
    """Where a participant goes when their submission is done; the code tells Prolific what to do next."""
    return COMPLETE_URL + code


def completion_code_item(code: str, *actions: Mapping[str, Any], code_type: str = "COMPLETED"
                         ) -> dict[str, Any]:
    """One of a study's completion codes: what Prolific does when a participant comes back with it (e.g.
    ``{"action": "ADD_TO_PARTICIPANT_GROUP", "participant_group": <id>}``)."""
    return {"code": code, "code_type": code_type, "actions": [dict(action) for action in actions]}


def study_body(*, name: str, description: str, page_url: str, completion_code: Optional[str] = None,
               reward_cents: int, places: int, estimated_minutes: int, internal_name: str,
               maximum_minutes: Optional[int] = None, allow_groups: Iterable[str] = (),
               block_groups: Iterable[str] = (), project: Optional[str] = None, auto_approve: bool = False,
               completion_codes: Optional[list[dict[str, Any]]] = None,
               submissions_per_participant: int = -1) -> dict[str, Any]:
    """A draft study that one participant may submit any number of times, one submission per turn.

    ``internal_name`` (never shown to participants, listed by ``list_studies``) is how a retried creation
    finds the draft an earlier attempt made. Submissions wait for our review (``MANUALLY_REVIEW``) unless
    ``auto_approve``. Participant groups are the allow list (who may take part) and the block list.
    ``completion_codes`` (built with ``completion_code_item``) replace the single ``completion_code``, and
    ``submissions_per_participant`` the any-number-of-times (an onboarding study allows one).
    """
    filters = [{"filter_id": filter_id, "selected_values": list(groups)}
               for filter_id, groups in (("participant_group_allowlist", tuple(allow_groups)),
                                         ("participant_group_blocklist", tuple(block_groups))) if groups]
    if completion_codes is None:
        if completion_code is None:
            raise ValueError("a study needs a completion_code or completion_codes")
        review = {"action": "AUTOMATICALLY_APPROVE" if auto_approve else "MANUALLY_REVIEW"}
        completion_codes = [completion_code_item(completion_code, review)]
    body: dict[str, Any] = {
        "name": name,
        "internal_name": internal_name,
        "description": description,
        "external_study_url": study_url(page_url),
        "prolific_id_option": "url_parameters",
        "completion_codes": completion_codes,
        "estimated_completion_time": estimated_minutes,
        "reward": reward_cents,
        "total_available_places": places,
        "device_compatibility": ["desktop", "tablet", "mobile"],
        "peripheral_requirements": [],
        "filters": filters,
        "submissions_config": {"max_submissions_per_participant": submissions_per_participant},
    }
    if maximum_minutes is not None:
        body["maximum_allowed_time"] = maximum_minutes
    if project is not None:
        body["project"] = project
    return body


def create_study(client: ProlificClient, body: Mapping[str, Any]) -> dict[str, Any]:
    """A draft (UNPUBLISHED) study; nobody sees it until ``transition_study(..., "PUBLISH")``."""
    return client.call("POST", "/api/v1/studies/", json=dict(body))


def list_studies(client: ProlificClient) -> list[dict[str, Any]]:
    """Every study of the token's workspaces, short form (id, internal_name, status, places_taken, ...)."""
    return client.call("GET", "/api/v1/studies/")["results"]


def get_study(client: ProlificClient, study_id: str) -> dict[str, Any]:
    return client.call("GET", f"/api/v1/studies/{study_id}/")


def update_study(client: ProlificClient, study_id: str, changes: Mapping[str, Any]) -> dict[str, Any]:
    """Change a study. Once published only a few fields may change, and places may only grow."""
    return client.call("PATCH", f"/api/v1/studies/{study_id}/", json=dict(changes))


def transition_study(client: ProlificClient, study_id: str, action: str) -> dict[str, Any]:
    """PUBLISH a draft; PAUSE, START (resume, or take new participants again after AWAITING REVIEW) or STOP
    (complete) a published study; CANCEL_PUBLISH a draft someone scheduled. Prolific answers PUBLISH with
    PUBLISHING, then the study is ACTIVE."""
    if action not in STUDY_ACTIONS:
        raise ValueError(f"study action must be one of {', '.join(STUDY_ACTIONS)}, not {action!r}")
    return client.call("POST", f"/api/v1/studies/{study_id}/transition/", json={"action": action})


def create_test_study(client: ProlificClient, study_id: str) -> dict[str, Any]:
    """Publish a copy of a draft to the workspace's test participants only (a feature Prolific enables)."""
    return client.call("POST", f"/api/v1/studies/{study_id}/test-study")


def create_test_participant(client: ProlificClient, email: str) -> str:
    """A participant account that can take our studies without real pay; returns its participant id."""
    return client.call("POST", "/api/v1/researchers/participants/", json={"email": email})["participant_id"]


# ---- submissions -------------------------------------------------------------------------------------


def list_submissions(client: ProlificClient, study_id: str, page_size: int = 100, *,
                     started_since: Optional[datetime] = None) -> Iterator[dict[str, Any]]:
    """A study's submissions (id, participant_id, status, started_at, ...), a page at a time: every one, or
    with ``started_since`` (aware UTC) only those started since then, newest first, reading no page beyond
    the first older one.

    The list answer carries no count or next link in the spec, and a server may answer fewer than asked
    per page, so a page is the last only when it is empty or shorter than the longest page seen so far.
    """
    params: dict[str, Any] = {"study": study_id, "page_size": page_size}
    if started_since is not None:
        params["ordering"] = "-started_at"
    page, longest = 1, 0
    while True:
        results = client.call("GET", "/api/v1/submissions/", params={**params, "page": page})["results"]
        for submission in results:
            if started_since is not None and _started(submission) < started_since:
                return
            yield submission
        if not results or len(results) < longest:
            return
        longest = max(longest, len(results))
        page += 1


def _started(submission: Mapping[str, Any]) -> datetime:
    """When a submission started (a submission without the field counts as new)."""
    text = submission.get("started_at")
    if not text:
        return datetime.max.replace(tzinfo=timezone.utc)
    moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def get_submission(client: ProlificClient, submission_id: str) -> dict[str, Any]:
    """One submission in full, including ``bonus_payments``: the bonuses already paid on it, in cents."""
    return client.call("GET", f"/api/v1/submissions/{submission_id}/")


def transition_submission(client: ProlificClient, submission_id: str, action: str, *,
                          message: Optional[str] = None, rejection_category: Optional[str] = None
                          ) -> dict[str, Any]:
    """APPROVE (pays the reward) or REJECT (with a message of 100+ characters and a category).

    Prolific ignores a repeated transition, so a retried approval is harmless.
    """
    body: dict[str, Any] = {"action": action}
    if message is not None:
        body["message"] = message
    if rejection_category is not None:
        body["rejection_category"] = rejection_category
    return client.call("POST", f"/api/v1/submissions/{submission_id}/transition/", json=body)


def bulk_approve_submissions(client: ProlificClient, submission_ids: Iterable[str]) -> None:
    """Approve many submissions (of any studies); Prolific approves them in the background."""
    ids = list(submission_ids)
    for start in range(0, len(ids), MAX_APPROVALS_PER_REQUEST):
        client.call("POST", "/api/v1/submissions/bulk-approve/",
                    json={"submission_ids": ids[start:start + MAX_APPROVALS_PER_REQUEST]})


def send_message(client: ProlificClient, study_id: str, participant_ids: Iterable[str], body: str) -> None:
    """Message participants; Prolific wants a study they took part in as the message's context."""
    client.call("POST", "/api/v1/messages/bulk/",
                json={"ids": list(participant_ids), "body": body, "study_id": study_id})


# ---- bonuses -----------------------------------------------------------------------------------------


def bonus_csv(bonuses: Mapping[str, int]) -> str:
    """Prolific's bonus CSV, ``<submission or participant id>,<amount>`` per line, amounts from cents."""
    for target, cents in bonuses.items():
        if cents <= 0:
            raise ValueError(f"a bonus must be positive, not {cents} cents for {target}")
    return "".join(f"{target},{cents // 100}.{cents % 100:02d}\n" for target, cents in bonuses.items())


def set_up_bonus_payments(client: ProlificClient, study_id: str, bonuses: Mapping[str, int]
                          ) -> dict[str, Any]:
    """Record bonuses (by submission or participant id, in cents) without paying them.

    Returns Prolific's bulk bonus payment (``id``, ``amount``, ``fees``, ``vat``, ``total_amount``, all in
    cents); nothing moves until ``pay_bonus_payments`` is called with that id. Setting up is harmless to
    repeat: an unpaid set-up costs nothing.
    """
    if not 0 < len(bonuses) <= MAX_BONUSES_PER_REQUEST:
        raise ValueError(f"set up between 1 and {MAX_BONUSES_PER_REQUEST} bonuses per request, "
                         f"not {len(bonuses)}")
    return client.call("POST", "/api/v1/submissions/bonus-payments/",
                       json={"study_id": study_id, "csv_bonuses": bonus_csv(bonuses)})


def pay_bonus_payments(client: ProlificClient, bulk_id: str) -> None:
    """Pay a set-up bulk bonus payment. NOT idempotent: every call pays again.

    Call it at most once per bulk id, after recording durably that it is about to be called; if the
    outcome is unknown (a timeout, a crash), reconcile from ``get_submission(...)["bonus_payments"]``
    (paid asynchronously, so allow minutes) instead of calling again.
    """
    client.call("POST", f"/api/v1/bulk-bonus-payments/{bulk_id}/pay/")


# ---- participant groups ------------------------------------------------------------------------------


def create_participant_group(client: ProlificClient, workspace_id: str, name: str, description: str = "",
                             participant_ids: Iterable[str] = ()) -> dict[str, Any]:
    body: dict[str, Any] = {"workspace_id": workspace_id, "name": name, "description": description}
    if participant_ids:
        body["participant_ids"] = list(participant_ids)
    return client.call("POST", "/api/v1/participant-groups/", json=body)


def list_participant_groups(client: ProlificClient, workspace_id: str) -> list[dict[str, Any]]:
    return client.call("GET", "/api/v1/participant-groups/", params={"workspace_id": workspace_id})["results"]


def add_to_participant_group(client: ProlificClient, group_id: str, participant_ids: Iterable[str]
                             ) -> list[str]:
    """Add participants (members already in are ignored); returns every member's id afterwards."""
    found = client.call("POST", f"/api/v1/participant-groups/{group_id}/participants/",
                        json={"participant_ids": list(participant_ids)})
    return _member_ids(found)


def remove_from_participant_group(client: ProlificClient, group_id: str, participant_ids: Iterable[str]
                                  ) -> list[str]:
    """Remove participants (non-members are ignored); returns every member's id afterwards."""
    found = client.call("DELETE", f"/api/v1/participant-groups/{group_id}/participants/",
                        json={"participant_ids": list(participant_ids)})
    return _member_ids(found)


def list_participant_group_members(client: ProlificClient, group_id: str) -> list[str]:
    return _member_ids(client.call("GET", f"/api/v1/participant-groups/{group_id}/participants/"))


def _member_ids(memberships: Mapping[str, Any]) -> list[str]:
    return [m["participant_id"] for m in memberships.get("results") or []]


# ---- webhooks ----------------------------------------------------------------------------------------


def create_webhook_secret(client: ProlificClient, workspace_id: str) -> str:
    """A new signing secret for the workspace's webhooks; it replaces any previous one at once."""
    return client.call("POST", "/api/v1/hooks/secrets/", json={"workspace_id": workspace_id})["value"]


def list_webhook_secrets(client: ProlificClient, workspace_id: str) -> list[dict[str, Any]]:
    return client.call("GET", "/api/v1/hooks/secrets/", params={"workspace_id": workspace_id})["results"]


def create_webhook_subscription(client: ProlificClient, workspace_id: str, event_type: str, target_url: str
                                ) -> tuple[dict[str, Any], str]:
    """Ask Prolific to POST events (e.g. ``submission.status.change``) to a public HTTPS URL of ours: the new
    subscription (not enabled yet) and the ``X-Hook-Secret`` Prolific returns with it as a response header,
    which ``confirm_webhook_subscription`` sends back to enable it ("Monitoring study progress")."""
    created, headers = client.call_with_headers("POST", "/api/v1/hooks/subscriptions/", json={
        "workspace_id": workspace_id, "event_type": event_type, "target_url": target_url})
    hook_secret = headers.get(HOOK_SECRET_HEADER)
    if not hook_secret:
        raise ProlificError("POST", "/api/v1/hooks/subscriptions/", 502,
                            f"the answer carries no {HOOK_SECRET_HEADER} header to confirm the subscription with")
    return created["results"][0], hook_secret


def confirm_webhook_subscription(client: ProlificClient, subscription_id: str, hook_secret: str
                                 ) -> dict[str, Any]:
    """Enable a new subscription with its ``X-Hook-Secret``. Prolific documents it two ways: its API
    description posts the secret in the body to the subscription ("generated when the subscription was
    created and returned as the ``X-Hook-Secret`` header"); its "Monitoring study progress" guide puts the
    X-Hook-Secret where the subscription's id goes. The first is tried first; the second only when Prolific
    refuses the first (a 4xx), and if both are refused, the first refusal is the error."""
    try:
        return client.call("POST", f"/api/v1/hooks/subscriptions/{subscription_id}/",
                           json={"secret": hook_secret})
    except ProlificError as refused:
        if not 400 <= refused.prolific_status < 500:
            raise
        try:
            return client.call("POST", f"/api/v1/hooks/subscriptions/{hook_secret}/", json={"secret": hook_secret})
        except ProlificError:
            raise refused from None


def list_webhook_subscriptions(client: ProlificClient, workspace_id: str, enabled: bool = True
                               ) -> list[dict[str, Any]]:
    """The workspace's subscriptions, enabled ones or (``enabled=False``) those still to confirm."""
    return client.call("GET", "/api/v1/hooks/subscriptions/",
                       params={"workspace_id": workspace_id, "is_enabled": str(enabled).lower()})["results"]


def delete_webhook_subscription(client: ProlificClient, subscription_id: str) -> None:
    client.call("DELETE", f"/api/v1/hooks/subscriptions/{subscription_id}/")


def verify_webhook(secret: str, headers: Mapping[str, str], body: bytes, *, max_age_seconds: int = 300,
                   now: Optional[float] = None) -> None:
    """Refuse a webhook request unless Prolific signed it with our secret within ``max_age_seconds``.

    ``headers`` is the request's case-insensitive header mapping (Flask's ``request.headers``). The
    signature is base64(HMAC-SHA256(secret, timestamp + body)); the age limit keeps a captured request
    from being replayed later. Raises ``InvalidSignature``.
    """
    signature, timestamp = headers.get(SIGNATURE_HEADER), headers.get(TIMESTAMP_HEADER)
    if not signature or not timestamp:
        raise InvalidSignature(f"the request lacks {SIGNATURE_HEADER} or {TIMESTAMP_HEADER}")
    try:
        sent_at = int(timestamp)
    except ValueError:
        raise InvalidSignature(f"{TIMESTAMP_HEADER} is not a UNIX time: {timestamp[:40]!r}") from None
    if abs((time.time() if now is None else now) - sent_at) > max_age_seconds:
        raise InvalidSignature(f"the request was signed at {sent_at}, more than {max_age_seconds}s from now")
    if not hmac.compare_digest(sign_webhook(secret, timestamp, body).encode(), signature.encode()):
        raise InvalidSignature("the signature does not match our webhook secret")


def sign_webhook(secret: str, timestamp: str, body: bytes) -> str:
    """Prolific's signature of a webhook request (what ``verify_webhook`` expects)."""
    digest = hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()
