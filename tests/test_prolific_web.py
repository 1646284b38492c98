"""Prolific participants reaching turns through the study link, ``/prolific/turn``, and Prolific's webhook,
``/prolific/webhook``, against the fake Prolific (every request and response checked against Prolific's
OpenAPI description) on both databases: forged ids refused with nothing stored, returned submissions
giving their turn back (by webhook or by the poller), blocks, and bonuses paid exactly once."""

from __future__ import annotations

import html
import re
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sqlmodel import select

from turkflow import pipeline
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.hits import lifecycle
from turkflow.hits.prolific import api, sync
from turkflow.hits.keep import Keep
from turkflow.hits.prolific.provider import BonusOutcomeUnknown
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Bonus,
    BonusStatus,
    Event,
    Hit,
    KeepRule,
    ProlificStudy,
    Task,
    Turn,
    TurnStatus,
    Worker,
    WorkerStatus,
    utcnow,
)
from turkflow.quality import monitor, review
from turkflow.workers import prolific_tasks

from tests.conftest import wait_until
from tests.fake_prolific import ApiError, FakeProlific, Refused
from tests.test_pipeline import STUDENT_ANSWERS, TEACHER_ANSWERS

pytest_plugins = ["tests.fake_prolific"]


# The participants the researcher put in the hand-made role groups these tests run with (they stand for
# onboarding: Prolific lets only their members into a role's studies); the onboarding study's tests
# (test_prolific_onboarding.py) run with none, and the onboarding study makes the groups.
VOUCHED = ("p1", "p2", "p3", "p4", "p-student", "p-teacher")


@pytest.fixture
def settings(tmp_path: Path, database_url: str, redis_url: str, fake_prolific: FakeProlific) -> Settings:
    """Settings for a Prolific collection whose Prolific is the fake, with webhooks set up and hand-made
    role groups (TURKFLOW_PROLIFIC_ROLE_GROUPS) holding ``VOUCHED``."""
    return prolific_settings(tmp_path, database_url, redis_url, fake_prolific, VOUCHED)


def prolific_settings(tmp_path: Path, database_url: str, redis_url: str, fake: FakeProlific,
                      vouched: tuple[str, ...]) -> Settings:
    """Webhooks set up; with ``vouched``, hand-made role groups of those participants."""
    client = api.ProlificClient(fake.token, fake.url)
    groups = {role: api.create_participant_group(client, fake.workspace_id, f"Lab's {role}s",
                                                 participant_ids=vouched)["id"]
              for role in ("student", "teacher")} if vouched else {}
    return Settings(data_dir=tmp_path / "var", database_url=database_url, redis_url=redis_url,
                    secret_key="test-secret", worker_hash_key="test-hash-key",
                    public_url="https://turkflow.example.org", prolific_rehearsal_host="turkflow.example.org",
                    stuck_after_seconds=0, reopen_after_seconds=0,
                    review_after_seconds=0, provider="prolific",
                    prolific_token=fake.token, prolific_workspace_id=fake.workspace_id,
                    prolific_base_url=fake.url,
                    prolific_role_groups=",".join(f"{role}={group}" for role, group in groups.items()),
                    prolific_webhook_secret=api.create_webhook_secret(client, fake.workspace_id))


def launch(settings, providers, conversations=1, max_turns=6, keep=None) -> int:  # noqa: ANN001
    """A Prolific batch whose first turns are published (the student study is live)."""
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), conversations, name="prolific",
                                             provider="prolific", max_turns=max_turns, keep=keep)
        batch_id, hit_ids = batch.id, [h.id for h in hits]
    for hit_id in hit_ids:
        pipeline.publish(settings, providers, hit_id, "prolific")
    return batch_id


def study_of(settings, batch_id: int, role: str) -> str:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        return s.exec(select(ProlificStudy.study_id).where(ProlificStudy.batch_id == batch_id,
                                                           ProlificStudy.role == role)).one()


def study_link(fake: FakeProlific, study_id: str, participant_id: str, submission_id: str,
               base: str = "") -> str:
    """The study's URL as Prolific sends a participant to it (its placeholders filled in)."""
    url = fake.studies[study_id].fields["external_study_url"]
    filled = (("PROLIFIC_PID", participant_id), ("STUDY_ID", study_id), ("SESSION_ID", submission_id))
    for name, value in filled:
        url = url.replace("{{%" + name + "%}}", value)
    parts = urlsplit(url)
    return f"{base}{parts.path}?{parts.query}"


def form_token(page: str) -> str:
    return html.unescape(re.search(r'name="turkflow_form" value="([^"]+)"', page).group(1))


def arrives(client, fake: FakeProlific, study_id: str, participant_id: str):  # noqa: ANN001, ANN201
    """A participant starts the study on Prolific and opens its link: (submission id, link, page)."""
    submission_id = fake.start(study_id, participant_id)
    link = study_link(fake, study_id, participant_id, submission_id)
    return submission_id, link, client.get(link)


def stored(settings) -> tuple[list[Assignment], list[Turn], list[Worker]]:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        turns = s.exec(select(Turn).where(Turn.status == TurnStatus.submitted)).all()
        return s.exec(select(Assignment)).all(), turns, s.exec(select(Worker)).all()


def assignment(settings, submission_id: str) -> Assignment:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        return s.exec(select(Assignment).where(Assignment.external_id == submission_id)).one()


def completion(providers, batch_id: int, role: str) -> str:  # noqa: ANN001
    return api.completion_url(providers.get("prolific").completion_code(batch_id, role))


# ---- taking and writing a turn -------------------------------------------------------------------------


def test_a_participant_takes_the_waiting_turn_and_goes_back_to_prolific_with_the_code(
        settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers)
    submission_id, link, page = arrives(client, fake_prolific, study_of(settings, batch_id, "student"), "p1")
    assert page.status_code == 200 and 'id="submit-turn"' in page.get_data(as_text=True)
    token = form_token(page.get_data(as_text=True))
    for _ in range(2):  # a double submit stores one turn and finishes on Prolific again
        done = client.post(link, data={**STUDENT_ANSWERS, "turkflow_form": token})
        assert done.status_code == 303 and done.location == completion(providers, batch_id, "student")
    assert client.get(link).location == completion(providers, batch_id, "student")
    assignments, turns, workers = stored(settings)
    assert [(a.external_id, a.status) for a in assignments] == [(submission_id, AssignmentStatus.submitted)]
    assert [t.text for t in turns] == [STUDENT_ANSWERS["response"]]
    assert [(w.external_id, w.role, w.onboarded) for w in workers] == [("prolific:p1", "student", True)]


def test_a_participants_turn_page_says_its_pay_and_what_they_earned_in_the_studys_currency(
        settings, providers, client, fake_prolific):
    settings.prolific_approve_after_seconds = 0
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), 2, name="in pounds", provider="prolific",
                                             reward_cents=45)
        batch.currency = "GBP"  # the workspace's, as batch launch records it
        batch_id, hit_ids = batch.id, [h.id for h in hits]
    for hit_id in hit_ids:
        pipeline.publish(settings, providers, hit_id, "prolific")
    study_id = study_of(settings, batch_id, "student")
    first, link, page = arrives(client, fake_prolific, study_id, "p1")
    assert "Pays £0.45" in page.text and "You have earned £0.00 so far" in page.text and "$" not in page.text
    client.post(link, data={**STUDENT_ANSWERS, "turkflow_form": form_token(page.text)})
    fake_prolific.complete(first, providers.get("prolific").completion_code(batch_id, "student"))
    sync.poll(settings, providers.get("prolific"))  # approval asked for
    sync.poll(settings, providers.get("prolific"))  # and settled
    assert assignment(settings, first).status == AssignmentStatus.approved
    _, _, again = arrives(client, fake_prolific, study_id, "p1")  # the other dialog's first turn
    assert "Pays £0.45" in again.text and "You have earned £0.45 so far" in again.text


def test_the_turn_pages_forms_may_end_on_prolifics_completion_page(settings, providers, client, fake_prolific):
    """A stored turn redirects to Prolific's completion page; a browser applies the page's form-action to that
    redirect, so a policy of 'self' alone kept every participant from getting back to Prolific."""
    batch_id = launch(settings, providers)
    _, _, page = arrives(client, fake_prolific, study_of(settings, batch_id, "student"), "p1")
    policy = page.headers["Content-Security-Policy"]
    assert "form-action 'self' https://app.prolific.com;" in policy and "frame-ancestors 'none'" in policy


def test_a_refused_answer_shows_the_page_again_and_stores_nothing(settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers)
    _, link, page = arrives(client, fake_prolific, study_of(settings, batch_id, "student"), "p1")
    refused = client.post(link, data={**STUDENT_ANSWERS, "response": "",
                                      "turkflow_form": form_token(page.text)})
    assert refused.status_code == 400 and 'name="turkflow_form"' in refused.text
    assert stored(settings)[1] == []


def test_forged_or_mismatched_prolific_ids_get_a_403_and_store_nothing(
        settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers, conversations=2)
    student_study = study_of(settings, batch_id, "student")
    submission_id = fake_prolific.start(student_study, "p1")
    link = study_link(fake_prolific, student_study, "p1", submission_id)
    forged = [
        study_link(fake_prolific, student_study, "p2", submission_id),  # someone else's submission
        study_link(fake_prolific, student_study, "p1", "submission-404"),  # no such submission
        link.replace(f"STUDY_ID={student_study}", "STUDY_ID=study-999"),  # not this batch role's study
        link.replace("r=student", "r=teacher"),
        link.replace("PROLIFIC_PID=p1", "PROLIFIC_PID=p1%27%3B--"),  # not a Prolific id at all
    ]
    for url in forged:
        assert client.get(url).status_code == 403, url
    assert stored(settings) == ([], [], [])

    page = client.get(link)
    token = form_token(page.text)
    other = fake_prolific.start(student_study, "p2")
    for url, form in [
        (study_link(fake_prolific, student_study, "p2", other), token),  # p1's form for p2's submission
        (link, "forged-token"),
        (study_link(fake_prolific, student_study, "p2", submission_id), token),
    ]:
        assert client.post(url, data={**STUDENT_ANSWERS, "turkflow_form": form}).status_code == 403, url
    assert stored(settings)[1] == []
    assert [w.external_id for w in stored(settings)[2]] == ["prolific:p1"]


def test_prolific_down_during_the_submission_check_shows_a_clear_page_and_stores_nothing(
        settings, providers, client, fake_prolific, monkeypatch):
    batch_id = launch(settings, providers)
    study_id = study_of(settings, batch_id, "student")
    submission_id = fake_prolific.start(study_id, "p1")
    link = study_link(fake_prolific, study_id, "p1", submission_id)

    def unavailable(request, submission_id):  # noqa: ANN001, ANN202
        raise ApiError(503, "Service temporarily unavailable.")

    monkeypatch.setattr(fake_prolific, "_get_submission", unavailable)
    page = client.get(link)
    assert page.status_code == 503
    assert "Prolific could not be reached" in page.text and "try again" in page.text
    as_json = client.get(link, headers={"Accept": "application/json"})
    assert as_json.status_code == 503 and "Prolific could not be reached" in as_json.get_json()["error"]
    assert stored(settings) == ([], [], [])

    monkeypatch.undo()  # Prolific is back: the participant takes the turn, then Prolific goes down again
    token = form_token(client.get(link).text)
    monkeypatch.setattr(fake_prolific, "_get_submission", unavailable)
    refused = client.post(link, data={**STUDENT_ANSWERS, "turkflow_form": token})
    assert refused.status_code == 503 and "try again" in refused.text
    assert stored(settings)[1] == []  # no turn stored; the participant still holds it
    monkeypatch.undo()
    done = client.post(link, data={**STUDENT_ANSWERS, "turkflow_form": token})
    assert done.location == completion(providers, batch_id, "student")


def test_a_dashboard_block_while_prolific_is_down_is_kept_and_reaches_prolific_once_it_answers(
        settings, providers, client, fake_prolific, monkeypatch):
    """The person's decision is recorded (our pages refuse the participant at once) and the page says
    Prolific was not told yet; the reconciler puts them on the block list once Prolific answers."""
    from tests.test_dashboard import csrf_token, sign_in
    from turkflow.requesters import create_requester

    batch_id = launch(settings, providers)
    arrives(client, fake_prolific, study_of(settings, batch_id, "student"), "p1")
    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")
        worker_id = s.exec(select(Worker.id).where(Worker.external_id == "prolific:p1")).one()
    sign_in(client)

    def unavailable(request, group_id):  # noqa: ANN001, ANN202
        raise ApiError(503, "Service temporarily unavailable.")

    monkeypatch.setattr(fake_prolific, "_add_members", unavailable)
    token = csrf_token(client, f"/admin/workers/{worker_id}")
    page = client.post(f"/admin/workers/{worker_id}/block", data={"csrf_token": token, "note": "spam"},
                       follow_redirects=True)
    assert page.status_code == 200 and "is blocked permanently" in page.text
    assert "could not be told yet" in page.text and "Prolific could not be reached" in page.text
    blocked = providers.get("prolific").blocked_group()
    with session_scope(settings.database_url) as s:
        worker = s.get(Worker, worker_id)
        assert (worker.status, worker.platform_status) == (WorkerStatus.blocked, WorkerStatus.active)
    assert "p1" not in fake_prolific.groups[blocked].members
    assert pipeline.reconcile(settings, providers).platform_statuses == []  # still down: kept for later
    monkeypatch.undo()
    assert pipeline.reconcile(settings, providers).platform_statuses == [worker_id]
    assert "p1" in fake_prolific.groups[blocked].members
    with session_scope(settings.database_url) as s:
        assert s.get(Worker, worker_id).platform_status == WorkerStatus.blocked


def test_a_participant_who_finds_no_waiting_turn_is_asked_to_return_the_submission(
        settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers)
    study_id = study_of(settings, batch_id, "student")
    early = fake_prolific.start(study_id, "p1")
    fake_prolific.studies[study_id].fields["total_available_places"] += 1  # places ran one ahead
    late = fake_prolific.start(study_id, "p2")
    assert client.get(study_link(fake_prolific, study_id, "p1", early)).status_code == 200
    page = client.get(study_link(fake_prolific, study_id, "p2", late))
    assert page.status_code == 409 and "return this submission" in page.text
    assert [a.external_id for a in stored(settings)[0]] == [early]


# ---- keeping people for their session (--keep session) -----------------------------------------------------


def test_a_session_offers_a_participant_their_conversations_turn_first_and_lets_it_go_when_they_leave(
        settings, providers, client, fake_prolific):
    """Two conversations, p1 and p2 each writing one's student turns: the teacher's replies open turns kept for
    them. p2 gets their own conversation's turn, not the older one kept for p1; p3 gets nothing while p1 is
    present; once p1's submission is returned on Prolific, p3 gets p1's conversation: it goes on without them."""
    batch_id = launch(settings, providers, conversations=2, keep=Keep(KeepRule.session))
    studies = {role: lambda role=role: study_of(settings, batch_id, role) for role in ("student", "teacher")}

    def writes(participant: str, role: str, answers: dict) -> int:
        """The participant takes the turn our page gives them, writes it and finishes on Prolific; the next
        turn opens (the Celery task's work). Returns the conversation."""
        study_id = studies[role]()
        fake_prolific.studies[study_id].fields["total_available_places"] += 1  # places follow in a moment
        submission_id, link, page = arrives(client, fake_prolific, study_id, participant)
        assert page.status_code == 200, page.text
        assert client.post(link, data={**answers, "turkflow_form": form_token(page.text)}).status_code == 303
        fake_prolific.complete(submission_id, providers.get("prolific").completion_code(batch_id, role))
        held = assignment(settings, submission_id)
        with session_scope(settings.database_url) as s:
            turn = s.get(Turn, s.get(Hit, held.hit_id).turn_id)
        pipeline.open_after(settings, providers, turn.id)
        return turn.conversation_id

    first, second = writes("p1", "student", STUDENT_ANSWERS), writes("p2", "student", STUDENT_ANSWERS)
    assert first != second
    assert {writes("p-teacher", "teacher", TEACHER_ANSWERS) for _ in range(2)} == {first, second}
    assert writes("p2", "student", STUDENT_ANSWERS) == second  # their own, though the other one is older

    student_study = studies["student"]()
    fake_prolific.studies[student_study].fields["total_available_places"] += 1
    nothing, _, page = arrives(client, fake_prolific, student_study, "p3")
    assert page.status_code == 409 and "return this submission" in page.text  # kept for p1, who is here
    fake_prolific.return_submission(nothing)

    fake_prolific.studies[student_study].fields["total_available_places"] += 1
    left, _, page = arrives(client, fake_prolific, student_study, "p1")
    assert page.status_code == 200
    fake_prolific.return_submission(left)  # p1 leaves in the middle of their turn
    assert sync.poll(settings, providers.get("prolific")).released == [assignment(settings, left).id]
    assert writes("p3", "student", STUDENT_ANSWERS) == first  # the conversation goes on with p3
    with session_scope(settings.database_url) as s:
        writers = s.exec(select(Turn.index, Worker.external_id).join(Worker, Worker.id == Turn.worker_id)
                         .where(Turn.conversation_id == first, Turn.role == "student")
                         .order_by(Turn.index)).all()
    assert writers == [(0, "prolific:p1"), (2, "prolific:p3")]


# ---- submissions given back ----------------------------------------------------------------------------


def test_a_returned_submission_gives_its_turn_to_the_next_participant_through_the_poller(
        settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers)
    study_id = study_of(settings, batch_id, "student")
    first, _, _ = arrives(client, fake_prolific, study_id, "p1")
    fake_prolific.return_submission(first)
    found = sync.poll(settings, providers.get("prolific"))
    assert found.released == [assignment(settings, first).id]
    assert assignment(settings, first).status == AssignmentStatus.abandoned
    assert fake_prolific.places_free(study_id) == 1 and fake_prolific.studies[study_id].status == "ACTIVE"
    second, _, page = arrives(client, fake_prolific, study_id, "p2")
    assert page.status_code == 200
    assert assignment(settings, second).hit_id == assignment(settings, first).hit_id
    assert not sync.poll(settings, providers.get("prolific")).released  # seen again: nothing changes


def test_a_timed_out_submission_gives_its_turn_back_through_the_webhook_once(
        settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers)
    study_id = study_of(settings, batch_id, "student")
    first, _, _ = arrives(client, fake_prolific, study_id, "p1")
    fake_prolific.time_out(first)
    event, sent_at = fake_prolific.submission_event(first), int(time.time())
    assert post_webhook(client, fake_prolific, event, timestamp=sent_at).status_code == 204
    assert assignment(settings, first).status == AssignmentStatus.abandoned
    second, _, _ = arrives(client, fake_prolific, study_id, "p2")
    events_before = event_count(settings)
    again = post_webhook(client, fake_prolific, event, timestamp=sent_at)  # Prolific delivers it again
    assert again.status_code == 200 and "delivered already" in again.get_json()["ignored"]
    assert assignment(settings, second).status == AssignmentStatus.accepted
    assert event_count(settings) == events_before


def test_a_webhook_with_a_bad_signature_or_an_old_timestamp_changes_nothing(
        settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers)
    first, _, _ = arrives(client, fake_prolific, study_of(settings, batch_id, "student"), "p1")
    fake_prolific.return_submission(first)
    event = fake_prolific.submission_event(first)
    events_before = event_count(settings)
    forged = ({"secret": "not-our-secret"}, {"signature": "AAAA"}, {"timestamp": int(time.time()) - 3600})
    for changed in forged:
        assert post_webhook(client, fake_prolific, event, **changed).status_code == 403, changed
    assert client.post("/prolific/webhook", json=event).status_code == 403  # unsigned
    assert assignment(settings, first).status == AssignmentStatus.accepted
    assert event_count(settings) == events_before


def post_webhook(client, fake: FakeProlific, event: dict, **changed):  # noqa: ANN001, ANN201
    """``FakeProlific.send_webhook``'s signed request, delivered to the app under test."""
    import base64
    import hashlib
    import hmac
    import json

    body = json.dumps(event).encode()
    sent_at = str(changed.get("timestamp", int(time.time())))
    key = changed.get("secret", fake.secrets[fake.workspace_id]["value"])
    signature = changed.get("signature") or base64.b64encode(
        hmac.new(key.encode(), sent_at.encode() + body, hashlib.sha256).digest()).decode()
    headers = {api.TIMESTAMP_HEADER: sent_at, api.SIGNATURE_HEADER: signature}
    if "event_id" in changed:
        headers[api.EVENT_ID_HEADER] = changed["event_id"]
    return client.post("/prolific/webhook", data=body, content_type="application/json", headers=headers)


def event_count(settings) -> int:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        return len(s.exec(select(Event.id)).all())


# ---- blocks --------------------------------------------------------------------------------------------


def test_a_temporarily_blocked_participant_is_kept_out_until_unblocked(
        settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers, conversations=3)
    study_id = study_of(settings, batch_id, "student")
    first, link, page = arrives(client, fake_prolific, study_id, "p1")
    client.post(link, data={**STUDENT_ANSWERS, "turkflow_form": form_token(page.text)})
    fake_prolific.complete(first, providers.get("prolific").completion_code(batch_id, "student"))
    in_progress = fake_prolific.start(study_id, "p1")  # started again before the block
    provider = providers.get("prolific")
    with session_scope(settings.database_url) as s:  # what the monitor's block does (pipeline.judge)
        worker = s.exec(select(Worker).where(Worker.external_id == "prolific:p1")).one()
        monitor.block_worker(s, worker, permanent=False, actor="system", reason="low ratings")
    assert pipeline.carry_out_status(settings, providers, worker.id)  # after the decision commits
    assert "p1" in fake_prolific.groups[provider.blocked_group()].members
    with pytest.raises(Refused, match="blocks"):
        fake_prolific.start(study_id, "p1")
    assert client.get(study_link(fake_prolific, study_id, "p1", in_progress)).status_code == 403
    assert len(stored(settings)[0]) == 1

    with session_scope(settings.database_url) as s:  # the reviewer's unblock on the dashboard
        worker = s.exec(select(Worker).where(Worker.external_id == "prolific:p1")).one()
        assert review.unblock(s, worker, actor="requester:lab")
        assert worker.status == WorkerStatus.active
    assert pipeline.carry_out_status(settings, providers, worker.id)
    assert "p1" not in fake_prolific.groups[provider.blocked_group()].members
    assert client.get(study_link(fake_prolific, study_id, "p1", in_progress)).status_code == 200


# ---- bonuses -------------------------------------------------------------------------------------------


def bonus_on_a_stored_turn(settings, providers, client,  # noqa: ANN001
                           fake: FakeProlific) -> tuple[int, str]:
    """A turn written through the page, finished on Prolific, and a bonus the monitor recorded for it."""
    batch_id = launch(settings, providers)
    submission_id, link, page = arrives(client, fake, study_of(settings, batch_id, "student"), "p1")
    client.post(link, data={**STUDENT_ANSWERS, "turkflow_form": form_token(page.text)})
    fake.complete(submission_id, providers.get("prolific").completion_code(batch_id, "student"))
    with session_scope(settings.database_url) as s:
        held = s.exec(select(Assignment).where(Assignment.external_id == submission_id)).one()
        bonus = Bonus(turn_id=s.get(Hit, held.hit_id).turn_id, worker_id=held.worker_id,
                      assignment_id=held.id, amount_cents=8, request_token="bonus-1")
        s.add(bonus)
        s.flush()
        return bonus.id, submission_id


def pay_calls(fake: FakeProlific) -> int:
    return sum(1 for _, path in fake.requests if path.endswith("/pay/"))


def test_a_bonus_is_paid_once_when_the_task_dies_between_set_up_and_pay_and_runs_again(
        settings, providers, client, fake_prolific, monkeypatch):
    bonus_id, submission_id = bonus_on_a_stored_turn(settings, providers, client, fake_prolific)
    from turkflow.hits.prolific import provider as prolific_provider

    with monkeypatch.context() as dying:
        def die(*args):  # noqa: ANN002, ANN202
            raise SystemExit("worker killed")

        dying.setattr(prolific_provider, "_claim", die)
        with pytest.raises(SystemExit):
            pipeline.pay_bonus(settings, providers, bonus_id)
    assert len(fake_prolific.bulk_bonuses) == 1 and pay_calls(fake_prolific) == 0
    assert pipeline.pay_bonus(settings, providers, bonus_id)  # the task runs again
    assert pipeline.pay_bonus(settings, providers, bonus_id)  # and again: paid already
    assert fake_prolific.paid(submission_id) == [8] and pay_calls(fake_prolific) == 1
    with session_scope(settings.database_url) as s:
        assert s.get(Bonus, bonus_id).status == BonusStatus.paid


def test_a_bonus_whose_worker_died_after_the_pay_call_is_settled_by_the_poller_never_paid_again(
        settings, providers, client, fake_prolific, monkeypatch):
    fake_prolific.pay_later = True  # Prolific pays minutes after accepting the call
    bonus_id, submission_id = bonus_on_a_stored_turn(settings, providers, client, fake_prolific)
    with monkeypatch.context() as dying:
        pay = api.pay_bonus_payments

        def pay_then_die(*args):  # noqa: ANN002, ANN202
            pay(*args)
            raise SystemExit("worker killed before recording the payment")

        dying.setattr(api, "pay_bonus_payments", pay_then_die)
        with pytest.raises(SystemExit):
            pipeline.pay_bonus(settings, providers, bonus_id)
    with session_scope(settings.database_url) as s:
        claimed = s.get(Bonus, bonus_id)
        assert claimed.pay_claimed_at is not None and claimed.external_id in fake_prolific.bulk_bonuses
        assert monitor.unpaid_bonuses(s, claimed.created_at.replace(year=2100)) == []  # the poller settles it
    found = sync.poll(settings, providers.get("prolific"))
    assert found.claimed_bonuses == [bonus_id]
    with pytest.raises(BonusOutcomeUnknown, match="shows no payment"):
        pipeline.pay_bonus(settings, providers, bonus_id)
    fake_prolific.settle_payments()
    assert pipeline.pay_bonus(settings, providers, bonus_id)
    assert fake_prolific.paid(submission_id) == [8] and pay_calls(fake_prolific) == 1
    assert sync.poll(settings, providers.get("prolific")).claimed_bonuses == []


# ---- approvals and the study's places ------------------------------------------------------------------


def test_stored_turns_are_approved_in_bulk_after_the_review_delay_and_never_rejected(
        settings, providers, client, fake_prolific):
    settings.prolific_approve_after_seconds = 0
    batch_id = launch(settings, providers, conversations=2)
    study_id = study_of(settings, batch_id, "student")
    code = providers.get("prolific").completion_code(batch_id, "student")
    finished, link, page = arrives(client, fake_prolific, study_id, "p1")
    client.post(link, data={**STUDENT_ANSWERS, "turkflow_form": form_token(page.text)})
    fake_prolific.complete(finished, code)
    not_back, link, page = arrives(client, fake_prolific, study_id, "p2")
    client.post(link, data={**STUDENT_ANSWERS, "turkflow_form": form_token(page.text)})  # not back yet
    provider = providers.get("prolific")
    # only what Prolific shows awaiting review is asked for: one still in progress there would be refused
    assert sync.poll(settings, provider).approvals_asked == [assignment(settings, finished).id]
    assert sync.poll(settings, provider).settled == [assignment(settings, finished).id]
    assert assignment(settings, finished).status == AssignmentStatus.approved
    assert assignment(settings, not_back).status == AssignmentStatus.submitted
    assert fake_prolific.submissions[not_back].status == "ACTIVE"
    assert not [path for _, path in fake_prolific.requests if path.startswith("/api/v1/submissions/")
                and path.endswith("/transition/")]  # nothing rejected (nor approved one by one)


def test_a_study_keeps_a_free_place_while_its_batch_runs_and_stops_when_it_ends(
        settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers)
    study_id = study_of(settings, batch_id, "student")
    _, link, page = arrives(client, fake_prolific, study_id, "p1")
    assert fake_prolific.places_free(study_id) == 0
    provider = providers.get("prolific")
    sync.poll(settings, provider)  # the only turn is held: a spare place, paused until a turn waits
    assert fake_prolific.places_free(study_id) == 1 and fake_prolific.studies[study_id].status == "PAUSED"
    with session_scope(settings.database_url) as s:
        for hit in lifecycle.set_batch_status(s, s.get(Batch, batch_id), BatchStatus.cancelled, "requester"):
            provider.expire(s, hit)
    assert fake_prolific.studies[study_id].status == "COMPLETED"
    with session_scope(settings.database_url) as s:
        assert s.exec(select(ProlificStudy)).one().ended_at is not None
    requests_before = len(fake_prolific.requests)
    sync.poll(settings, provider)
    assert len(fake_prolific.requests) == requests_before  # an ended study is left alone


def test_a_participant_holds_one_role_for_the_whole_collection(settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers)
    submission_id, link, page = arrives(client, fake_prolific, study_of(settings, batch_id, "student"), "p1")
    client.post(link, data={**STUDENT_ANSWERS, "turkflow_form": form_token(page.text)})
    fake_prolific.complete(submission_id, providers.get("prolific").completion_code(batch_id, "student"))
    with session_scope(settings.database_url) as s:
        turn_id = s.exec(select(Turn.id).where(Turn.status == TurnStatus.submitted)).one()
    pipeline.open_after(settings, providers, turn_id)  # what the Celery task does: the teacher's turn
    teacher_study = study_of(settings, batch_id, "teacher")
    refused, _, as_teacher = arrives(client, fake_prolific, teacher_study, "p1")  # Prolific not told yet
    assert as_teacher.status_code == 403 and "registered as a student" in as_teacher.text
    assert len(stored(settings)[0]) == 1
    with session_scope(settings.database_url) as s:  # what the task after taking a turn does
        providers.get("prolific").join_role(s.exec(select(Worker).where(Worker.role == "student")).one())
    fake_prolific.return_submission(refused)  # as the page asked
    with pytest.raises(Refused, match="blocks"):  # now Prolific keeps them out of the teacher study
        fake_prolific.start(teacher_study, "p1")


def test_the_poller_runs_on_celery_beat(settings):
    from turkflow.workers.app import celery_config

    poll = celery_config(settings)["beat_schedule"]["poll-prolific"]
    assert poll["task"] == "workers.prolific_tasks.poll_prolific"
    assert poll["schedule"] == settings.prolific_poll_seconds


def test_subscribing_confirms_through_the_api_and_a_post_to_our_url_confirms_nothing(
        settings, providers, client, fake_prolific):
    provider = providers.get("prolific")
    secret, subscription = provider.subscribe()
    assert secret == settings.prolific_webhook_secret  # the workspace's secret is kept, not replaced
    assert subscription["target_url"] == "https://turkflow.example.org/prolific/webhook"
    assert fake_prolific.subscriptions[subscription["id"]]["is_enabled"]  # confirmed with its X-Hook-Secret
    assert provider.subscribe()[1]["id"] == subscription["id"]  # running it again subscribes nothing more
    asked = len(fake_prolific.requests)
    real = fake_prolific.hook_secrets[subscription["id"]]
    for hook_secret in ("made-up", real):  # unauthenticated: refused, and Prolific is never called for it
        assert client.post("/prolific/webhook", headers={api.HOOK_SECRET_HEADER: hook_secret}).status_code == 403
    assert len(fake_prolific.requests) == asked


def test_a_stored_submission_never_gives_away_another_studys_completion_code(
        settings, providers, client, fake_prolific):
    first_batch, other_batch = launch(settings, providers), launch(settings, providers)
    first_study = study_of(settings, first_batch, "student")
    submission_id, link, page = arrives(client, fake_prolific, first_study, "p1")
    client.post(link, data={**STUDENT_ANSWERS, "turkflow_form": form_token(page.text)})
    elsewhere = study_link(fake_prolific, study_of(settings, other_batch, "student"), "p1", submission_id)
    refused = client.get(elsewhere)
    assert refused.status_code == 403 and "another study" in refused.text


@pytest.mark.parametrize("prolific_down", [False, True], ids=["prolific-up", "prolific-down"])
def test_the_monitor_blocks_a_low_rated_participant_into_the_block_list_group(
        settings, providers, client, fake_prolific, monkeypatch, prolific_down):
    """The block is decided and committed first, then Prolific is told; if Prolific is down then, the block
    holds on our pages and the reconciler tells Prolific once it answers."""
    batch_id = launch(settings, providers, conversations=5)
    provider = providers.get("prolific")

    def writes(role: str, who: str, answers: dict) -> int:
        submission_id, link, page = arrives(client, fake_prolific, study_of(settings, batch_id, role), who)
        client.post(link, data={**answers, "turkflow_form": form_token(page.text)})
        fake_prolific.complete(submission_id, provider.completion_code(batch_id, role))
        with session_scope(settings.database_url) as s:
            return s.get(Hit, assignment(settings, submission_id).hit_id).turn_id

    openings = [writes("student", "p1", STUDENT_ANSWERS) for _ in range(5)]
    for turn_id in openings:
        pipeline.open_after(settings, providers, turn_id)  # the teacher turns (the Celery task's first step)
    poor = {**TEACHER_ANSWERS, "relevant": "no", "useful": "no"}
    rated = [writes("teacher", "p2", poor) for _ in openings]
    group = provider.blocked_group()
    if prolific_down:
        def unavailable(request, group_id):  # noqa: ANN001, ANN202
            raise ApiError(503, "Service temporarily unavailable.")

        monkeypatch.setattr(fake_prolific, "_add_members", unavailable)
    blocked = [pipeline.review_submission(settings, providers, turn).blocked_worker_id for turn in rated]
    with session_scope(settings.database_url) as s:
        p1 = s.exec(select(Worker).where(Worker.external_id == "prolific:p1")).one()
    assert blocked[-1] == p1.id and p1.status == WorkerStatus.temporarily_blocked
    if prolific_down:
        assert not fake_prolific.groups[group].members
        assert p1.platform_status == WorkerStatus.active
        monkeypatch.undo()
        assert pipeline.reconcile(settings, providers).platform_statuses == [p1.id]
    assert list(fake_prolific.groups[group].members) == ["p1"]


def test_the_beat_task_gives_a_returned_turn_back_through_the_real_celery_worker(
        settings, providers, client, fake_prolific, celery_worker):
    batch_id = launch(settings, providers)
    first, _, _ = arrives(client, fake_prolific, study_of(settings, batch_id, "student"), "p1")
    fake_prolific.return_submission(first)
    prolific_tasks.poll_prolific.delay()
    assert wait_until(lambda: assignment(settings, first).status == AssignmentStatus.abandoned)


def test_a_participant_whose_turn_went_back_to_the_pool_is_asked_to_return_the_submission(
        settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers)
    submission_id, link, _ = arrives(client, fake_prolific, study_of(settings, batch_id, "student"), "p1")
    with session_scope(settings.database_url) as s:  # the lease ran out (the reconciler's sweep)
        held = s.get(Hit, assignment(settings, submission_id).hit_id)
        held.lease_expires_at = utcnow() - timedelta(seconds=1)
    with session_scope(settings.database_url) as s:
        lifecycle.release_expired_leases(s)
    page = client.get(link)
    assert page.status_code == 409 and "return this submission" in page.text


def test_two_participants_arriving_at_once_never_get_the_same_turn(settings, providers, app, fake_prolific):
    from concurrent.futures import ThreadPoolExecutor

    batch_id = launch(settings, providers)
    study_id = study_of(settings, batch_id, "student")
    fake_prolific.studies[study_id].fields["total_available_places"] += 3  # places ran ahead
    links = [study_link(fake_prolific, study_id, who, fake_prolific.start(study_id, who))
             for who in ("p1", "p2", "p3", "p4")]
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = sorted(pool.map(lambda link: app.test_client().get(link).status_code, links))
    assert answers == [200, 409, 409, 409]
    assert len(stored(settings)[0]) == 1
