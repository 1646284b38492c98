"""The MTurk provider against botocore's Stubber on a real boto3 ``mturk`` client: every request turkflow
sends is validated against MTurk's service model, and every test ends with no stubbed response unused.

The fixtures here are shared by the other ``test_mturk_*`` modules.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber
from sqlmodel import select

from tests.conftest import wait_until
from tests.test_pipeline import STUDENT_ANSWERS
from turkflow import pipeline
from turkflow.db import session_scope
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.hits import lifecycle, registry
from turkflow.hits.mturk import MTurkError, NotPayableYet
from turkflow.hits.mturk.answers import form_answers
from turkflow.hits.mturk.assignments import accept_assignment
from turkflow.hits.mturk.reconcile import due_for_approval
from turkflow.hits.provider import Providers
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Bonus,
    BonusStatus,
    Event,
    Hit,
    HitStatus,
    MTurkQualification,
    Task,
    Turn,
    TurnStatus,
    Worker,
)

QUALS = {"role:student": "3STUDENTQUALIFICATION00000001", "role:teacher": "3TEACHERQUALIFICATION00000001",
         "blocked": "3PAUSEDQUALIFICATION000000001"}
SANDBOX_SITE = "https://workersandbox.mturk.com"


def mturk_id(prefix: str, n: int) -> str:
    return f"{prefix}{n:0{30 - len(prefix)}d}"


class Matches:
    """A Stubber expectation for one parameter that a predicate checks (and that remembers what it saw)."""

    def __init__(self, check: Callable[[Any], bool], what: str):
        self.check, self.what, self.seen = check, what, []

    def __eq__(self, other: object) -> bool:
        self.seen.append(other)
        return bool(self.check(other))

    def __repr__(self) -> str:
        return f"<{self.what}>"


# ---- fixtures -----------------------------------------------------------------------------------------


@pytest.fixture
def mturk_client():  # noqa: ANN201 - a botocore client
    return boto3.client("mturk", region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


@pytest.fixture
def stubber(mturk_client):  # noqa: ANN001, ANN201
    stub = Stubber(mturk_client)
    stub.activate()
    yield stub
    stub.deactivate()


@pytest.fixture
def mturk_settings(settings):  # noqa: ANN001, ANN201
    """MTurk shows only HTTPS pages; the stubbed client never reaches this address."""
    return settings.model_copy(update={"public_url": "https://turkflow.example.org", "provider": "mturk"})


@pytest.fixture
def mturk_providers(mturk_settings, mturk_client) -> Providers:  # noqa: ANN001
    return registry.providers(mturk_settings, clients={"mturk": mturk_client})


@pytest.fixture
def mturk_celery(celery_worker, mturk_settings, mturk_providers):  # noqa: ANN001, ANN201
    """The session's real Celery worker, running with the stubbed MTurk client."""
    import turkflow.workers.app

    turkflow.workers.app.configure(mturk_settings, mturk_providers)
    return celery_worker


# ---- helpers ------------------------------------------------------------------------------------------


def add_quals(settings, live: bool = False) -> None:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        for purpose, type_id in QUALS.items():
            s.add(MTurkQualification(purpose=purpose, live=live, type_id=type_id + ("L" if live else ""),
                                     name=f"turkflow: {purpose}"))


def launch(settings, conversations: int = 1, max_turns: int = 6, budget_cents=None, live: bool = False,  # noqa: ANN001
           quals: bool = True) -> tuple[int, list[int]]:
    """An MTurk batch with its first turns opened (not yet published)."""
    if quals:
        add_quals(settings, live)
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), conversations, name="mturk",
                                             provider="mturk", max_turns=max_turns, budget_cents=budget_cents,
                                             live=live)
        return batch.id, [h.id for h in hits]


def requirements(role: str) -> list[dict]:
    other = "teacher" if role == "student" else "student"
    return [
        {"QualificationTypeId": QUALS[f"role:{role}"], "Comparator": "GreaterThanOrEqualTo", "IntegerValues": [80],
         "ActionsGuarded": "Accept"},
        {"QualificationTypeId": QUALS[f"role:{other}"], "Comparator": "DoesNotExist",
         "ActionsGuarded": "DiscoverPreviewAndAccept"},
        {"QualificationTypeId": QUALS["blocked"], "Comparator": "DoesNotExist",
         "ActionsGuarded": "DiscoverPreviewAndAccept"},
    ]


def token_of(hit_id: int) -> Matches:
    pattern = rf"turkflow-[0-9a-f]{{10}}-hit-{hit_id}"
    return Matches(lambda t: isinstance(t, str) and len(t) <= 64 and re.fullmatch(pattern, t),
                   f"deterministic token of HIT {hit_id}")


def expect_create_hit(stubber: Stubber, hit_id: int, role: str, mturk_hit_id: str, *, token: Any = None,
                      reqs: Any = None, error: str | None = None, message: str = "") -> None:
    expected = {
        "Title": Matches(lambda t: t.startswith(f"{role.capitalize()}: "), f"a {role} title"),
        "Description": ANY, "Keywords": ANY,
        "Reward": "0.20", "MaxAssignments": 1,
        "LifetimeInSeconds": 3 * 24 * 3600, "AssignmentDurationInSeconds": 1800,
        "AutoApprovalDelayInSeconds": 3 * 24 * 3600,
        "Question": Matches(lambda q: q.startswith("<ExternalQuestion xmlns=\"http://mechanicalturk.amazonaws.com/"
                                                   "AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd\">"
                                                   "<ExternalURL>https://turkflow.example.org/mturk/turn?h=")
                            and q.endswith("</ExternalURL><FrameHeight>0</FrameHeight></ExternalQuestion>"),
                            "an ExternalQuestion for the turn page"),
        "RequesterAnnotation": Matches(lambda a: a.endswith(f" hit {hit_id}"), f"the annotation of HIT {hit_id}"),
        "UniqueRequestToken": token if token is not None else token_of(hit_id),
        "QualificationRequirements": reqs if reqs is not None else requirements(role),
    }
    if error:
        stubber.add_client_error("create_hit", service_error_code=error, service_message=message,
                                 http_status_code=400, expected_params=expected)
    else:
        stubber.add_response("create_hit", {"HIT": {"HITId": mturk_hit_id, "MaxAssignments": 1}}, expected)


def not_submitted(stubber: Stubber, assignment_id: str) -> None:
    """GetAssignment while a worker still holds the assignment: MTurk does not know it as submitted."""
    stubber.add_client_error("get_assignment", service_error_code="RequestError",
                             service_message=f"Assignment {assignment_id} does not exist. (1698330947012 s)",
                             http_status_code=400, expected_params={"AssignmentId": assignment_id})


def hit_state(stubber: Stubber, mturk_hit_id: str, pending: int, expires_in: timedelta = timedelta(days=2)) -> None:
    stubber.add_response("get_hit", {"HIT": {
        "HITId": mturk_hit_id, "NumberOfAssignmentsPending": pending,
        "NumberOfAssignmentsAvailable": 0 if pending else 1, "NumberOfAssignmentsCompleted": 0,
        "Expiration": datetime.now(timezone.utc) + expires_in,
        "HITStatus": "Unassignable" if pending else "Assignable"}}, {"HITId": mturk_hit_id})


def publish(settings, providers, hit_id: int) -> Hit:  # noqa: ANN001
    pipeline.publish(settings, providers, hit_id, "mturk")
    with session_scope(settings.database_url) as s:
        return s.get(Hit, hit_id)


def accepted(settings, hit_id: int, assignment_id: str, worker_id: str) -> None:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        accept_assignment(s, s.get(Hit, hit_id), assignment_id, worker_id)


def submitted(settings, hit_id: int, assignment_id: str, worker_id: str,  # noqa: ANN001
              answers=STUDENT_ANSWERS) -> int:  # noqa: ANN001
    accepted(settings, hit_id, assignment_id, worker_id)
    with session_scope(settings.database_url) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == worker_id)).one()
        return lifecycle.submit_turn(s, assignment_id, worker, answers).turn.id


def answer_xml(answers: dict) -> str:
    import json
    from xml.sax.saxutils import escape

    return ('<?xml version="1.0" encoding="ASCII"?><QuestionFormAnswers xmlns="http://mechanicalturk.amazonaws.com/'
            'AWSMechanicalTurkDataSchemas/2005-10-01/QuestionFormAnswers.xsd"><Answer><QuestionIdentifier>'
            f'turkflow_answers</QuestionIdentifier><FreeText>{escape(json.dumps(answers))}</FreeText></Answer>'
            '</QuestionFormAnswers>')


# ---- publishing ---------------------------------------------------------------------------------------


def test_publishing_a_turn_creates_one_external_question_hit(mturk_settings, mturk_providers, stubber):
    _, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    hit = publish(mturk_settings, mturk_providers, hit_id)
    assert (hit.status, hit.external_id) == (HitStatus.open, mturk_id("3HIT", 1))
    assert hit.expires_at is not None
    publish(mturk_settings, mturk_providers, hit_id)  # published already: no second CreateHIT
    stubber.assert_no_pending_responses()


def test_a_live_batch_also_requires_approval_rate_approved_hits_and_locale(mturk_settings, mturk_providers, stubber):
    _, (hit_id,) = launch(mturk_settings, live=True)
    live = [dict(r, QualificationTypeId=r["QualificationTypeId"] + "L") for r in requirements("student")] + [
        {"QualificationTypeId": "000000000000000000L0", "Comparator": "GreaterThanOrEqualTo", "IntegerValues": [95],
         "ActionsGuarded": "DiscoverPreviewAndAccept"},
        {"QualificationTypeId": "00000000000000000040", "Comparator": "GreaterThanOrEqualTo", "IntegerValues": [100],
         "ActionsGuarded": "DiscoverPreviewAndAccept"},
        {"QualificationTypeId": "00000000000000000071", "Comparator": "In", "LocaleValues": [{"Country": "US"}],
         "ActionsGuarded": "DiscoverPreviewAndAccept"},
    ]
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1), reqs=live)
    assert publish(mturk_settings, mturk_providers, hit_id).status == HitStatus.open
    stubber.assert_no_pending_responses()


def test_publishing_without_qualification_types_says_to_create_them(mturk_settings, mturk_providers, stubber):
    _, (hit_id,) = launch(mturk_settings, quals=False)
    with pytest.raises(MTurkError, match="turkflow mturk quals"):
        publish(mturk_settings, mturk_providers, hit_id)
    with session_scope(mturk_settings.database_url) as s:
        assert s.get(Hit, hit_id).status == HitStatus.pending
    stubber.assert_no_pending_responses()


def test_a_throttled_create_hit_is_retried_by_celery_with_the_same_token(mturk_settings, mturk_providers, stubber,
                                                                         mturk_celery):
    from turkflow.workers import tasks

    _, (hit_id,) = launch(mturk_settings)
    first = token_of(hit_id)
    expect_create_hit(stubber, hit_id, "student", "", token=first, error="ThrottlingException",
                      message="Rate exceeded")
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1),
                      token=Matches(lambda t: t == first.seen[0], "the first attempt's token"))
    tasks.publish_hit.delay(hit_id, "mturk")

    def published():
        with session_scope(mturk_settings.database_url) as s:
            return s.get(Hit, hit_id).external_id

    assert wait_until(published) == mturk_id("3HIT", 1)
    with session_scope(mturk_settings.database_url) as s:
        assert len(s.exec(select(Hit)).all()) == 1
    stubber.assert_no_pending_responses()


def test_a_repeated_token_adopts_the_hit_mturk_already_created(mturk_settings, mturk_providers, stubber):
    """The first CreateHIT went through but its answer was lost; the retry is refused as a repeat."""
    _, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", "", error="RequestError",
                      message="The idempotency token \"x\" has already been processed. (1626172412406)")
    annotation = f"turkflow {mturk_providers.get('mturk').install} batch 1 turn 1 hit {hit_id}"
    stubber.add_response("list_hits", {"HITs": [
        {"HITId": mturk_id("3OTHER", 1), "RequesterAnnotation": "someone else's"},
        {"HITId": mturk_id("3HIT", 7), "RequesterAnnotation": annotation},
    ], "NumResults": 2}, {"MaxResults": 100})
    assert publish(mturk_settings, mturk_providers, hit_id).external_id == mturk_id("3HIT", 7)
    stubber.assert_no_pending_responses()


def test_a_repeated_token_error_naming_the_hit_is_checked_with_get_hit(mturk_settings, mturk_providers, stubber):
    _, (hit_id,) = launch(mturk_settings)
    existing = mturk_id("3HIT", 8)
    expect_create_hit(stubber, hit_id, "student", "", error="RequestError",
                      message=f"The HIT with ID {existing} already exists for this UniqueRequestToken.")
    annotation = f"turkflow {mturk_providers.get('mturk').install} batch 1 turn 1 hit {hit_id}"
    stubber.add_response("get_hit", {"HIT": {"HITId": existing, "RequesterAnnotation": annotation}},
                         {"HITId": existing})
    assert publish(mturk_settings, mturk_providers, hit_id).external_id == existing
    stubber.assert_no_pending_responses()


# ---- budget -------------------------------------------------------------------------------------------


def test_budget_cap_refuses_a_launch_it_cannot_pay_for(mturk_settings, stubber):
    with pytest.raises(ValueError, match="launch at most 2"):
        launch(mturk_settings, conversations=3, budget_cents=50)
    with session_scope(mturk_settings.database_url) as s:
        assert s.exec(select(Batch)).all() == [] and s.exec(select(Hit)).all() == []
    stubber.assert_no_pending_responses()


def test_budget_cap_stops_opening_turns_before_the_next_hit(mturk_settings, mturk_providers, stubber):
    batch_id, (hit_id,) = launch(mturk_settings, budget_cents=30)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(mturk_settings, mturk_providers, hit_id)
    turn_id = submitted(mturk_settings, hit_id, mturk_id("3ASG", 1), "AWORKER1")
    result = pipeline.after_submission(mturk_settings, mturk_providers, turn_id)  # no CreateHIT is stubbed
    assert result.opened_hit_id is None
    with session_scope(mturk_settings.database_url) as s:
        assert s.get(Batch, batch_id).status == BatchStatus.paused
        assert len(s.exec(select(Hit)).all()) == 1
    stubber.assert_no_pending_responses()


# ---- assignments --------------------------------------------------------------------------------------


def test_verifying_an_assignment_in_progress_needs_a_worker_holding_the_hit(mturk_settings, mturk_providers,
                                                                           stubber):
    _, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(mturk_settings, mturk_providers, hit_id)
    provider = mturk_providers.get("mturk")
    not_submitted(stubber, mturk_id("3ASG", 1))
    hit_state(stubber, mturk_id("3HIT", 1), pending=1)
    not_submitted(stubber, mturk_id("3FAKE", 1))
    hit_state(stubber, mturk_id("3HIT", 1), pending=0)
    stubber.add_response("get_assignment", {"Assignment": {
        "AssignmentId": mturk_id("3ASG", 2), "WorkerId": "ASOMEONEELSE", "HITId": mturk_id("3HIT", 1),
        "AssignmentStatus": "Submitted"}}, {"AssignmentId": mturk_id("3ASG", 2)})
    with session_scope(mturk_settings.database_url) as s:
        hit = s.get(Hit, hit_id)
        provider.verify_submission(s, hit, mturk_id("3ASG", 1), "AWORKER1")
        with pytest.raises(lifecycle.Forbidden, match="no assignment in progress"):
            provider.verify_submission(s, hit, mturk_id("3FAKE", 1), "AWORKER1")
        with pytest.raises(lifecycle.Forbidden, match="another HIT or worker"):
            provider.verify_submission(s, hit, mturk_id("3ASG", 2), "AWORKER1")
    stubber.assert_no_pending_responses()


def test_accepting_creates_the_mturk_worker_with_the_hits_role_and_refuses_the_other_role(mturk_settings,
                                                                                          mturk_providers, stubber):
    _, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(mturk_settings, mturk_providers, hit_id)
    accepted(mturk_settings, hit_id, mturk_id("3ASG", 1), "AWORKER1")
    with session_scope(mturk_settings.database_url) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == "AWORKER1")).one()
        assert (worker.role, worker.onboarded) == ("student", True)
        s.add(Worker(external_id="ATEACHER1", role="teacher"))
    with pytest.raises(lifecycle.Forbidden, match="registered as a teacher"):
        accepted(mturk_settings, hit_id, mturk_id("3ASG", 2), "ATEACHER1")
    with pytest.raises(lifecycle.Forbidden, match="not an MTurk id"):
        accepted(mturk_settings, hit_id, "x' or 1=1", "AWORKER1")
    stubber.assert_no_pending_responses()


# ---- the reconciler -----------------------------------------------------------------------------------


def test_a_returned_assignment_reopens_the_turn_on_the_same_live_hit(mturk_settings, mturk_providers, stubber):
    _, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(mturk_settings, mturk_providers, hit_id)
    accepted(mturk_settings, hit_id, mturk_id("3ASG", 1), "AWORKER1")
    hit_state(stubber, mturk_id("3HIT", 1), pending=0)
    stubber.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                         {"HITId": mturk_id("3HIT", 1), "AssignmentStatuses": ["Submitted", "Approved", "Rejected"],
                          "MaxResults": 100})
    repairs = pipeline.reconcile_platform(mturk_settings, mturk_providers, "mturk")
    assert len(repairs.assignments_abandoned) == 1 and repairs.hits_reopened == []
    with session_scope(mturk_settings.database_url) as s:
        assert s.exec(select(Assignment)).one().status == AssignmentStatus.abandoned
        assert s.get(Hit, hit_id).status == HitStatus.open  # MTurk lists the HIT again: a new worker may take it
    accepted(mturk_settings, hit_id, mturk_id("3ASG", 2), "AWORKER2")
    stubber.assert_no_pending_responses()


def test_an_expired_unanswered_hit_reopens_the_turn_as_a_new_hit(mturk_settings, mturk_providers, stubber):
    _, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(mturk_settings, mturk_providers, hit_id)
    accepted(mturk_settings, hit_id, mturk_id("3ASG", 1), "AWORKER1")  # and abandoned on MTurk
    hit_state(stubber, mturk_id("3HIT", 1), pending=0, expires_in=-timedelta(minutes=1))
    stubber.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0}, None)
    repairs = pipeline.reconcile_platform(mturk_settings, mturk_providers, "mturk")
    assert repairs.hits_reopened == [hit_id + 1]
    expect_create_hit(stubber, hit_id + 1, "student", mturk_id("3HIT", 2))
    publish(mturk_settings, mturk_providers, hit_id + 1)  # what the queued publish task does
    with session_scope(mturk_settings.database_url) as s:
        old, new = s.get(Hit, hit_id), s.get(Hit, hit_id + 1)
        assert (old.status, new.status, new.attempt, new.turn_id) == (HitStatus.expired, HitStatus.open, 2, old.turn_id)
        assert new.external_id == mturk_id("3HIT", 2)
        assert s.get(Turn, old.turn_id).status == TurnStatus.open
        assert s.exec(select(Assignment)).one().status == AssignmentStatus.abandoned
    stubber.assert_no_pending_responses()


def test_an_expired_hit_still_held_by_a_worker_waits_for_them(mturk_settings, mturk_providers, stubber):
    _, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(mturk_settings, mturk_providers, hit_id)
    hit_state(stubber, mturk_id("3HIT", 1), pending=1, expires_in=-timedelta(minutes=1))
    stubber.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0}, None)
    assert not pipeline.reconcile_platform(mturk_settings, mturk_providers, "mturk")
    with session_scope(mturk_settings.database_url) as s:
        assert s.get(Hit, hit_id).status == HitStatus.open
    stubber.assert_no_pending_responses()


def submitted_on_mturk_only(settings, providers, stubber) -> int:  # noqa: ANN001
    """A published student HIT whose assignment MTurk lists as submitted while we stored nothing (the submit
    never reached us); returns the HIT's id."""
    _, (hit_id,) = launch(settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(settings, providers, hit_id)
    now = datetime.now(timezone.utc)
    hit_state(stubber, mturk_id("3HIT", 1), pending=0)
    stubber.add_response("list_assignments_for_hit", {"Assignments": [{
        "AssignmentId": mturk_id("3ASG", 1), "WorkerId": "AWORKER1", "HITId": mturk_id("3HIT", 1),
        "AssignmentStatus": "Submitted", "AcceptTime": now - timedelta(minutes=5), "SubmitTime": now,
        "Answer": answer_xml(form_answers({"intent": "request_items", "response": "What do I need?"})),
    }], "NumResults": 1}, None)
    return hit_id


def test_the_reconciler_stores_a_submission_mturk_has_and_we_missed(mturk_settings, mturk_providers, stubber):
    hit_id = submitted_on_mturk_only(mturk_settings, mturk_providers, stubber)
    repairs = pipeline.reconcile_platform(mturk_settings, mturk_providers, "mturk")
    assert len(repairs.submissions_stored) == 1
    stubber.assert_no_pending_responses()  # the reconciler itself opens nothing: it queues turn_submitted
    expect_create_hit(stubber, hit_id + 1, "teacher", mturk_id("3HIT", 2))  # the next turn opens
    pipeline.after_submission(mturk_settings, mturk_providers, repairs.submissions_stored[0])
    with session_scope(mturk_settings.database_url) as s:
        turn = s.get(Turn, repairs.submissions_stored[0])
        assert (turn.status, turn.text, turn.label) == (TurnStatus.submitted, "What do I need?", "request_items")
        assert s.exec(select(Assignment)).one().status == AssignmentStatus.submitted
        assert s.get(Hit, hit_id + 1).external_id == mturk_id("3HIT", 2)
        assert s.exec(select(Event).where(Event.kind == "missed_submission_stored")).one()
    stubber.assert_no_pending_responses()


def test_the_mturk_beat_task_sends_a_missed_submission_the_way_of_a_live_one(mturk_settings, mturk_providers,
                                                                             stubber, mturk_celery):
    """The reconciler stores what MTurk has and queues the live submission's task: through the real worker
    the next turn opens on MTurk and the stored turn is reviewed once, as a submission through the page."""
    from turkflow.workers import mturk_tasks

    hit_id = submitted_on_mturk_only(mturk_settings, mturk_providers, stubber)
    expect_create_hit(stubber, hit_id + 1, "teacher", mturk_id("3HIT", 2))
    mturk_tasks.reconcile_mturk.delay()

    def opened_and_reviewed():
        with session_scope(mturk_settings.database_url) as s:
            nxt, first = s.get(Hit, hit_id + 1), s.exec(select(Turn).where(Turn.index == 0)).one()
            return nxt is not None and nxt.status == HitStatus.open and first.reviewed_at is not None

    assert wait_until(opened_and_reviewed)
    with session_scope(mturk_settings.database_url) as s:
        assert len(s.exec(select(Event).where(Event.kind == "turn_reviewed")).all()) == 1
    stubber.assert_no_pending_responses()


def test_an_unreadable_mturk_submission_reopens_the_turn(mturk_settings, mturk_providers, stubber):
    _, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(mturk_settings, mturk_providers, hit_id)
    hit_state(stubber, mturk_id("3HIT", 1), pending=0)
    stubber.add_response("list_assignments_for_hit", {"Assignments": [{
        "AssignmentId": mturk_id("3ASG", 1), "WorkerId": "AWORKER1", "HITId": mturk_id("3HIT", 1),
        "AssignmentStatus": "Submitted", "Answer": "<QuestionFormAnswers/>"}], "NumResults": 1}, None)
    repairs = pipeline.reconcile_platform(mturk_settings, mturk_providers, "mturk")
    assert (repairs.unreadable, repairs.hits_reopened, repairs.submissions_stored) == ([hit_id], [hit_id + 1], [])
    with session_scope(mturk_settings.database_url) as s:
        assert s.exec(select(Turn)).one().status == TurnStatus.open
    stubber.assert_no_pending_responses()


# ---- approval and bonuses -----------------------------------------------------------------------------


def test_approval_settles_with_mturk_when_mturk_already_decided(mturk_settings, mturk_providers, stubber):
    _, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(mturk_settings, mturk_providers, hit_id)
    submitted(mturk_settings, hit_id, mturk_id("3ASG", 1), "AWORKER1")
    stubber.add_client_error("approve_assignment", service_error_code="RequestError",
                             service_message="This operation can be called with a status of: Submitted",
                             http_status_code=400, expected_params={"AssignmentId": mturk_id("3ASG", 1)})
    stubber.add_response("get_assignment", {"Assignment": {
        "AssignmentId": mturk_id("3ASG", 1), "WorkerId": "AWORKER1", "HITId": mturk_id("3HIT", 1),
        "AssignmentStatus": "Approved"}}, {"AssignmentId": mturk_id("3ASG", 1)})
    with session_scope(mturk_settings.database_url) as s:
        assignment_id = s.exec(select(Assignment)).one().id
    pipeline.approve(mturk_settings, mturk_providers, assignment_id)
    pipeline.approve(mturk_settings, mturk_providers, assignment_id)  # settled: no further call
    with session_scope(mturk_settings.database_url) as s:
        assert s.get(Assignment, assignment_id).status == AssignmentStatus.approved
    stubber.assert_no_pending_responses()


def test_approval_is_due_after_the_configured_delay(mturk_settings, mturk_providers, stubber):
    _, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(mturk_settings, mturk_providers, hit_id)
    submitted(mturk_settings, hit_id, mturk_id("3ASG", 1), "AWORKER1")
    with session_scope(mturk_settings.database_url) as s:
        assignment = s.exec(select(Assignment)).one()
        delay = mturk_settings.mturk_approve_after_seconds
        due = assignment.submitted_at + timedelta(seconds=delay)
        assert due_for_approval(s, due - timedelta(seconds=1), delay) == []
        assert due_for_approval(s, due, delay) == [assignment.id]
    stubber.add_response("approve_assignment", {}, {"AssignmentId": mturk_id("3ASG", 1)})
    pipeline.approve(mturk_settings, mturk_providers, assignment.id)
    with session_scope(mturk_settings.database_url) as s:
        assert s.get(Assignment, assignment.id).status == AssignmentStatus.approved
    stubber.assert_no_pending_responses()


def recorded_bonus(settings, providers, stubber) -> int:  # noqa: ANN001
    """A bonus the quality monitor recorded for a turn whose worker is still finishing on MTurk."""
    _, (hit_id,) = launch(settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(settings, providers, hit_id)
    turn_id = submitted(settings, hit_id, mturk_id("3ASG", 1), "AWORKER1")
    with session_scope(settings.database_url) as s:
        assignment = s.exec(select(Assignment)).one()
        bonus = Bonus(turn_id=turn_id, worker_id=assignment.worker_id, assignment_id=assignment.id, amount_cents=8,
                      request_token=f"turkflow-bonus-turn-{turn_id}")
        s.add(bonus)
        s.flush()
        return bonus.id


def expect_send_bonus(stubber: Stubber, token: Matches, error: str | None = None) -> None:
    expected = {"WorkerId": "AWORKER1", "BonusAmount": "0.08", "AssignmentId": mturk_id("3ASG", 1),
                "Reason": ANY, "UniqueRequestToken": token}
    if error:
        stubber.add_client_error("send_bonus", service_error_code="RequestError", service_message=error,
                                 http_status_code=400, expected_params=expected)
    else:
        stubber.add_response("send_bonus", {}, expected)


def test_a_bonus_is_paid_once_across_retries_while_the_assignment_is_in_flight(mturk_settings, mturk_providers,
                                                                               stubber, mturk_celery):
    from turkflow.workers import tasks

    bonus_id = recorded_bonus(mturk_settings, mturk_providers, stubber)
    token = Matches(lambda t: isinstance(t, str) and t.startswith("turkflow-") and len(t) <= 64, "the bonus token")
    expect_send_bonus(stubber, token, error=f"Assignment {mturk_id('3ASG', 1)} does not exist. (1698330947012 s)")
    expect_send_bonus(stubber, Matches(lambda t: t == token.seen[0], "the same token"))
    tasks.pay_bonus.delay(bonus_id)

    def paid():
        with session_scope(mturk_settings.database_url) as s:
            return s.get(Bonus, bonus_id).status == BonusStatus.paid

    assert wait_until(paid)
    assert pipeline.pay_bonus(mturk_settings, mturk_providers, bonus_id)  # paid already: no SendBonus
    with session_scope(mturk_settings.database_url) as s:
        assert len(s.exec(select(Event).where(Event.kind == "bonus_paid")).all()) == 1
    stubber.assert_no_pending_responses()


def test_a_bonus_whose_token_mturk_already_processed_counts_as_paid(mturk_settings, mturk_providers, stubber):
    bonus_id = recorded_bonus(mturk_settings, mturk_providers, stubber)
    token = Matches(lambda t: isinstance(t, str) and t.startswith("turkflow-"), "the bonus token")
    expect_send_bonus(stubber, token, error=f"Assignment {mturk_id('3ASG', 1)} does not exist. (1 s)")
    with pytest.raises(NotPayableYet):
        pipeline.pay_bonus(mturk_settings, mturk_providers, bonus_id)
    with session_scope(mturk_settings.database_url) as s:
        assert s.get(Bonus, bonus_id).status == BonusStatus.pending
    expect_send_bonus(stubber, token, error="The idempotency token \"t\" has already been processed. (1)")
    assert pipeline.pay_bonus(mturk_settings, mturk_providers, bonus_id)
    with session_scope(mturk_settings.database_url) as s:
        assert s.get(Bonus, bonus_id).status == BonusStatus.paid
    stubber.assert_no_pending_responses()


# ---- blocks -------------------------------------------------------------------------------------------


def mturk_worker(settings, providers, stubber) -> int:  # noqa: ANN001
    _, (hit_id,) = launch(settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(settings, providers, hit_id)
    accepted(settings, hit_id, mturk_id("3ASG", 1), "AWORKER1")
    with session_scope(settings.database_url) as s:
        return s.exec(select(Worker).where(Worker.external_id == "AWORKER1")).one().id


def test_a_temporary_block_is_the_paused_qualification_that_hides_the_hits(mturk_settings, mturk_providers, stubber):
    worker_id = mturk_worker(mturk_settings, mturk_providers, stubber)
    stubber.add_response("associate_qualification_with_worker", {}, {
        "QualificationTypeId": QUALS["blocked"], "WorkerId": "AWORKER1", "IntegerValue": 1, "SendNotification": False})
    with session_scope(mturk_settings.database_url) as s:
        mturk_providers.get("mturk").soft_block(s, s.get(Worker, worker_id), "low ratings")
    stubber.assert_no_pending_responses()


def test_a_permanent_block_is_also_an_mturk_worker_block_and_unblock_reverses_both(mturk_settings, mturk_providers,
                                                                                    stubber):
    worker_id = mturk_worker(mturk_settings, mturk_providers, stubber)
    stubber.add_response("associate_qualification_with_worker", {}, {
        "QualificationTypeId": QUALS["blocked"], "WorkerId": "AWORKER1", "IntegerValue": 1, "SendNotification": False})
    stubber.add_response("create_worker_block", {}, {"WorkerId": "AWORKER1", "Reason": "copied the document"})
    stubber.add_response("disassociate_qualification_from_worker", {}, {
        "QualificationTypeId": QUALS["blocked"], "WorkerId": "AWORKER1", "Reason": ANY})
    stubber.add_response("delete_worker_block", {}, {"WorkerId": "AWORKER1", "Reason": ANY})
    provider = mturk_providers.get("mturk")
    with session_scope(mturk_settings.database_url) as s:
        provider.block_permanently(s, s.get(Worker, worker_id), "copied the document")
        provider.unblock(s, s.get(Worker, worker_id))
    stubber.assert_no_pending_responses()


def test_unblocking_a_worker_who_only_had_the_soft_block_tolerates_mturk_saying_no_block(mturk_settings,
                                                                                        mturk_providers, stubber):
    worker_id = mturk_worker(mturk_settings, mturk_providers, stubber)
    stubber.add_response("disassociate_qualification_from_worker", {}, None)
    stubber.add_client_error("delete_worker_block", service_error_code="RequestError",
                             service_message="Worker AWORKER1 is not blocked.", http_status_code=400)
    with session_scope(mturk_settings.database_url) as s:
        mturk_providers.get("mturk").unblock(s, s.get(Worker, worker_id))
    stubber.assert_no_pending_responses()


# ---- cancelling ---------------------------------------------------------------------------------------


def test_cancelling_a_batch_expires_its_open_hits_on_mturk(mturk_settings, mturk_providers, stubber):
    batch_id, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(mturk_settings, mturk_providers, hit_id)
    stubber.add_response("update_expiration_for_hit", {}, {
        "HITId": mturk_id("3HIT", 1), "ExpireAt": Matches(lambda at: at < datetime.now(timezone.utc), "a past moment")})
    with session_scope(mturk_settings.database_url) as s:
        expired = lifecycle.set_batch_status(s, s.get(Batch, batch_id), BatchStatus.cancelled, "requester:test")
        assert [h.id for h in expired] == [hit_id]
    pipeline.expire(mturk_settings, mturk_providers, hit_id)
    stubber.assert_no_pending_responses()


def test_a_throttle_that_outlasts_botocores_retries_raises_for_the_task_to_retry(mturk_settings, mturk_providers,
                                                                                 stubber):
    batch_id, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", "", error="ThrottlingException", message="Rate exceeded")
    with pytest.raises(MTurkError, match="Rate exceeded") as raised:
        publish(mturk_settings, mturk_providers, hit_id)
    assert isinstance(raised.value.__cause__, ClientError)
    assert raised.value.__cause__.response["Error"]["Code"] == "ThrottlingException"
    with session_scope(mturk_settings.database_url) as s:
        hit = s.get(Hit, hit_id)
        assert (hit.status, hit.external_id) == (HitStatus.pending, None)  # the reconciler publishes it later
        assert lifecycle.unpublished_hits(s, datetime.now(timezone.utc) + timedelta(seconds=1)) == [hit_id]
    stubber.assert_no_pending_responses()


def test_a_throttled_hit_does_not_stop_the_reconcilers_round(mturk_settings, mturk_providers, stubber):
    _, hit_ids = launch(mturk_settings, conversations=2)
    for n, hit_id in enumerate(hit_ids, 1):
        expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", n))
        publish(mturk_settings, mturk_providers, hit_id)
    stubber.add_client_error("get_hit", service_error_code="ThrottlingException", service_message="Rate exceeded",
                             http_status_code=400, expected_params={"HITId": mturk_id("3HIT", 1)})
    hit_state(stubber, mturk_id("3HIT", 2), pending=0, expires_in=-timedelta(minutes=1))
    stubber.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0}, None)
    repairs = pipeline.reconcile_platform(mturk_settings, mturk_providers, "mturk")
    assert (repairs.failed, repairs.hits_reopened) == ([hit_ids[0]], [hit_ids[1] + 1])
    stubber.assert_no_pending_responses()
