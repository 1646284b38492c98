"""Prolific places that last a session (``turkflow.hits.prolific.places``): a participant writes turn after turn
in one submission, waits on a page that asks for the next, and is paid once, on every path, against the fake
Prolific over real HTTP (every call checked against publicapi.yaml)."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from sqlmodel import select

from turkflow import pipeline
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.hits.keep import Keep
from turkflow.hits.prolific import api, sync
from turkflow.hits.prolific.terms import StudyTerms
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Bonus,
    Conversation,
    Hit,
    KeepRule,
    PlaceStatus,
    ProlificPlace,
    Task,
    Turn,
    Worker,
    utcnow,
)
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path

from tests.conftest import wait_until
from tests.test_accessibility import serious_violations
from tests.fake_prolific import FakeProlific
from tests.test_pipeline import STUDENT_ANSWERS, TEACHER_ANSWERS
from tests.test_prolific_web import VOUCHED, form_token, post_webhook, prolific_settings, study_link, study_of

pytest_plugins = ["tests.fake_prolific"]

SESSION_REWARD = 400  # cents: GBP 6 an hour on 30 minutes is 300


@pytest.fixture
def settings(tmp_path: Path, database_url: str, redis_url: str, fake_prolific: FakeProlific) -> Settings:
    return prolific_settings(tmp_path, database_url, redis_url, fake_prolific, VOUCHED)


def launch(settings, providers, conversations=2, minutes=30) -> int:  # noqa: ANN001
    """A batch that keeps people for their session, its places lasting ``minutes``, as `batch launch` stores
    its terms; its first turns published."""
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), conversations, name="sessions",
                                             provider="prolific", max_turns=4, keep=Keep(KeepRule.session),
                                             reward_cents=SESSION_REWARD)
        batch.platform_terms = replace(StudyTerms.of_settings(settings), session_minutes=minutes).as_json()
        s.add(batch)
        batch_id, hit_ids = batch.id, [h.id for h in hits]
    for hit_id in hit_ids:
        pipeline.publish(settings, providers, hit_id, "prolific")
    return batch_id


class Participant:
    """A participant in a session place, through the pages as a JSON client (the simulator's way) or a
    browser's forms."""

    def __init__(self, client, fake: FakeProlific, settings, providers, study_id: str, who: str):  # noqa: ANN001
        fake.studies[study_id].fields["total_available_places"] += 1  # places follow in a moment
        self.client, self.fake, self.settings, self.providers = client, fake, settings, providers
        self.submission_id = fake.start(study_id, who)
        self.link = study_link(fake, study_id, who, self.submission_id)

    def look(self):  # noqa: ANN201
        return self.client.get(self.link, headers={"Accept": "application/json"})

    def writes(self, answers: dict) -> int:
        """Takes the turn the page gives, writes it (the next turn opens: the Celery task's work); returns the
        conversation."""
        page = self.client.get(self.link)
        assert page.status_code == 200 and 'id="submit-turn"' in page.text, page.text
        sent = self.client.post(self.link, data={**answers, "turkflow_form": form_token(page.text)})
        assert sent.status_code == 303 and sent.location.endswith(self.link), sent.location  # on to the next
        with session_scope(self.settings.database_url) as s:
            held = s.exec(select(Assignment).join(ProlificPlace, ProlificPlace.id == Assignment.place_id)
                          .where(ProlificPlace.submission_id == self.submission_id)
                          .order_by(Assignment.id.desc())).first()
            turn = s.get(Turn, s.get(Hit, held.hit_id).turn_id)
        pipeline.open_after(self.settings, self.providers, turn.id)
        return turn.conversation_id


def place(settings, submission_id: str) -> ProlificPlace:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        return s.exec(select(ProlificPlace).where(ProlificPlace.submission_id == submission_id)).one()


def writers(settings, conversation_id: int) -> list[tuple[int, str, str]]:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        return list(s.exec(select(Turn.index, Turn.role, Worker.external_id).join(Worker, Worker.id == Turn.worker_id)
                           .where(Turn.conversation_id == conversation_id).order_by(Turn.index)))


def code_url(providers, batch_id: int, role: str) -> str:  # noqa: ANN001
    return api.completion_url(providers.get("prolific").completion_code(batch_id, role))


def test_a_participant_writes_turn_after_turn_in_one_session_their_own_conversation_first(
        settings, providers, client, fake_prolific):
    """p1 writes both conversations' student turns in one submission, waits while none is left for them, gets
    their own conversation's next turn first once the teacher answered, then says they are done: the code, and
    the place is approved once, whatever the poller sees again."""
    settings.prolific_approve_after_seconds = 0
    batch_id = launch(settings, providers)
    student = Participant(client, fake_prolific, settings, providers, study_of(settings, batch_id, "student"), "p1")
    first, second = student.writes(STUDENT_ANSWERS), student.writes(STUDENT_ANSWERS)
    teacher = Participant(client, fake_prolific, settings, providers, study_of(settings, batch_id, "teacher"),
                          "p-teacher")
    assert first != second
    waiting = student.look().get_json()
    assert waiting["waiting"] is True and 0 < waiting["session_seconds_left"] <= 30 * 60
    assert waiting["turns_written"] == 2
    assert {teacher.writes(TEACHER_ANSWERS), teacher.writes(TEACHER_ANSWERS)} == {first, second}
    assert student.writes(STUDENT_ANSWERS) in (first, second)  # one of theirs, answered: offered to them first
    assert all([w for _, role, w in writers(settings, c) if role == "student"] == ["prolific:p1"] * len(
        [1 for _, role, _ in writers(settings, c) if role == "student"]) for c in (first, second))

    for _ in range(2):  # a double click ends it once
        done = client.post(student.link.replace("/prolific/turn", "/prolific/place/done"),
                           data={"turkflow_form": waiting["turkflow_form"]})
        assert done.status_code == 303
    ended = student.look().get_json()
    assert ended["ended"] is True and ended["reason"] == "done" and ended["turns_written"] == 3
    assert ended["completion_url"] == code_url(providers, batch_id, "student")
    fake_prolific.complete(student.submission_id, ended["completion_code"])

    provider = providers.get("prolific")
    assert sync.poll(settings, provider).place_approvals_asked == [place(settings, student.submission_id).id]
    assert sync.poll(settings, provider).places_approved == [place(settings, student.submission_id).id]
    assert not sync.poll(settings, provider).places_approved  # seen again: nothing changes
    assert fake_prolific.submissions[student.submission_id].status == "APPROVED"
    assert place(settings, student.submission_id).status == PlaceStatus.approved
    with session_scope(settings.database_url) as s:
        statuses = s.exec(select(Assignment.status).where(
            Assignment.place_id == place(settings, student.submission_id).id)).all()
        spent = __import__("turkflow.hits.money", fromlist=["spend"]).spend(s, batch_id=batch_id)
    assert statuses == [AssignmentStatus.approved] * 3
    assert spent.rewards_cents == SESSION_REWARD  # one session's reward (the teacher's place is still open)


@pytest.mark.both_backends
def test_a_returned_session_ends_at_once_its_held_turn_goes_on_with_another_and_its_turns_are_paid_once(
        settings, providers, client, fake_prolific):
    """p1 wrote a turn and holds the next when they return the submission on Prolific: the webhook (twice) and
    the poller end the place once; the held turn goes to p2 at once; Prolific will not approve a returned
    submission, so the session's reward goes as one bonus on it, paid once."""
    batch_id = launch(settings, providers)
    study_id = study_of(settings, batch_id, "student")
    leaver = Participant(client, fake_prolific, settings, providers, study_id, "p1")
    leaver.writes(STUDENT_ANSWERS)
    assert client.get(leaver.link).status_code == 200  # holds the second conversation's turn
    fake_prolific.return_submission(leaver.submission_id)
    event = fake_prolific.submission_event(leaver.submission_id)
    assert post_webhook(client, fake_prolific, event, timestamp=int(time.time())).status_code == 204
    assert post_webhook(client, fake_prolific, {**event, "id": "again"}, timestamp=int(time.time())).status_code \
        in (200, 204)
    left = place(settings, leaver.submission_id)
    assert left.status == PlaceStatus.left and left.end_reason == "returned on Prolific"
    assert leaver.look().status_code == 409  # the page says the session ended on Prolific

    other = Participant(client, fake_prolific, settings, providers, study_id, "p2")
    conversation = other.writes(STUDENT_ANSWERS)  # the turn p1 held, at once
    assert [w for _, _, w in writers(settings, conversation)] == ["prolific:p2"]

    provider = providers.get("prolific")
    found = sync.poll(settings, provider)
    assert not found.places_left  # the webhook ended it already
    assert len(found.reward_bonuses) == 1
    for bonus_id in found.reward_bonuses + sync.poll(settings, provider).reward_bonuses:
        pipeline.pay_bonus(settings, providers, bonus_id)
    assert fake_prolific.paid(leaver.submission_id) == [SESSION_REWARD]
    assert place(settings, leaver.submission_id).status == PlaceStatus.compensated
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Assignment.status).where(Assignment.place_id == left.id).order_by(Assignment.id)).all() == [
            AssignmentStatus.compensated, AssignmentStatus.abandoned]  # the written turn, paid; the held one, back
    assert not sync.poll(settings, provider).reward_bonuses


@pytest.mark.both_backends
def test_a_timed_out_session_with_turns_is_approved_late_once_and_one_without_turns_owes_nothing(
        settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers)
    study_id = study_of(settings, batch_id, "student")
    wrote = Participant(client, fake_prolific, settings, providers, study_id, "p1")
    wrote.writes(STUDENT_ANSWERS)
    idle = Participant(client, fake_prolific, settings, providers, study_id, "p2")
    assert idle.look().status_code == 200
    for submission_id in (wrote.submission_id, idle.submission_id):
        fake_prolific.time_out(submission_id)
    provider = providers.get("prolific")
    found = sync.poll(settings, provider)
    assert sorted(found.places_left) == sorted(place(settings, s).id for s in (wrote.submission_id,
                                                                              idle.submission_id))
    assert found.places_approved == [place(settings, wrote.submission_id).id] and not found.reward_bonuses
    assert fake_prolific.submissions[wrote.submission_id].status == "APPROVED"
    assert fake_prolific.submissions[idle.submission_id].status == "TIMED-OUT"  # gave nothing, paid nothing
    assert not sync.poll(settings, provider)  # nothing more, ever
    with session_scope(settings.database_url) as s:
        spent = __import__("turkflow.hits.money", fromlist=["spend"]).spend(s, batch_id=batch_id)
    assert spent.rewards_cents == SESSION_REWARD and spent.pending_cents == 0


@pytest.mark.both_backends
def test_a_session_in_which_no_turn_was_offered_is_paid_when_its_time_is_up(
        settings, providers, client, fake_prolific):
    """Two participants for one waiting turn: p2 finds none and waits; their time runs out (less than a turn's
    minutes left): the code, and the place is approved like any other (they gave their time)."""
    settings.prolific_approve_after_seconds = 0
    batch_id = launch(settings, providers, conversations=1)
    study_id = study_of(settings, batch_id, "student")
    first = Participant(client, fake_prolific, settings, providers, study_id, "p1")
    assert first.look().status_code == 200
    waits = Participant(client, fake_prolific, settings, providers, study_id, "p2")
    assert waits.look().get_json()["waiting"] is True
    with session_scope(settings.database_url) as s:
        row = s.exec(select(ProlificPlace).where(ProlificPlace.submission_id == waits.submission_id)).one()
        row.started_at, row.ends_at = utcnow() - timedelta(minutes=28.5), utcnow() + timedelta(seconds=90)
        s.add(row)  # 28.5 of its 30 minutes gone: less than a turn's 2 minutes left, no new turn starts
    ended = waits.look().get_json()
    assert ended["ended"] is True and ended["reason"] == "time up" and ended["turns_written"] == 0
    fake_prolific.complete(waits.submission_id, ended["completion_code"])
    provider = providers.get("prolific")
    sync.poll(settings, provider)
    assert sync.poll(settings, provider).places_approved == [place(settings, waits.submission_id).id]
    assert fake_prolific.submissions[waits.submission_id].status == "APPROVED"


@pytest.mark.both_backends
def test_a_session_served_out_whose_code_was_never_followed_is_still_paid_once(
        settings, providers, client, fake_prolific):
    """p2 waits out their session on the waiting screen (no turn for them), is shown the code, and closes the tab
    instead of following it: Prolific times the submission out. They gave the session its time, so it is
    approved late, once, as a place with turns would be (it was left unpaid)."""
    batch_id = launch(settings, providers, conversations=1)
    study_id = study_of(settings, batch_id, "student")
    assert Participant(client, fake_prolific, settings, providers, study_id, "p1").look().status_code == 200
    waits = Participant(client, fake_prolific, settings, providers, study_id, "p2")
    assert waits.look().get_json()["waiting"] is True
    with session_scope(settings.database_url) as s:
        row = s.exec(select(ProlificPlace).where(ProlificPlace.submission_id == waits.submission_id)).one()
        row.started_at, row.ends_at = utcnow() - timedelta(minutes=28.5), utcnow() + timedelta(seconds=90)
        s.add(row)
    assert waits.look().get_json()["reason"] == "time up"
    fake_prolific.time_out(waits.submission_id)
    provider = providers.get("prolific")
    assert sync.poll(settings, provider).places_approved == [place(settings, waits.submission_id).id]
    assert fake_prolific.submissions[waits.submission_id].status == "APPROVED"
    assert not sync.poll(settings, provider).places_approved  # once


def test_the_study_publishes_places_only_for_the_turns_beyond_its_open_sessions(
        settings, providers, client, fake_prolific):
    """Three conversations wait for a student: three places; a participant in a session takes them one after
    another, so the study keeps a free place only for the turns beyond theirs and pauses once they cover all."""
    batch_id = launch(settings, providers, conversations=3)
    study_id = study_of(settings, batch_id, "student")
    assert fake_prolific.places_free(study_id) == 3
    student = Participant(client, fake_prolific, settings, providers, study_id, "p1")
    student.writes(STUDENT_ANSWERS)
    provider = providers.get("prolific")
    with session_scope(settings.database_url) as s:
        provider.keep_in_step(s, s.get(Batch, batch_id), "student")
    assert fake_prolific.studies[study_id].status == "ACTIVE"  # two waiting, one session: a place for the other
    student.writes(STUDENT_ANSWERS)
    with session_scope(settings.database_url) as s:
        provider.keep_in_step(s, s.get(Batch, batch_id), "student")
    assert fake_prolific.studies[study_id].status == "PAUSED"  # the one waiting is p1's to take


def test_a_newcomer_gets_a_place_while_the_session_in_the_study_writes_a_turn(
        settings, providers, client, fake_prolific):
    """Two conversations wait for a student; p1 opens a session and takes one of them: p1 is busy writing it, so
    the other turn needs a newcomer and the study keeps a place for one (it paused, keeping p2 out while the
    turn waited for p1 to finish). Once p1 is back with nothing in hand, the turn is theirs to take again."""
    batch_id = launch(settings, providers, conversations=2)
    study_id = study_of(settings, batch_id, "student")
    provider = providers.get("prolific")
    writer = Participant(client, fake_prolific, settings, providers, study_id, "p1")
    assert 'id="submit-turn"' in client.get(writer.link).text  # p1 holds a turn and writes it
    with session_scope(settings.database_url) as s:
        provider.keep_in_step(s, s.get(Batch, batch_id), "student")
    assert fake_prolific.studies[study_id].status == "ACTIVE" and fake_prolific.places_free(study_id) >= 1
    newcomer = Participant(client, fake_prolific, settings, providers, study_id, "p2")
    second = newcomer.writes(STUDENT_ANSWERS)
    first = writer.writes(STUDENT_ANSWERS)
    assert {first, second} == set(conversations_of(settings, batch_id))
    assert [w for _, _, w in writers(settings, second)] == ["prolific:p2"]


def test_a_session_in_its_last_turns_minutes_keeps_no_newcomer_out(settings, providers, client, fake_prolific):
    """p1, present with nothing in hand, would take the one waiting turn, so the study pauses; once less than a
    turn's minutes of p1's session is left, p1 starts no new turn (the code instead), so the turn needs a
    newcomer and the study opens a place for one (it stayed paused until p1's session ended)."""
    batch_id = launch(settings, providers, conversations=2)
    study_id = study_of(settings, batch_id, "student")
    provider = providers.get("prolific")
    student = Participant(client, fake_prolific, settings, providers, study_id, "p1")
    student.writes(STUDENT_ANSWERS)
    with session_scope(settings.database_url) as s:
        provider.keep_in_step(s, s.get(Batch, batch_id), "student")
    assert fake_prolific.studies[study_id].status == "PAUSED"  # the other conversation's turn is p1's to take
    with session_scope(settings.database_url) as s:
        row = s.exec(select(ProlificPlace).where(ProlificPlace.submission_id == student.submission_id)).one()
        row.started_at, row.ends_at = utcnow() - timedelta(minutes=28.5), utcnow() + timedelta(seconds=90)
        s.add(row)  # 28.5 of its 30 minutes gone: less than a turn's 2 minutes left
    with session_scope(settings.database_url) as s:
        provider.keep_in_step(s, s.get(Batch, batch_id), "student")
    assert fake_prolific.studies[study_id].status == "ACTIVE" and fake_prolific.places_free(study_id) >= 1
    assert student.look().get_json()["reason"] == "time up"  # as the page tells p1
    second = Participant(client, fake_prolific, settings, providers, study_id, "p2").writes(STUDENT_ANSWERS)
    assert [w for _, _, w in writers(settings, second)] == ["prolific:p2"]


def test_a_turn_kept_for_a_present_participant_gets_no_place_and_gets_one_once_they_leave(
        settings, providers, client, fake_prolific):
    """p1 writes a conversation's first turn and the teacher answers: the next student turn is kept for p1, who is
    present in their session, so the study publishes no place for it (a newcomer could not take it). p1 closes
    the waiting screen (its ``pagehide`` beacon): the turn is anyone's, and the study opens a place for it."""
    batch_id = launch(settings, providers, conversations=1)
    study_id = study_of(settings, batch_id, "student")
    provider = providers.get("prolific")
    student = Participant(client, fake_prolific, settings, providers, study_id, "p1")
    student.writes(STUDENT_ANSWERS)
    waiting_token = student.look().get_json()["turkflow_form"]  # the waiting screen's
    Participant(client, fake_prolific, settings, providers, study_of(settings, batch_id, "teacher"),
                "p-teacher").writes(TEACHER_ANSWERS)
    with session_scope(settings.database_url) as s:
        provider.keep_in_step(s, s.get(Batch, batch_id), "student")
    assert fake_prolific.studies[study_id].status == "PAUSED"  # kept for p1, who is here
    left = client.post(student.link.replace("/prolific/turn", "/prolific/place/left"),
                       data={"turkflow_form": waiting_token})
    assert left.status_code == 204
    with session_scope(settings.database_url) as s:
        provider.keep_in_step(s, s.get(Batch, batch_id), "student")
    assert fake_prolific.studies[study_id].status == "ACTIVE" and fake_prolific.places_free(study_id) >= 1
    conversation = Participant(client, fake_prolific, settings, providers, study_id, "p2").writes(STUDENT_ANSWERS)
    assert [w for _, role, w in writers(settings, conversation) if role == "student"] == ["prolific:p1",
                                                                                          "prolific:p2"]


def test_a_sessions_turn_page_says_where_to_end_or_leave_the_session_as_its_waiting_screen_does(
        settings, providers, client, fake_prolific):
    """The turn page of a session place, in JSON and HTML, carries the waiting screen's ways out: its client
    says "I left" from the turn (the ``pagehide`` beacon; present no longer, the turn still theirs to write) and
    "I am done" (the session ends with the code)."""
    batch_id = launch(settings, providers, conversations=1)
    student = Participant(client, fake_prolific, settings, providers, study_of(settings, batch_id, "student"), "p1")
    turn = student.look().get_json()
    assert turn["turn_index"] == 0 and set(turn["place"]) == {"session_seconds_left", "done_url", "left_url",
                                                                "turkflow_form"}
    exits = turn["place"]
    assert 0 < exits["session_seconds_left"] <= 30 * 60 and exits["turkflow_form"] != turn["turkflow_form"]
    page = client.get(student.link).text
    marker = re.search(r'data-leave-url="([^"]+)" data-leave-field="turkflow_form" data-leave-token="([^"]+)"', page)
    assert marker and (marker.group(1).replace("&amp;", "&"), marker.group(2)) == (exits["left_url"],
                                                                                   exits["turkflow_form"])
    assert client.post(exits["left_url"], data={"turkflow_form": turn["turkflow_form"]}).status_code == 403
    assert client.post(exits["left_url"], data={"turkflow_form": exits["turkflow_form"]}).status_code == 204
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Worker.present_until).where(Worker.external_id == "prolific:p1")).one() <= utcnow()
    assert student.look().get_json()["turn_id"] == turn["turn_id"]  # back: the turn they hold, present again
    done = client.post(exits["done_url"], data={"turkflow_form": exits["turkflow_form"]},
                       headers={"Accept": "application/json"})
    assert done.get_json()["ended"] is True and done.get_json()["reason"] == "done"


def conversations_of(settings, batch_id: int) -> list[int]:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        return list(s.exec(select(Conversation.id).where(Conversation.batch_id == batch_id)))


def test_a_session_ends_with_the_code_once_no_work_is_left_in_the_batch(settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers, conversations=1)
    student = Participant(client, fake_prolific, settings, providers, study_of(settings, batch_id, "student"), "p1")
    student.writes(STUDENT_ANSWERS)
    assert student.look().get_json()["waiting"] is True  # the teacher's turn comes first
    with session_scope(settings.database_url) as s:
        lifecycle.set_batch_status(s, s.get(Batch, batch_id), BatchStatus.cancelled, "requester")
    ended = student.look().get_json()
    assert ended["ended"] is True and ended["reason"] == "no work left"
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Bonus)).all() == []


def test_ending_a_session_while_holding_a_turn_gives_the_turn_to_the_next_participant(
        settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers, conversations=1)
    study_id = study_of(settings, batch_id, "student")
    quitter = Participant(client, fake_prolific, settings, providers, study_id, "p1")
    page = client.get(quitter.link).text
    bar_token = re.search(r'id="place-bar".*?name="turkflow_form" value="([^"]+)"', page, re.S).group(1)
    done = client.post(quitter.link.replace("/prolific/turn", "/prolific/place/done"),
                       data={"turkflow_form": bar_token})
    assert done.status_code == 303
    assert client.get(quitter.link).text.count(providers.get("prolific").completion_code(batch_id, "student")) >= 1
    forged = client.post(quitter.link.replace("/prolific/turn", "/prolific/place/done"),
                         data={"turkflow_form": "not-ours"})
    assert forged.status_code == 403
    conversation = Participant(client, fake_prolific, settings, providers, study_id, "p2").writes(STUDENT_ANSWERS)
    assert [w for _, _, w in writers(settings, conversation)] == ["prolific:p2"]
    assert place(settings, quitter.submission_id).end_reason == "done"


# ---- the waiting screen, in headless Chromium -------------------------------------------------------------


@pytest.mark.browser
def test_the_waiting_screen_shows_the_sessions_time_brings_the_next_turn_by_itself_and_says_when_they_leave(
        live_server, chromium, settings, providers, client, fake_prolific):
    """p1 writes their turn in the browser and lands on the waiting screen, which counts down the session;
    when the teacher's answer opens p1's next turn, the screen takes them to it without a reload by hand; on
    the waiting screen again, closing the page (its ``pagehide`` beacon) makes them absent at once, so the turn
    kept for them goes to anyone."""
    batch_id = launch(settings, providers, conversations=1)
    study_id = study_of(settings, batch_id, "student")
    fake_prolific.studies[study_id].fields["total_available_places"] += 1
    submission_id = fake_prolific.start(study_id, "p1")
    page = chromium.new_page()
    page.goto(study_link(fake_prolific, study_id, "p1", submission_id, base=live_server.url))
    page.check("input[name=intent][value=request_items]")
    page.fill("textarea[name=response]", "Hi! What do I need for pancakes?")
    page.click("#submit-turn")
    page.wait_for_selector("#place-waiting")
    problems = [f"the waiting screen: {v}" for v in serious_violations(page)]
    page.wait_for_function("document.getElementById('place-time-left').textContent.startsWith('Time left')")
    assert re.fullmatch(r"Time left in your session: (29:[0-5]\d|30:00)",
                        page.locator("#place-time-left").text_content().strip())
    with session_scope(settings.database_url) as s:
        turn_id = s.exec(select(Turn.id).where(Turn.role == "student")).one()
    pipeline.open_after(settings, providers, turn_id)  # the teacher's turn opens
    teacher = Participant(client, fake_prolific, settings, providers, study_of(settings, batch_id, "teacher"),
                          "p-teacher")
    teacher.writes(TEACHER_ANSWERS)  # p1's next turn opens, kept for them
    page.wait_for_selector("#submit-turn", timeout=60_000)  # the waiting screen followed to it
    assert page.locator("#place-done-now").is_visible()  # a turn page of a session says it may end there
    problems += [f"a session's turn: {v}" for v in serious_violations(page)]
    assert problems == [], "\n".join(problems)

    page.check("input[name=relevant][value=yes]")
    page.check("input[name=useful][value=yes]")
    page.fill("textarea[name=real_life]", "Got the flour out.")
    page.check("input[name=intent][value=request_step]")
    page.fill("textarea[name=response]", "Got them. How do I start?")
    page.click("#submit-turn")
    page.wait_for_selector("#place-waiting")  # the teacher's turn comes next: p1 waits
    with session_scope(settings.database_url) as s:
        before = s.exec(select(Worker.present_until).where(Worker.external_id == "prolific:p1")).one()
    page.close(run_before_unload=True)

    def absent():
        with session_scope(settings.database_url) as s:
            until = s.exec(select(Worker.present_until).where(Worker.external_id == "prolific:p1")).one()
        return until is not None and until < before

    assert wait_until(absent)
    assert place(settings, submission_id).status == PlaceStatus.open  # they may come back to it


@pytest.mark.browser
def test_closing_a_sessions_turn_page_says_they_left_and_the_turn_stays_theirs(
        live_server, chromium, settings, providers, fake_prolific):
    """p1 has a turn of their session open in the browser and closes the tab: its ``pagehide`` beacon makes them
    absent at once (their kept conversations go to others), and the turn they hold stays theirs to come back to."""
    batch_id = launch(settings, providers, conversations=1)
    study_id = study_of(settings, batch_id, "student")
    fake_prolific.studies[study_id].fields["total_available_places"] += 1
    submission_id = fake_prolific.start(study_id, "p1")
    page = chromium.new_page()
    page.goto(study_link(fake_prolific, study_id, "p1", submission_id, base=live_server.url))
    page.wait_for_selector("#submit-turn")
    with session_scope(settings.database_url) as s:
        before = s.exec(select(Worker.present_until).where(Worker.external_id == "prolific:p1")).one()
    page.close(run_before_unload=True)

    def absent():
        with session_scope(settings.database_url) as s:
            until = s.exec(select(Worker.present_until).where(Worker.external_id == "prolific:p1")).one()
        return until is not None and until < before

    assert wait_until(absent)
    with session_scope(settings.database_url) as s:
        held = s.exec(select(Assignment.status).join(ProlificPlace, ProlificPlace.id == Assignment.place_id)
                      .where(ProlificPlace.submission_id == submission_id)).all()
    assert held == [AssignmentStatus.accepted] and place(settings, submission_id).status == PlaceStatus.open
