"""MTurk's requester API: one small function per operation, a boto3 client and plain values in, MTurk's
answers out; and the one place MTurk's failures become ours.

The functions raise botocore's ``ClientError`` so their callers in this folder can tell MTurk's refusals
apart (a repeated token, an assignment not submitted yet); ``translated`` turns whatever is left into a
``ProviderError`` at the folder's edge, so nothing outside ``turkflow.hits.mturk`` sees botocore.

Retries: botocore retries throttled and transient calls itself (``TURKFLOW_MTURK_RETRY_MODE``); what still
fails raises, the transaction rolls back, and the Celery task retries with backoff. Every call that creates
something carries a deterministic ``UniqueRequestToken`` (MTurk remembers it for 24 hours), so a retried
CreateHIT or SendBonus never makes a second HIT or a second payment.
"""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Iterator, Optional

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from turkflow.config import Settings
from turkflow.errors import ProviderError
from turkflow.hits.money import cents_from_usd, usd

log = logging.getLogger("turkflow.mturk")

# A past moment: UpdateExpirationForHIT with it ends a HIT now.
LONG_AGO = datetime(2015, 1, 1, tzinfo=timezone.utc)


class MTurkError(ProviderError):
    """MTurk refused a request, or could not be reached; the message says what MTurk said."""


class NotPayableYet(MTurkError):
    """The assignment is not submitted on MTurk yet (still with the worker); pay or approve it later."""


class QualificationsMissing(MTurkError):
    """Our qualification types do not exist on this marketplace yet (``turkflow mturk quals`` creates them)."""


@contextmanager
def translated() -> Iterator[None]:
    """MTurk's and botocore's failures as ``MTurkError`` (the original chained), at the folder's edge."""
    try:
        yield
    except ClientError as exc:
        code, message = error_of(exc)
        raise MTurkError(f"MTurk: {message or code} ({code})" if code else f"MTurk: {exc}") from exc
    except BotoCoreError as exc:
        raise MTurkError(f"MTurk could not be reached: {exc}") from exc


def endpoint(region: str, live: bool) -> str:
    return f"https://mturk-requester{'' if live else '-sandbox'}.{region}.amazonaws.com"


def make_client(settings: Settings, live: bool) -> Any:
    """A requester API client; credentials come from the usual AWS sources (env, ~/.aws, instance role)."""
    return boto3.client(
        "mturk", region_name=settings.mturk_region, endpoint_url=endpoint(settings.mturk_region, live),
        config=Config(retries={"mode": settings.mturk_retry_mode, "max_attempts": settings.mturk_max_attempts}),
    )


def error_of(exc: ClientError) -> tuple[str, str]:
    """MTurk's error code and message."""
    error = exc.response.get("Error", {})
    return error.get("Code", ""), error.get("Message", "")


def is_refusal(exc: ClientError) -> bool:
    """MTurk refused the request as such (``RequestError``), as opposed to failing to serve it."""
    return error_of(exc)[0] == "RequestError"


def _does_not_exist(exc: ClientError) -> bool:
    return is_refusal(exc) and "does not exist" in error_of(exc)[1].lower()


def _already_done(exc: ClientError) -> bool:
    """MTurk refusing a repeated UniqueRequestToken: the first request went through."""
    text = error_of(exc)[1].lower()
    return is_refusal(exc) and any(
        words in text for words in ("idempotency", "uniquerequesttoken", "already exists", "already been processed"))


# ---- one function per MTurk operation ------------------------------------------------------------------


def create_hit(client: Any, request: dict[str, Any]) -> str:
    """CreateHIT; a repeated token means an earlier attempt created it: look that HIT up instead."""
    try:
        return client.create_hit(**request)["HIT"]["HITId"]
    except ClientError as exc:
        if not _already_done(exc):
            raise
        found = find_hit(client, request["RequesterAnnotation"], hint=error_of(exc)[1])
        if found is None:
            raise MTurkError(f"MTurk says {request['UniqueRequestToken']} was used, but no HIT carries "
                             f"{request['RequesterAnnotation']!r}") from None
        log.info("CreateHIT %s was a repeat; using HIT %s", request["UniqueRequestToken"], found)
        return found


def find_hit(client: Any, annotation: str, hint: str = "") -> Optional[str]:
    """The HIT with our annotation: the id MTurk named in its error if it checks out, else ListHITs."""
    for candidate in re.findall(r"\b[A-Z0-9]{20,}\b", hint):
        try:
            if get_hit(client, candidate).get("RequesterAnnotation") == annotation:
                return candidate
        except ClientError:
            continue
    return next((h["HITId"] for h in list_hits(client) if h.get("RequesterAnnotation") == annotation), None)


def get_hit(client: Any, hit_id: str) -> dict[str, Any]:
    return client.get_hit(HITId=hit_id)["HIT"]


def list_hits(client: Any) -> Iterator[dict[str, Any]]:
    for page in client.get_paginator("list_hits").paginate(PaginationConfig={"PageSize": 100}):
        yield from page.get("HITs", [])


def list_assignments_for_hit(client: Any, hit_id: str) -> list[dict[str, Any]]:
    """Every submitted, approved or rejected assignment of a HIT (MTurk lists no others)."""
    pages = client.get_paginator("list_assignments_for_hit").paginate(
        HITId=hit_id, AssignmentStatuses=["Submitted", "Approved", "Rejected"], PaginationConfig={"PageSize": 100})
    return [assignment for page in pages for assignment in page.get("Assignments", [])]


def get_assignment(client: Any, assignment_id: str) -> Optional[dict[str, Any]]:
    """The assignment if MTurk has it as submitted, approved or rejected; None while a worker holds it."""
    try:
        return client.get_assignment(AssignmentId=assignment_id)["Assignment"]
    except ClientError as exc:
        if _does_not_exist(exc):
            return None
        raise


def update_expiration_for_hit(client: Any, hit_id: str) -> None:
    """End a HIT now: nobody else can accept it (a worker already holding it may still submit)."""
    client.update_expiration_for_hit(HITId=hit_id, ExpireAt=LONG_AGO)


def approve_assignment(client: Any, assignment_id: str) -> None:
    client.approve_assignment(AssignmentId=assignment_id)


def send_bonus(client: Any, worker_id: str, cents: int, assignment_id: str, reason: str, token: str) -> None:
    """SendBonus; repeating the token is harmless (the first payment went through)."""
    try:
        client.send_bonus(WorkerId=worker_id, BonusAmount=usd(cents), AssignmentId=assignment_id, Reason=reason,
                          UniqueRequestToken=token)
    except ClientError as exc:
        if _already_done(exc):
            return
        if _does_not_exist(exc):
            raise NotPayableYet(f"assignment {assignment_id} is not payable yet: {error_of(exc)[1]}") from None
        raise


def create_worker_block(client: Any, worker_id: str, reason: str) -> None:
    client.create_worker_block(WorkerId=worker_id, Reason=reason)


def delete_worker_block(client: Any, worker_id: str, reason: str) -> None:
    client.delete_worker_block(WorkerId=worker_id, Reason=reason)


def associate_qualification_with_worker(client: Any, type_id: str, worker_id: str, value: int) -> None:
    client.associate_qualification_with_worker(QualificationTypeId=type_id, WorkerId=worker_id, IntegerValue=value,
                                               SendNotification=False)


def disassociate_qualification_from_worker(client: Any, type_id: str, worker_id: str, reason: str) -> None:
    client.disassociate_qualification_from_worker(QualificationTypeId=type_id, WorkerId=worker_id, Reason=reason)


def create_qualification_type(client: Any, name: str, description: str, *, test: Optional[str] = None,
                              answer_key: Optional[str] = None, test_seconds: Optional[int] = None) -> str:
    request: dict[str, Any] = {"Name": name, "Description": description, "QualificationTypeStatus": "Active",
                               "Keywords": "turkflow"}
    if test is not None:
        request.update(Test=test, AnswerKey=answer_key, TestDurationInSeconds=test_seconds)
    return client.create_qualification_type(**request)["QualificationType"]["QualificationTypeId"]


def list_qualification_types(client: Any, query: str) -> list[dict[str, Any]]:
    pages = client.get_paginator("list_qualification_types").paginate(
        Query=query, MustBeRequestable=False, MustBeOwnedByCaller=True, PaginationConfig={"PageSize": 100})
    return [qual for page in pages for qual in page.get("QualificationTypes", [])]


def get_account_balance(client: Any) -> int:
    """AvailableBalance in cents (the sandbox always reports $10,000.00)."""
    return cents_from_usd(client.get_account_balance()["AvailableBalance"])


def notify_workers(client: Any, subject: str, message: str, worker_ids: list[str]) -> None:
    for start in range(0, len(worker_ids), 100):  # NotifyWorkers takes at most 100 workers a call
        client.notify_workers(Subject=subject[:200], MessageText=message[:4096],
                              WorkerIds=worker_ids[start:start + 100])
