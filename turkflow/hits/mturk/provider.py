"""Amazon Mechanical Turk as a crowd provider: real HITs through boto3, on the sandbox unless a batch is live.

Two layers. Small functions named after MTurk operations (``create_hit``, ``send_bonus``, ...) take a
boto3 client and plain values and turn MTurk's answers into ours; ``MTurkProvider`` implements the
``CrowdProvider`` interface with them, choosing the sandbox or the live client from the batch. Nothing
outside ``turkflow.hits`` imports boto3.

Retries: botocore retries throttled and transient calls itself (``TURKFLOW_MTURK_RETRY_MODE``); what still
fails raises, the transaction rolls back, and the Celery task retries with backoff. Every call that
creates something carries a deterministic ``UniqueRequestToken`` (MTurk remembers it for 24 hours), so a
retried CreateHIT or SendBonus never makes a second HIT or a second payment.
"""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Optional
from xml.sax.saxutils import escape

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
from sqlmodel import Session, select

from turkflow import events
from turkflow.config import Settings
from turkflow.errors import Forbidden, ProviderError
from turkflow.hits import mturk_sync, onboarding
from turkflow.hits.money import cents_from_usd, usd
from turkflow.hits.provider import CrowdProvider
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    Bonus,
    Conversation,
    Hit,
    MTurkQualification,
    Role,
    Turn,
    Worker,
    utcnow,
)

log = logging.getLogger("turkflow.mturk")

EXTERNAL_QUESTION_NS = ("http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/"
                        "ExternalQuestion.xsd")
# The worker sites that show our turn page in their iframe, and where the page posts the finished assignment.
WORKER_SITES = ("https://worker.mturk.com", "https://workersandbox.mturk.com", "https://www.mturk.com")
SUBMIT_SITES = {False: ("https://workersandbox.mturk.com",),
                True: ("https://www.mturk.com", "https://worker.mturk.com")}
# MTurk's system qualification types (the same ids on the sandbox and the live marketplace).
PERCENT_APPROVED = "000000000000000000L0"
NUMBER_APPROVED = "00000000000000000040"
LOCALE = "00000000000000000071"
# A past moment: UpdateExpirationForHIT with it ends a HIT now.
LONG_AGO = datetime(2015, 1, 1, tzinfo=timezone.utc)

PURPOSES = ("role:student", "role:teacher", "blocked")


class MTurkError(ProviderError):
    """MTurk refused a request in a way the user must act on."""


class NotPayableYet(MTurkError):
    """The assignment is not submitted on MTurk yet (still with the worker); pay or approve it later."""


class QualificationsMissing(MTurkError):
    pass


def endpoint(region: str, live: bool) -> str:
    return f"https://mturk-requester{'' if live else '-sandbox'}.{region}.amazonaws.com"


def make_client(settings: Settings, live: bool) -> Any:
    """A requester API client; credentials come from the usual AWS sources (env, ~/.aws, instance role)."""
    return boto3.client(
        "mturk", region_name=settings.mturk_region, endpoint_url=endpoint(settings.mturk_region, live),
        config=Config(retries={"mode": settings.mturk_retry_mode, "max_attempts": settings.mturk_max_attempts}),
    )


def _error(exc: ClientError) -> tuple[str, str]:
    error = exc.response.get("Error", {})
    return error.get("Code", ""), error.get("Message", "")


def _does_not_exist(exc: ClientError) -> bool:
    code, message = _error(exc)
    return code == "RequestError" and "does not exist" in message.lower()


def _already_done(exc: ClientError) -> bool:
    """MTurk refusing a repeated UniqueRequestToken: the first request went through."""
    code, message = _error(exc)
    text = message.lower()
    return code == "RequestError" and any(
        words in text for words in ("idempotency", "uniquerequesttoken", "already exists", "already been processed"))


# ---- one function per MTurk operation ------------------------------------------------------------------


def create_hit(client: Any, request: dict[str, Any]) -> str:
    """CreateHIT; a repeated token means an earlier attempt created it: look that HIT up instead."""
    try:
        return client.create_hit(**request)["HIT"]["HITId"]
    except ClientError as exc:
        if not _already_done(exc):
            raise
        found = find_hit(client, request["RequesterAnnotation"], hint=_error(exc)[1])
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
            raise NotPayableYet(f"assignment {assignment_id} is not payable yet: {_error(exc)[1]}") from None
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


# ---- what a turn HIT looks like -----------------------------------------------------------------------


def external_question(url: str, frame_height: int) -> str:
    return (f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_NS}"><ExternalURL>{escape(url)}</ExternalURL>'
            f"<FrameHeight>{frame_height}</FrameHeight></ExternalQuestion>")


def qualification_requirements(settings: Settings, quals: dict[str, str], role: str, live: bool) -> list[dict]:
    """Who may take a turn of this role: passed its onboarding test, never took the other role's, not
    blocked; on the live marketplace also the system requirements (sandbox workers have no history)."""
    other = next(r for r in (Role.student, Role.teacher) if r != role)
    hidden = "DiscoverPreviewAndAccept"
    requirements = [
        {"QualificationTypeId": quals[f"role:{role}"], "Comparator": "GreaterThanOrEqualTo",
         "IntegerValues": [settings.onboarding_pass_percent], "ActionsGuarded": "Accept"},
        {"QualificationTypeId": quals[f"role:{other}"], "Comparator": "DoesNotExist", "ActionsGuarded": hidden},
        {"QualificationTypeId": quals["blocked"], "Comparator": "DoesNotExist", "ActionsGuarded": hidden},
    ]
    if not live:
        return requirements
    if settings.mturk_min_approval_rate > 0:
        requirements.append({"QualificationTypeId": PERCENT_APPROVED, "Comparator": "GreaterThanOrEqualTo",
                             "IntegerValues": [settings.mturk_min_approval_rate], "ActionsGuarded": hidden})
    if settings.mturk_min_approved_hits > 0:
        requirements.append({"QualificationTypeId": NUMBER_APPROVED, "Comparator": "GreaterThanOrEqualTo",
                             "IntegerValues": [settings.mturk_min_approved_hits], "ActionsGuarded": hidden})
    countries = [c.strip().upper() for c in settings.mturk_locales.split(",") if c.strip()]
    if countries:
        requirements.append({"QualificationTypeId": LOCALE, "Comparator": "In",
                             "LocaleValues": [{"Country": c} for c in countries], "ActionsGuarded": hidden})
    return requirements


def qualification_ids(session: Session, live: bool) -> dict[str, str]:
    """Our qualification type ids on one marketplace; publishing needs all of them."""
    ours = session.exec(select(MTurkQualification).where(MTurkQualification.live == live))
    found = {q.purpose: q.type_id for q in ours}
    missing = [p for p in PURPOSES if p not in found]
    if missing:
        marketplace = "live marketplace" if live else "sandbox"
        raise QualificationsMissing(f"the MTurk {marketplace} has no turkflow qualification types yet "
                                    f"({', '.join(missing)}); run `turkflow mturk quals{' --live' if live else ''}`")
    return found


def qualification_names(study: str) -> dict[str, tuple[str, str]]:
    """Name and description of each qualification type; the study name keeps installs apart."""
    return {
        "role:student": (f"{study}: student", "Passed the student onboarding test of this chat study. A worker "
                                              "plays one role (student or teacher) for the whole study."),
        "role:teacher": (f"{study}: teacher", "Passed the teacher onboarding test of this chat study. A worker "
                                              "plays one role (student or teacher) for the whole study."),
        "blocked": (f"{study}: paused", "Temporarily not eligible for this study's HITs while the requester "
                                        "reviews recent work."),
    }


# ---- the provider -------------------------------------------------------------------------------------


class MTurkProvider(CrowdProvider):
    name = "mturk"

    def __init__(self, settings: Settings, client: Optional[Any] = None):
        self.settings = settings
        self._injected = client
        self._clients: dict[bool, Any] = {}
        self.install = hashlib.sha256(settings.secret_key.encode()).hexdigest()[:10]

    def client(self, live: bool) -> Any:
        if self._injected is not None:
            return self._injected
        if live not in self._clients:
            self._clients[live] = make_client(self.settings, live)
        return self._clients[live]

    # -- HITs --

    def publish_turn(self, session: Session, hit: Hit, batch: Batch) -> str:
        if not self.settings.public_url.startswith("https://"):
            raise MTurkError(f"MTurk shows only HTTPS pages; TURKFLOW_PUBLIC_URL is {self.settings.public_url}")
        quals = qualification_ids(session, batch.live)
        turn = session.get(Turn, hit.turn_id)
        hit_id = create_hit(self.client(batch.live), self.hit_request(hit, batch, turn, quals))
        hit.expires_at = utcnow() + timedelta(seconds=self.settings.mturk_lifetime_seconds)
        session.add(hit)
        return hit_id

    def hit_request(self, hit: Hit, batch: Batch, turn: Turn, quals: dict[str, str]) -> dict[str, Any]:
        s = self.settings
        url = f"{s.public_url.rstrip('/')}/mturk/turn?h={mturk_sync.hit_token(s.secret_key, hit.id)}"
        return {
            "Title": f"{turn.role.capitalize()}: {s.mturk_title}",
            "Description": s.mturk_description,
            "Keywords": s.mturk_keywords,
            "Reward": usd(batch.reward_cents),
            "MaxAssignments": 1,
            "LifetimeInSeconds": s.mturk_lifetime_seconds,
            "AssignmentDurationInSeconds": s.mturk_assignment_seconds,
            "AutoApprovalDelayInSeconds": s.mturk_auto_approve_seconds,
            "Question": external_question(url, s.mturk_frame_height),
            "RequesterAnnotation": self.annotation(hit, batch, turn),
            "UniqueRequestToken": self.request_token(f"hit-{hit.id}"),
            "QualificationRequirements": qualification_requirements(s, quals, turn.role, batch.live),
        }

    def annotation(self, hit: Hit, batch: Batch, turn: Turn) -> str:
        return f"turkflow {self.install} batch {batch.id} turn {turn.id} hit {hit.id}"

    def request_token(self, what: str) -> str:
        """Deterministic per install and per thing created (at most 64 characters, MTurk's limit)."""
        return f"turkflow-{self.install}-{what}"[:64]

    def expire(self, session: Session, hit: Hit) -> None:
        if hit.external_id is None:
            return  # never reached MTurk
        update_expiration_for_hit(self.client(_batch_of_hit(session, hit).live), hit.external_id)
        events.record(session, "hit_expired", "provider", turn_id=hit.turn_id, hit_id=hit.id,
                      external_id=hit.external_id)

    def remote_hit(self, session: Session, hit: Hit) -> dict[str, Any]:
        return get_hit(self.client(_batch_of_hit(session, hit).live), hit.external_id)

    def remote_assignments(self, session: Session, hit: Hit) -> list[dict[str, Any]]:
        return list_assignments_for_hit(self.client(_batch_of_hit(session, hit).live), hit.external_id)

    def verify_assignment(self, session: Session, hit: Hit, assignment_id: str, worker_id: str) -> None:
        """Check with MTurk that this assignment of this HIT is this worker's, as far as MTurk tells.

        A submitted assignment MTurk shows in full. One still in progress it does not show at all (GetAssignment
        knows only submitted, approved and rejected ones), so then the HIT must at least be held by a worker
        right now; a forged id for a HIT nobody holds is refused.
        """
        client = self.client(_batch_of_hit(session, hit).live)
        found = get_assignment(client, assignment_id)
        if found is not None:
            if found.get("HITId") != hit.external_id or found.get("WorkerId") != worker_id:
                raise Forbidden("MTurk says this assignment belongs to another HIT or worker")
            return
        if get_hit(client, hit.external_id).get("NumberOfAssignmentsPending", 0) < 1:
            raise Forbidden("MTurk has no assignment in progress for this HIT; accept the HIT first")

    # -- assignments and money --

    def approve(self, session: Session, assignment: Assignment) -> None:
        """Approve on MTurk; if MTurk already decided (auto-approval, or the requester's own action), settle
        our record with that instead of failing on stale state."""
        if assignment.status in (AssignmentStatus.approved, AssignmentStatus.rejected):
            return
        client = self.client(_batch_of_assignment(session, assignment).live)
        try:
            approve_assignment(client, assignment.external_id)
            status = AssignmentStatus.approved
        except ClientError as exc:
            if _error(exc)[0] != "RequestError":
                raise
            found = get_assignment(client, assignment.external_id)
            if found is None:
                raise NotPayableYet(f"assignment {assignment.external_id} is not submitted on MTurk yet") from None
            status = mturk_sync.MTURK_STATUS.get(found["AssignmentStatus"])
            if status in (None, AssignmentStatus.submitted):
                raise
        mturk_sync.settle_assignment(session, assignment, status)

    def pay_bonus(self, session: Session, bonus: Bonus, worker: Worker, assignment: Assignment) -> None:
        """SendBonus with the bonus' own token; raises NotPayableYet while MTurk does not have the assignment
        as submitted (a bonus decided while the worker's submission is in flight), so the task retries."""
        send_bonus(self.client(_batch_of_assignment(session, assignment).live), worker.external_id,
                   bonus.amount_cents, assignment.external_id,
                   reason="Thank you: the next worker rated your turn highly relevant and useful.",
                   token=self.request_token(bonus.request_token))

    # -- workers --

    def block(self, session: Session, worker: Worker, reason: str, permanent: bool) -> None:
        """Temporary: our "paused" qualification, which hides every turn HIT from the worker. Permanent:
        also an MTurk worker block (it hurts the worker's standing on MTurk, so only after review)."""
        for live in _marketplaces(session, worker, self.settings):
            client = self.client(live)
            associate_qualification_with_worker(client, qualification_ids(session, live)["blocked"],
                                                worker.external_id, 1)
            if permanent:
                create_worker_block(client, worker.external_id, reason)

    def unblock(self, session: Session, worker: Worker) -> None:
        """Reverse both kinds of block; MTurk refusing because one of them is not there is fine."""
        for live in _marketplaces(session, worker, self.settings):
            client = self.client(live)
            for undo in (
                lambda: disassociate_qualification_from_worker(client, qualification_ids(session, live)["blocked"],
                                                               worker.external_id, "unblocked after review"),
                lambda: delete_worker_block(client, worker.external_id, "unblocked after review"),
            ):
                try:
                    undo()
                except ClientError as exc:
                    if _error(exc)[0] != "RequestError":
                        raise
                    log.info("unblock %s: %s", worker.external_id, _error(exc)[1])

    def notify(self, session: Session, workers: list[Worker], subject: str, message: str) -> None:
        ids = [w.external_id for w in workers]
        if ids:
            notify_workers(self.client(self.settings.mturk_live), subject, message, ids)

    # -- the requester's account --

    def balance_cents(self, live: bool) -> int:
        return get_account_balance(self.client(live))

    def ensure_qualification_types(self, session: Session, live: bool, study: str) -> list[MTurkQualification]:
        """Create the qualification types this marketplace lacks (adopting ours by name if MTurk has them
        and our database does not, e.g. after a database reset); returns all of them."""
        client = self.client(live)
        have = {q.purpose: q for q in session.exec(select(MTurkQualification).where(MTurkQualification.live == live))}
        names = qualification_names(study)
        for purpose in PURPOSES:
            if purpose in have:
                continue
            name, description = names[purpose]
            existing = next((q for q in list_qualification_types(client, name) if q.get("Name") == name), None)
            if existing is not None:
                type_id = existing["QualificationTypeId"]
            elif purpose.startswith("role:"):
                quiz = onboarding.quiz_for(purpose.removeprefix("role:"))
                type_id = create_qualification_type(
                    client, name, description, test=onboarding.question_form_xml(quiz),
                    answer_key=onboarding.answer_key_xml(quiz), test_seconds=self.settings.onboarding_test_seconds)
            else:
                type_id = create_qualification_type(client, name, description)
            have[purpose] = MTurkQualification(purpose=purpose, live=live, type_id=type_id, name=name)
            session.add(have[purpose])
            session.flush()
            events.record(session, "mturk_qualification_created", "requester", purpose=purpose, live=live,
                          type_id=type_id, adopted=existing is not None)
        return [have[p] for p in PURPOSES]


def _batch_of_hit(session: Session, hit: Hit) -> Batch:
    turn = session.get(Turn, hit.turn_id)
    return session.get(Batch, session.get(Conversation, turn.conversation_id).batch_id)


def _batch_of_assignment(session: Session, assignment: Assignment) -> Batch:
    return _batch_of_hit(session, session.get(Hit, assignment.hit_id))


def _marketplaces(session: Session, worker: Worker, settings: Settings) -> list[bool]:
    """Where a worker has worked for us (sandbox, live); a worker with no MTurk turns yet: the default one."""
    found = sorted(set(session.exec(
        select(Batch.live).join(Conversation, Conversation.batch_id == Batch.id)
        .join(Turn, Turn.conversation_id == Conversation.id).join(Hit, Hit.turn_id == Turn.id)
        .join(Assignment, Assignment.hit_id == Hit.id)
        .where(Assignment.worker_id == worker.id, Batch.provider == "mturk")
    )))
    return found or [settings.mturk_live]
