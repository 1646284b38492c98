"""The Prolific provider against the fake Prolific (every request and response checked against Prolific's
OpenAPI description), on a real migrated database."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlmodel import select

from turkflow import pipeline
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.hits import lifecycle
from turkflow.hits.prolific import api
from turkflow.hits.prolific import sync
from turkflow.hits.prolific.provider import (
    BonusOutcomeUnknown,
    ProlificProvider,
    StudyStep,
    SubmissionInProgress,
    next_step,
    worker_external_id,
)
from turkflow.hits.prolific.studies import study_views
from turkflow.hits.prolific.terms import role_groups
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    Bonus,
    BonusStatus,
    Conversation,
    Event,
    Hit,
    HitStatus,
    ProlificStudy,
    Task,
    Turn,
    Worker,
    utcnow,
)

from tests.fake_prolific import ApiError, FakeProlific, Refused
from tests.test_pipeline import STUDENT_ANSWERS

pytest_plugins = ["tests.fake_prolific"]


@pytest.fixture
def settings(tmp_path: Path, database_url: str, fake_prolific: FakeProlific) -> Settings:
    """A role's turn studies admit only its group (here hand-made groups of the participants these tests
    play, in TURKFLOW_PROLIFIC_ROLE_GROUPS)."""
    played = [f"p{number}" for number in range(1, 10)]
    groups = {role: fake_prolific.make_group(f"Lab's {role}s", played) for role in ("student", "teacher")}
    return Settings(data_dir=tmp_path / "var", database_url=database_url, secret_key="test-secret",
                    worker_hash_key="test-hash-key", public_url="https://turkflow.example.org",
                    prolific_rehearsal_host="turkflow.example.org",
                    prolific_token=fake_prolific.token, prolific_workspace_id=fake_prolific.workspace_id,
                    prolific_base_url=fake_prolific.url,
                    prolific_role_groups=",".join(f"{role}={group}" for role, group in groups.items()))


@pytest.fixture
def provider(settings: Settings) -> ProlificProvider:
    return ProlificProvider(settings)


def launch(settings: Settings, conversations: int) -> tuple[int, list[int]]:
    """A Prolific batch whose first (student) turns are opened, not yet published."""
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), conversations, name="prolific",
                                             provider="prolific")
        return batch.id, [h.id for h in hits]


def publish(settings: Settings, provider: ProlificProvider, hit_id: int) -> str:
    with session_scope(settings.database_url) as s:
        return lifecycle.publish_hit(s, provider, hit_id).external_id


def arrives(settings: Settings, fake: FakeProlific, hit_id: int, participant_id: str) -> str:
    """A participant starts the study on Prolific and lands on our page, which gives them this turn."""
    with session_scope(settings.database_url) as s:
        hit = s.get(Hit, hit_id)
        submission_id = fake.start(hit.external_id, participant_id)
        worker = Worker(external_id=worker_external_id(participant_id), role=hit.role, onboarded=True)
        s.add(worker)
        s.flush()
        s.add(Assignment(hit_id=hit_id, worker_id=worker.id, external_id=submission_id))
    return submission_id


def submits(settings: Settings, fake: FakeProlific, provider: ProlificProvider, hit_id: int,
            participant_id: str) -> int:
    """The participant writes their turn on our page, then goes back to Prolific with the code; returns
    the assignment's id."""
    submission_id = arrives(settings, fake, hit_id, participant_id)
    with session_scope(settings.database_url) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == worker_external_id(participant_id))).one()
        lifecycle.submit_turn(s, submission_id, worker, STUDENT_ANSWERS)
        batch_id = s.get(Conversation, s.get(Turn, s.get(Hit, hit_id).turn_id).conversation_id).batch_id
        assignment_id = s.exec(select(Assignment).where(Assignment.external_id == submission_id)).one().id
    fake.complete(submission_id, provider.completion_code(batch_id, "student"))
    return assignment_id


def reopen(settings: Settings, hit_id: int) -> int:
    """The turn's HIT ends unanswered and the turn gets a new attempt (what the reconciler does)."""
    with session_scope(settings.database_url) as s:
        hit = s.get(Hit, hit_id)
        hit.status = HitStatus.expired
        s.flush()
        again = Hit(turn_id=hit.turn_id, attempt=hit.attempt + 1, role=hit.role, provider="prolific")
        s.add(again)
        s.flush()
        return again.id


def bonus_for(settings: Settings, assignment_id: int, cents: int = 8) -> int:
    with session_scope(settings.database_url) as s:
        assignment = s.get(Assignment, assignment_id)
        turn = lifecycle.turn_for_assignment(s, assignment)
        bonus = Bonus(turn_id=turn.id, worker_id=assignment.worker_id, assignment_id=assignment.id,
                      amount_cents=cents, request_token=f"bonus-turn-{turn.id}")
        s.add(bonus)
        s.flush()
        return bonus.id


def pay(settings: Settings, provider: ProlificProvider, bonus_id: int) -> None:
    """What the pipeline does: pay through the provider, then mark the bonus paid, in one transaction."""
    with session_scope(settings.database_url) as s:
        bonus = s.get(Bonus, bonus_id)
        provider.pay_bonus(s, bonus, s.get(Worker, bonus.worker_id), s.get(Assignment, bonus.assignment_id))
        bonus.status = BonusStatus.paid
        s.add(bonus)


# ---- studies follow the waiting turns ------------------------------------------------------------------


def test_the_first_turn_creates_and_publishes_the_roles_study_with_a_place_per_waiting_turn(
        settings, provider, fake_prolific):
    batch_id, hits = launch(settings, conversations=2)
    study_id = publish(settings, provider, hits[0])
    assert publish(settings, provider, hits[1]) == study_id
    [study] = fake_prolific.studies.values()
    assert study.status == "ACTIVE" and study.fields["total_available_places"] == 2
    with session_scope(settings.database_url) as s:
        assert study.fields["internal_name"] == provider.internal_name(s.exec(select(ProlificStudy)).one())
    assert study.fields["external_study_url"].startswith(
        f"https://turkflow.example.org/prolific/turn?b={batch_id}&r=student&PROLIFIC_PID=")
    assert study.fields["submissions_config"] == {"max_submissions_per_participant": -1}
    assert study.fields["completion_codes"][0]["code"] == provider.completion_code(batch_id, "student")
    assert study.fields["filters"] == [
        {"filter_id": "participant_group_allowlist",
         "selected_values": [role_groups(settings.prolific_role_groups)["student"]]},
        {"filter_id": "participant_group_blocklist",
         "selected_values": [provider.blocked_group(), provider.role_group("teacher")]}]
    with session_scope(settings.database_url) as s:
        assert {s.get(Hit, h).status for h in hits} == {HitStatus.open}


def test_two_workers_creating_a_roles_study_at_once_both_use_the_one_recorded_first(
        settings, provider, fake_prolific, monkeypatch):
    create = fake_prolific._create_study

    def raced(request):  # noqa: ANN001, ANN202 - another worker creates and records its draft first
        if not fake_prolific.studies:
            _, theirs = create(request)
            with session_scope(settings.database_url) as s:
                s.exec(select(ProlificStudy)).one().study_id = theirs["id"]
        return create(request)

    monkeypatch.setattr(fake_prolific, "_create_study", raced)
    _, hits = launch(settings, conversations=1)
    study_id = publish(settings, provider, hits[0])
    earliest, other = fake_prolific.studies.values()
    assert study_id == earliest.id and earliest.status == "ACTIVE" and other.status == "UNPUBLISHED"


def test_a_creation_interrupted_before_its_study_was_recorded_takes_its_draft(
        settings, provider, fake_prolific):
    batch_id, hits = launch(settings, conversations=1)
    with session_scope(settings.database_url) as s:
        row = ProlificStudy(batch_id=batch_id, role="student")  # the worker died after creating the draft
        s.add(row)
        s.flush()
        name = provider.internal_name(row)
    draft = api.create_study(provider.client, api.study_body(
        name="x", description="x", page_url="https://x.example.org", completion_code="C", reward_cents=20,
        places=1, estimated_minutes=2, internal_name=name))
    assert publish(settings, provider, hits[0]) == draft["id"]
    assert len(fake_prolific.studies) == 1 and fake_prolific.studies[draft["id"]].status == "ACTIVE"


def test_a_role_with_a_recorded_study_never_lists_the_workspaces_studies(settings, provider, fake_prolific):
    _, hits = launch(settings, conversations=2)
    publish(settings, provider, hits[0])
    listed = fake_prolific.requests.count(("GET", "/api/v1/studies/"))
    publish(settings, provider, hits[1])
    assert fake_prolific.requests.count(("GET", "/api/v1/studies/")) == listed


def test_places_grow_with_new_turns_but_not_for_turns_already_held(settings, provider, fake_prolific):
    _, hits = launch(settings, conversations=3)
    study_id = publish(settings, provider, hits[0])
    assert fake_prolific.studies[study_id].fields["total_available_places"] == 3
    arrives(settings, fake_prolific, hits[0], "p1")
    publish(settings, provider, hits[1])
    publish(settings, provider, hits[2])
    assert fake_prolific.studies[study_id].fields["total_available_places"] == 3
    assert fake_prolific.places_free(study_id) == 2


def test_a_study_whose_places_ran_out_grows_active_again_for_a_new_turn(settings, provider, fake_prolific):
    batch_id, hits = launch(settings, conversations=2)
    study_id = publish(settings, provider, hits[0])
    submits(settings, fake_prolific, provider, hits[0], "p1")
    again = reopen(settings, hits[1])  # its place goes to a stranger meanwhile
    fake_prolific.fill_places(study_id, provider.completion_code(batch_id, "student"))
    assert fake_prolific.studies[study_id].status == "AWAITING REVIEW"
    publish(settings, provider, again)
    assert fake_prolific.studies[study_id].status == "ACTIVE" and fake_prolific.places_free(study_id) == 1


def test_the_last_waiting_turn_expiring_pauses_the_study_and_the_next_turn_resumes_it(
        settings, provider, fake_prolific):
    _, hits = launch(settings, conversations=1)
    study_id = publish(settings, provider, hits[0])
    with session_scope(settings.database_url) as s:
        provider.expire(s, s.get(Hit, hits[0]))
    assert fake_prolific.studies[study_id].status == "PAUSED"
    reopened_id = reopen(settings, hits[0])
    with pytest.raises(Refused, match="not taking participants"):
        fake_prolific.start(study_id, "p1")
    assert publish(settings, provider, reopened_id) == study_id
    assert fake_prolific.studies[study_id].status == "ACTIVE"


# ---- approvals -----------------------------------------------------------------------------------------


def test_a_submitted_turn_is_approved_on_prolific_and_here_once(settings, provider, fake_prolific):
    _, hits = launch(settings, conversations=1)
    publish(settings, provider, hits[0])
    assignment_id = submits(settings, fake_prolific, provider, hits[0], "p1")
    for _ in range(2):
        with session_scope(settings.database_url) as s:
            provider.approve(s, s.get(Assignment, assignment_id))
    with session_scope(settings.database_url) as s:
        assignment = s.get(Assignment, assignment_id)
        assert assignment.status == AssignmentStatus.approved
    assert fake_prolific.submissions[assignment.external_id].status == "APPROVED"
    transitions = f"/api/v1/submissions/{assignment.external_id}/transition/"
    assert fake_prolific.requests.count(("POST", transitions)) == 1


def test_a_turn_whose_participant_has_not_gone_back_to_prolific_is_approved_later(
        settings, provider, fake_prolific):
    _, hits = launch(settings, conversations=1)
    publish(settings, provider, hits[0])
    submission_id = arrives(settings, fake_prolific, hits[0], "p1")
    with session_scope(settings.database_url) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == "prolific:p1")).one()
        lifecycle.submit_turn(s, submission_id, worker, STUDENT_ANSWERS)
    with session_scope(settings.database_url) as s:
        assignment = s.exec(select(Assignment).where(Assignment.external_id == submission_id)).one()
        with pytest.raises(SubmissionInProgress, match="ACTIVE"):
            provider.approve(s, assignment)
        assert assignment.status == AssignmentStatus.submitted


def test_a_submission_already_approved_on_prolific_settles_ours(settings, provider, fake_prolific):
    _, hits = launch(settings, conversations=1)
    publish(settings, provider, hits[0])
    assignment_id = submits(settings, fake_prolific, provider, hits[0], "p1")
    with session_scope(settings.database_url) as s:
        submission_id = s.get(Assignment, assignment_id).external_id
    fake_prolific.submissions[submission_id].status = "APPROVED"  # approved by hand in Prolific's app
    with session_scope(settings.database_url) as s:
        provider.approve(s, s.get(Assignment, assignment_id))
        assert s.get(Assignment, assignment_id).status == AssignmentStatus.approved


# ---- bonuses exactly once ------------------------------------------------------------------------------


def paid_turn(settings: Settings, provider: ProlificProvider, fake: FakeProlific) -> tuple[int, str]:
    _, hits = launch(settings, conversations=1)
    publish(settings, provider, hits[0])
    assignment_id = submits(settings, fake, provider, hits[0], "p1")
    with session_scope(settings.database_url) as s:
        submission_id = s.get(Assignment, assignment_id).external_id
    return bonus_for(settings, assignment_id), submission_id


def test_a_bonus_is_paid_once_and_a_repeated_task_pays_nothing_more(settings, provider, fake_prolific):
    bonus_id, submission_id = paid_turn(settings, provider, fake_prolific)
    pay(settings, provider, bonus_id)
    with session_scope(settings.database_url) as s:  # the task delivered again
        bonus = s.get(Bonus, bonus_id)
        provider.pay_bonus(s, bonus, s.get(Worker, bonus.worker_id), s.get(Assignment, bonus.assignment_id))
    assert fake_prolific.paid(submission_id) == [8]


def test_a_crash_after_the_pay_call_is_settled_from_prolific_and_never_pays_twice(
        settings, provider, fake_prolific):
    fake_prolific.pay_later = True
    bonus_id, submission_id = paid_turn(settings, provider, fake_prolific)
    with pytest.raises(RuntimeError), session_scope(settings.database_url) as s:
        bonus = s.get(Bonus, bonus_id)
        provider.pay_bonus(s, bonus, s.get(Worker, bonus.worker_id), s.get(Assignment, bonus.assignment_id))
        raise RuntimeError("the worker died before committing")
    with pytest.raises(BonusOutcomeUnknown, match="shows no payment"):
        pay(settings, provider, bonus_id)
    fake_prolific.settle_payments()
    pay(settings, provider, bonus_id)
    assert fake_prolific.paid(submission_id) == [8]
    assert sum(1 for _, path in fake_prolific.requests if path.endswith("/pay/")) == 1
    with session_scope(settings.database_url) as s:
        assert s.get(Bonus, bonus_id).status == BonusStatus.paid


def test_two_workers_paying_the_same_bonus_pay_once(settings, provider, fake_prolific):
    fake_prolific.pay_later = True
    bonus_id, submission_id = paid_turn(settings, provider, fake_prolific)
    with session_scope(settings.database_url) as slow:
        stale = slow.get(Bonus, bonus_id)  # read before the other worker claims it
        pay(settings, provider, bonus_id)
        with pytest.raises(BonusOutcomeUnknown, match="another worker"):
            provider.pay_bonus(slow, stale, slow.get(Worker, stale.worker_id),
                               slow.get(Assignment, stale.assignment_id))
    fake_prolific.settle_payments()
    assert fake_prolific.paid(submission_id) == [8]


def test_a_pay_prolific_refused_is_released_and_paid_by_the_retry(
        settings, provider, fake_prolific, monkeypatch):
    bonus_id, submission_id = paid_turn(settings, provider, fake_prolific)

    def refuse(request, bulk_id):  # noqa: ANN001, ANN202
        raise ApiError(400, "Insufficient funds.")

    with monkeypatch.context() as patched:
        patched.setattr(fake_prolific, "_pay_bonuses", refuse)
        with pytest.raises(api.ProlificError, match="Insufficient funds"):
            pay(settings, provider, bonus_id)
    with session_scope(settings.database_url) as s:
        assert s.get(Bonus, bonus_id).pay_claimed_at is None
    pay(settings, provider, bonus_id)
    assert fake_prolific.paid(submission_id) == [8]


def test_a_pay_that_failed_on_prolifics_side_is_settled_not_sent_again(
        settings, provider, fake_prolific, monkeypatch):
    bonus_id, submission_id = paid_turn(settings, provider, fake_prolific)
    pay_for_real = fake_prolific._pay_bonuses

    def pay_then_fail(request, bulk_id):  # noqa: ANN001, ANN202
        pay_for_real(request, bulk_id)
        raise ApiError(500, "Internal server error.")

    with monkeypatch.context() as patched:
        patched.setattr(fake_prolific, "_pay_bonuses", pay_then_fail)
        with pytest.raises(api.ProlificError):
            pay(settings, provider, bonus_id)
    pay(settings, provider, bonus_id)  # the payment shows on the submission: settled, not sent again
    assert fake_prolific.paid(submission_id) == [8]


def bonuses_of_a_study(settings: Settings, fake: FakeProlific, provider: ProlificProvider,
                       turns: int) -> list[tuple[int, str]]:
    """Turns of one study written by different participants, each with a pending bonus: (bonus id,
    submission id) in the order they were recorded."""
    _, hits = launch(settings, conversations=turns)
    found = []
    for number, hit_id in enumerate(hits, start=1):
        publish(settings, provider, hit_id)
        assignment_id = submits(settings, fake, provider, hit_id, f"p{number}")
        with session_scope(settings.database_url) as s:
            submission_id = s.get(Assignment, assignment_id).external_id
        found.append((bonus_for(settings, assignment_id, cents=5 + number), submission_id))
    return found


def bulk_calls(fake: FakeProlific) -> tuple[int, int]:
    """(set-ups, pays) Prolific received."""
    set_ups = sum(1 for _, path in fake.requests if path == "/api/v1/submissions/bonus-payments/")
    return set_ups, sum(1 for _, path in fake.requests if path.endswith("/pay/"))


def test_a_studys_pending_bonuses_are_paid_in_one_bulk_and_each_once(settings, providers, fake_prolific):
    provider = providers.get("prolific")
    bonuses = bonuses_of_a_study(settings, fake_prolific, provider, turns=3)
    assert pipeline.pay_bonus(settings, providers, bonuses[1][0])
    assert bulk_calls(fake_prolific) == (1, 1)
    for bonus_id, _ in bonuses:  # the other bonuses' own tasks find them paid and call Prolific no more
        assert pipeline.pay_bonus(settings, providers, bonus_id)
    assert bulk_calls(fake_prolific) == (1, 1)
    assert [fake_prolific.paid(submission_id) for _, submission_id in bonuses] == [[6], [7], [8]]
    with session_scope(settings.database_url) as s:
        paid = [s.get(Bonus, bonus_id) for bonus_id, _ in bonuses]
        assert {bonus.status for bonus in paid} == {BonusStatus.paid}
        assert len({bonus.external_id for bonus in paid}) == 1
        assert sorted(e.data["bonus_id"] for e in s.exec(select(Event).where(Event.kind == "bonus_paid"))) \
            == sorted(bonus_id for bonus_id, _ in bonuses)


def test_a_bulk_takes_at_most_prolifics_limit_the_bonus_asked_for_first(
        settings, providers, fake_prolific, monkeypatch):
    monkeypatch.setattr(api, "MAX_BONUSES_PER_REQUEST", 2)
    bonuses = bonuses_of_a_study(settings, fake_prolific, providers.get("prolific"), turns=3)
    pipeline.pay_bonus(settings, providers, bonuses[2][0])
    assert [fake_prolific.paid(submission_id) for _, submission_id in bonuses] == [[6], [], [8]]
    pipeline.pay_bonus(settings, providers, bonuses[1][0])
    assert [fake_prolific.paid(submission_id) for _, submission_id in bonuses] == [[6], [7], [8]]
    assert bulk_calls(fake_prolific) == (2, 2)


def test_a_worker_that_finds_a_bonus_of_its_bulk_claimed_meanwhile_pays_nothing(
        settings, providers, fake_prolific, monkeypatch):
    """Two workers pay bonuses of one study at once: the one whose set-up came second claims none of its
    bulk (a bonus in it is the other's now) and never pays it."""
    bonuses = bonuses_of_a_study(settings, fake_prolific, providers.get("prolific"), turns=2)
    set_up = api.set_up_bonus_payments

    def set_up_while_another_pays(*args):  # noqa: ANN002, ANN202
        bulk = set_up(*args)
        monkeypatch.setattr(api, "set_up_bonus_payments", set_up)
        assert pipeline.pay_bonus(settings, providers, bonuses[1][0])  # the other worker, meanwhile
        return bulk

    monkeypatch.setattr(api, "set_up_bonus_payments", set_up_while_another_pays)
    with pytest.raises(BonusOutcomeUnknown, match="another worker"):
        pipeline.pay_bonus(settings, providers, bonuses[0][0])
    assert bulk_calls(fake_prolific) == (2, 1)
    assert [fake_prolific.paid(submission_id) for _, submission_id in bonuses] == [[6], [7]]
    fake_prolific.settle_payments()
    assert pipeline.pay_bonus(settings, providers, bonuses[0][0])  # settled from Prolific, not paid again
    assert bulk_calls(fake_prolific) == (2, 1)


# ---- blocks --------------------------------------------------------------------------------------------


def test_a_blocked_participant_is_kept_out_of_the_study_until_unblocked(settings, provider, fake_prolific):
    _, hits = launch(settings, conversations=2)
    study_id = publish(settings, provider, hits[0])
    with session_scope(settings.database_url) as s:
        worker = Worker(external_id="prolific:p1", role="student", onboarded=True)
        s.add(worker)
        s.flush()
        provider.soft_block(s, worker, reason="low ratings")
        provider.block_permanently(s, worker, reason="low ratings")
    assert list(fake_prolific.groups[provider.blocked_group()].members) == ["p1"]
    with pytest.raises(Refused, match="blocks"):
        fake_prolific.start(study_id, "p1")
    with session_scope(settings.database_url) as s:
        provider.unblock(s, s.exec(select(Worker).where(Worker.external_id == "prolific:p1")).one())
    assert fake_prolific.start(study_id, "p1")


def test_workers_are_messaged_through_the_study_they_last_worked_in(settings, provider, fake_prolific):
    _, hits = launch(settings, conversations=1)
    study_id = publish(settings, provider, hits[0])
    arrives(settings, fake_prolific, hits[0], "p1")
    with session_scope(settings.database_url) as s:
        newcomer = Worker(external_id="prolific:p2", role="student", onboarded=True)
        s.add(newcomer)
        s.flush()
        workers = [s.exec(select(Worker).where(Worker.external_id == "prolific:p1")).one(), newcomer]
        provider.notify(s, workers, "Paused", "Your recent turns are under review.")
    assert fake_prolific.messages == [(study_id, "p1", "Paused\n\nYour recent turns are under review.")]


def test_the_block_group_is_found_again_by_a_new_process(settings, provider, fake_prolific):
    first = provider.blocked_group()
    again = ProlificProvider(settings).blocked_group()
    assert again == first
    assert sum(g.name == fake_prolific.groups[first].name for g in fake_prolific.groups.values()) == 1


def test_the_workspace_balance_is_what_prolific_says(provider, fake_prolific):
    assert provider.balance_cents() == fake_prolific.balance_cents


def test_a_trial_batch_runs_on_test_studies_that_only_test_participants_see(settings, fake_prolific):
    provider = ProlificProvider(settings.model_copy(update={"prolific_test_studies": True}))
    tester = api.create_test_participant(provider.client, "tester@lab.example.org")
    api.add_to_participant_group(provider.client, role_groups(settings.prolific_role_groups)["student"],
                                 [tester])  # the test copy admits the role's group, as the study does
    _, hits = launch(settings, conversations=2)
    study_id = publish(settings, provider, hits[0])
    draft, test_copy = fake_prolific.studies.values()
    assert study_id == test_copy.id and draft.status == "UNPUBLISHED" and test_copy.status == "ACTIVE"
    assert publish(settings, provider, hits[1]) == study_id and fake_prolific.places_free(study_id) == 2
    assert fake_prolific.start(study_id, tester)


def test_a_turn_opened_while_its_study_is_being_paused_resumes_it(
        settings, provider, fake_prolific, monkeypatch):
    batch_id, hits = launch(settings, conversations=2)
    study_id = publish(settings, provider, hits[0])
    publish(settings, provider, hits[1])
    arrives(settings, fake_prolific, hits[0], "p1")
    arrives(settings, fake_prolific, hits[1], "p2")  # nothing waits: a look at the study pauses it
    transition = fake_prolific._transition_study

    def a_turn_opens_meanwhile(request, study_id):  # noqa: ANN001, ANN202 - another worker's new turn lands
        if request.get_json()["action"] == "PAUSE":
            reopen(settings, hits[1])
        return transition(request, study_id)

    monkeypatch.setattr(fake_prolific, "_transition_study", a_turn_opens_meanwhile)
    with session_scope(settings.database_url) as s:
        assert provider.keep_in_step(s, s.get(Batch, batch_id), "student") == "ACTIVE"
    assert fake_prolific.studies[study_id].status == "ACTIVE" and fake_prolific.places_free(study_id) == 1


# ---- Prolific's own statuses: publishing, scheduled, paused by Prolific (issue 34) ------------------------------


@pytest.mark.parametrize("status, waiting, batch_status, paused_by_us, step", [
    ("PROCESSING", 3, "active", False, StudyStep()),  # transient: looked at again next round
    ("PUBLISHING", 3, "active", False, StudyStep()),
    ("SCHEDULED", 3, "active", False, StudyStep()),  # a person scheduled it: not ours to publish
    ("SCHEDULED", 0, "cancelled", False, StudyStep(action="CANCEL_PUBLISH")),
    ("PAUSED", 3, "active", False, StudyStep(places=4)),  # paused by Prolific or a person: never resumed
    ("PAUSED", 3, "active", True, StudyStep(places=4, action="START")),
    ("AWAITING REVIEW", 2, "active", False, StudyStep(places=3, action="START")),
    ("ACTIVE", 0, "active", False, StudyStep(action="PAUSE")),
    ("UNPUBLISHED", 2, "active", False, StudyStep(places=3, action="PUBLISH")),
])
def test_each_status_prolific_gives_a_study_gets_its_step(status, waiting, batch_status, paused_by_us, step):
    assert next_step(status, places_taken=1, total_places=2, waiting=waiting, batch_status=batch_status,
                     paused_by_us=paused_by_us) == step


def test_a_study_still_publishing_is_left_to_finish(settings, provider, fake_prolific):
    fake_prolific.publishing_requests = 4
    batch_id, hits = launch(settings, conversations=2)
    study_id = publish(settings, provider, hits[0])
    assert fake_prolific.studies[study_id].status == "PUBLISHING"
    before = len(fake_prolific.requests)
    publish(settings, provider, hits[1])  # looks, finds it publishing, changes nothing
    assert {method for method, _ in fake_prolific.requests[before:]} == {"GET"}
    for _ in range(4):
        api.get_study(provider.client, study_id)
    with session_scope(settings.database_url) as s:
        assert provider.keep_in_step(s, s.get(Batch, batch_id), "student") == "ACTIVE"


def takes_minutes(settings: Settings, fake: FakeProlific, provider: ProlificProvider, hit_id: int,
                  participant_id: str, minutes: float) -> None:
    """A participant takes ``minutes`` over a turn: on our page, and on Prolific's clock."""
    submission_id = arrives(settings, fake, hit_id, participant_id)
    with session_scope(settings.database_url) as s:
        assignment = s.exec(select(Assignment).where(Assignment.external_id == submission_id)).one()
        assignment.accepted_at = utcnow() - timedelta(minutes=minutes)
        s.add(assignment)
        worker = s.get(Worker, assignment.worker_id)
        lifecycle.submit_turn(s, submission_id, worker, STUDENT_ANSWERS)
        batch_id = s.get(Conversation, s.get(Turn, s.get(Hit, hit_id).turn_id).conversation_id).batch_id
    fake.complete(submission_id, provider.completion_code(batch_id, "student"), minutes=minutes)


def test_a_study_prolific_paused_for_underpaying_is_never_resumed_and_the_lab_is_told(
        settings, provider, fake_prolific):
    """Prolific judges pay at the median completion time and pauses a study that pays under its minimum
    there (20 pence for 10 minutes); turkflow resumed any paused study. Now it leaves it paused and says so."""
    batch_id, hits = launch(settings, conversations=4)
    study_id = next(publish(settings, provider, hit_id) for hit_id in hits)
    for hit_id in hits[1:]:
        publish(settings, provider, hit_id)
    for number, hit_id in enumerate(hits[:3]):
        takes_minutes(settings, fake_prolific, provider, hit_id, f"p{number + 1}", minutes=10)
    assert fake_prolific.studies[study_id].status == "PAUSED" and fake_prolific.studies[study_id].paused_by_prolific
    starts_before = sum(1 for m, p in fake_prolific.requests if p.endswith("/transition/"))
    found = sync.poll(settings, provider)  # the fourth turn still waits
    assert found.studies[study_id] == "PAUSED" and "paused on Prolific, not by turkflow" in found.slow[study_id]
    assert sum(1 for m, p in fake_prolific.requests if p.endswith("/transition/")) == starts_before
    assert not sync.poll(settings, provider).slow  # said once
    with session_scope(settings.database_url) as s:
        [view] = study_views(s, s.get(Batch, batch_id))
        assert view.paused_elsewhere and view.median_minutes == pytest.approx(10, abs=0.1)
        assert s.exec(select(Event).where(Event.kind == "prolific_study_paused_elsewhere")).one().data["study_id"] \
            == study_id


def test_turns_taking_near_the_time_prolific_underpays_at_are_warned_about_before_prolific_pauses(
        settings, provider, fake_prolific):
    """20 cents pays USD 8 an hour for 1.5 minutes: at a median of 1.3 minutes the lab hears it, while
    Prolific (which has not judged it underpaying) keeps the study running."""
    batch_id, hits = launch(settings, conversations=4)
    for hit_id in hits:
        publish(settings, provider, hit_id)
    for number, hit_id in enumerate(hits[:3]):
        takes_minutes(settings, fake_prolific, provider, hit_id, f"p{number + 1}", minutes=1.3)
    found = sync.poll(settings, provider)
    [(study_id, warning)] = found.slow.items()
    assert "1.3 minutes a turn at the median, near the 1.5" in warning
    assert fake_prolific.studies[study_id].status == "ACTIVE"
    with session_scope(settings.database_url) as s:
        [view] = study_views(s, s.get(Batch, batch_id))
    assert (view.turns_timed, view.estimated_minutes, view.underpaid_after_minutes) == (3, 2, 1.5)

