"""Every stored turn paid once, and every bonus paid once or left for a person, on the fake Prolific (every
request and response checked against Prolific's OpenAPI description), on both databases: turns whose
submission timed out or was returned after the turn was stored, approvals that nothing holds up, bonuses
whose pay call crashed or failed and the person who decides about them, and a poller that reads only
what can still change."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import insert
from sqlmodel import select

from turkflow import pipeline
from turkflow.cli.common import App
from turkflow.cli.main import main
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.hits import lifecycle, money, registry
from turkflow.hits.prolific import api, sync
from turkflow.hits.prolific.provider import BonusOutcomeUnknown, worker_external_id
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Bonus,
    BonusKind,
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
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path

from tests.fake_prolific import FakeProlific
from turkflow.simulator import fake_prolific as fake_module
from tests.test_pipeline import STUDENT_ANSWERS

pytest_plugins = ["tests.fake_prolific"]

REWARD = 40
VOUCHED = ("p1", "p2", "p3", "p4", "p5", "p-valid")  # the hand-made role groups' members


@pytest.fixture
def settings(tmp_path: Path, database_url: str, fake_prolific: FakeProlific) -> Settings:
    """A collection on the fake Prolific whose role studies admit hand-made groups (onboarding is not what
    these tests are about); every stored turn is due for approval at once."""
    client = api.ProlificClient(fake_prolific.token, fake_prolific.url)
    groups = {role: api.create_participant_group(client, fake_prolific.workspace_id, f"Lab's {role}s",
                                                 participant_ids=VOUCHED)["id"]
              for role in ("student", "teacher")}
    return Settings(data_dir=tmp_path / "var", database_url=database_url, secret_key="test-secret",
                    worker_hash_key="test-hash-key", public_url="https://turkflow.example.org",
                    prolific_rehearsal_host="turkflow.example.org",
                    provider="prolific", prolific_token=fake_prolific.token,
                    prolific_workspace_id=fake_prolific.workspace_id, prolific_base_url=fake_prolific.url,
                    prolific_role_groups=",".join(f"{role}={group}" for role, group in groups.items()),
                    prolific_approve_after_seconds=0, prolific_bonus_unknown_after_seconds=3600)


@pytest.fixture
def providers(settings: Settings):  # noqa: ANN201
    return registry.providers(settings)


def launch(settings: Settings, providers, conversations: int = 1) -> tuple[int, str, list[int]]:  # noqa: ANN001
    """A Prolific batch whose first (student) turns are published: (batch id, student study, HIT ids)."""
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), conversations, name="prolific",
                                             provider="prolific", reward_cents=REWARD)
        batch_id, hit_ids = batch.id, [h.id for h in hits]
    for hit_id in hit_ids:
        pipeline.publish(settings, providers, hit_id, "prolific")
    with session_scope(settings.database_url) as s:
        study_id = s.exec(select(ProlificStudy.study_id).where(ProlificStudy.batch_id == batch_id)).one()
    return batch_id, study_id, hit_ids


def writes(settings: Settings, fake: FakeProlific, providers, hit_id: int, participant: str, *,  # noqa: ANN001
           goes_back: bool = True) -> str:
    """A participant starts the study, our page gives them this turn, they write it (stored), and, if
    ``goes_back``, return to Prolific with the completion code; returns the submission id."""
    with session_scope(settings.database_url) as s:
        hit = s.get(Hit, hit_id)
        submission_id = fake.start(hit.external_id, participant)
        worker = Worker(external_id=worker_external_id(participant), role=hit.role, onboarded=True)
        s.add(worker)
        s.flush()
        s.add(Assignment(hit_id=hit_id, worker_id=worker.id, external_id=submission_id))
    with session_scope(settings.database_url) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == worker_external_id(participant))).one()
        lifecycle.submit_turn(s, submission_id, worker, STUDENT_ANSWERS)
        batch_id = s.get(Conversation, s.get(Turn, s.get(Hit, hit_id).turn_id).conversation_id).batch_id
    if goes_back:
        fake.complete(submission_id, providers.get("prolific").completion_code(batch_id, "student"))
    return submission_id


def ours(settings: Settings, submission_id: str) -> Assignment:
    with session_scope(settings.database_url) as s:
        return s.exec(select(Assignment).where(Assignment.external_id == submission_id)).one()


def bonuses_of(settings: Settings, submission_id: str) -> list[Bonus]:
    with session_scope(settings.database_url) as s:
        return list(s.exec(select(Bonus).join(Assignment, Assignment.id == Bonus.assignment_id)
                           .where(Assignment.external_id == submission_id).order_by(Bonus.id)))


def round_of_beat(settings: Settings, providers) -> sync.ProlificRound:  # noqa: ANN001
    """What ``workers.prolific_tasks.poll_prolific`` does: a poller round, then the payments it asks for."""
    found = sync.poll(settings, providers.get("prolific"))
    for bonus_id in found.reward_bonuses:
        pipeline.pay_bonus(settings, providers, bonus_id)
    for bonus_id in found.claimed_bonuses:
        try:
            pipeline.pay_bonus(settings, providers, bonus_id)
        except BonusOutcomeUnknown:
            pass
    return found


def pay_calls(fake: FakeProlific) -> int:
    return sum(1 for _, path in fake.requests if path.endswith("/pay/"))


def list_calls(fake: FakeProlific, since: int = 0) -> int:
    return sum(1 for method, path in fake.requests[since:] if method == "GET" and path == "/api/v1/submissions/")


# ---- stored turns whose submission ended unpaid ---------------------------------------------------------


def test_a_stored_turn_whose_submission_timed_out_is_approved_on_prolific_once(settings, providers,
                                                                              fake_prolific):
    _, _, hits = launch(settings, providers)
    submission_id = writes(settings, fake_prolific, providers, hits[0], "p1", goes_back=False)
    fake_prolific.time_out(submission_id)  # the participant never went back to Prolific

    found = round_of_beat(settings, providers)
    assert found.unpaid == found.approved_late == [ours(settings, submission_id).id]
    assert ours(settings, submission_id).status == AssignmentStatus.approved
    assert fake_prolific.submissions[submission_id].status == "APPROVED"  # the reward, paid by Prolific
    assert fake_prolific.paid(submission_id) == [] and bonuses_of(settings, submission_id) == []
    assert not round_of_beat(settings, providers)  # settled: the next rounds change nothing
    transitions = [p for m, p in fake_prolific.requests if p.endswith(f"{submission_id}/transition/")]
    assert len(transitions) == 1
    with session_scope(settings.database_url) as s:
        assert money.spend(s).rewards_cents == REWARD


@pytest.mark.parametrize("ends", ["returned", "timed out where Prolific will not approve it"])
def test_a_stored_turn_whose_submission_ended_unpaid_gets_its_reward_as_a_bonus_once(
        settings, providers, fake_prolific, ends):
    batch_id, _, hits = launch(settings, providers)
    submission_id = writes(settings, fake_prolific, providers, hits[0], "p1", goes_back=False)
    if ends == "returned":
        fake_prolific.return_submission(submission_id)
    else:
        fake_prolific.approves_timed_out = False
        fake_prolific.time_out(submission_id)

    found = round_of_beat(settings, providers)
    assert found.unpaid == [ours(settings, submission_id).id] and len(found.reward_bonuses) == 1
    assert fake_prolific.paid(submission_id) == [REWARD]
    assert ours(settings, submission_id).status == AssignmentStatus.compensated
    [bonus] = bonuses_of(settings, submission_id)
    assert (bonus.kind, bonus.status, bonus.amount_cents) == (BonusKind.reward, BonusStatus.paid, REWARD)
    for _ in range(2):  # later rounds, and Prolific's auto-rejection of the unpaid submission, pay nothing more
        round_of_beat(settings, providers)
        fake_prolific.submissions[submission_id].status = "REJECTED"
    assert fake_prolific.paid(submission_id) == [REWARD] and pay_calls(fake_prolific) == 1
    with session_scope(settings.database_url) as s:
        spent = money.spend(s)
        assert (spent.rewards_cents, spent.bonuses_cents, spent.pending_cents) == (REWARD, 0, 0)
        assert s.exec(select(Event).where(Event.kind == "prolific_reward_as_bonus")).one().data["bonus_id"] == bonus.id
        # the budget counts the turn's reward once, whether Prolific paid it as a reward or as a bonus
        batch = s.get(Batch, batch_id)
        open_or_paid = s.exec(select(Hit).join(Turn, Turn.id == Hit.turn_id)
                              .join(Conversation, Conversation.id == Turn.conversation_id)
                              .where(Conversation.batch_id == batch_id, Hit.status != HitStatus.expired)).all()
        rewards = len(open_or_paid) * REWARD
        assert lifecycle.committed_cents(s, batch_id) == rewards + money.percent_cents(rewards, batch.fee_percent)


def test_a_kept_turn_earns_its_quality_bonus_beside_its_reward_each_paid_once(settings, providers, fake_prolific):
    _, _, hits = launch(settings, providers)
    submission_id = writes(settings, fake_prolific, providers, hits[0], "p1", goes_back=False)
    with session_scope(settings.database_url) as s:
        assignment = s.exec(select(Assignment).where(Assignment.external_id == submission_id)).one()
        s.add(Bonus(turn_id=s.get(Hit, assignment.hit_id).turn_id, worker_id=assignment.worker_id,
                    assignment_id=assignment.id, amount_cents=8, request_token="quality-bonus"))
    fake_prolific.return_submission(submission_id)
    round_of_beat(settings, providers)
    quality = next(b for b in bonuses_of(settings, submission_id) if b.kind == BonusKind.quality)
    pipeline.pay_bonus(settings, providers, quality.id)
    assert sorted(fake_prolific.paid(submission_id)) == [8, REWARD] and pay_calls(fake_prolific) == 2
    assert {b.status for b in bonuses_of(settings, submission_id)} == {BonusStatus.paid}


def test_a_valid_submission_behind_a_thousand_timed_out_turns_is_approved_in_the_same_round(
        settings, providers, fake_prolific):
    batch_id, study_id, hits = launch(settings, providers, conversations=2)
    stale = timed_out_turns(settings, fake_prolific, batch_id, study_id, 1000)
    valid = writes(settings, fake_prolific, providers, hits[1], "p-valid")

    found = sync.poll(settings, providers.get("prolific"))
    assert ours(settings, valid).id in found.approvals_asked
    assert fake_prolific.submissions[valid].status == "APPROVED"
    assert len(found.unpaid) == len(stale)  # none of them is asked to be approved in bulk again
    assert not set(found.approvals_asked) & {ours(settings, s).id for s in stale[:3]}


def test_the_stored_turns_of_a_study_that_ended_are_still_approved_and_settled(settings, providers, fake_prolific):
    batch_id, study_id, hits = launch(settings, providers)
    submission_id = writes(settings, fake_prolific, providers, hits[0], "p1")
    provider = providers.get("prolific")
    with session_scope(settings.database_url) as s:
        batch = s.get(Batch, batch_id)
        lifecycle.set_batch_status(s, batch, BatchStatus.cancelled, "requester")
        provider.keep_in_step(s, batch, "student")  # the study stops and is left alone from now on
    with session_scope(settings.database_url) as s:
        assert s.exec(select(ProlificStudy.ended_at).where(ProlificStudy.study_id == study_id)).one() is not None
    round_of_beat(settings, providers)
    round_of_beat(settings, providers)
    assert fake_prolific.submissions[submission_id].status == "APPROVED"
    assert ours(settings, submission_id).status == AssignmentStatus.approved
    before = len(fake_prolific.requests)
    round_of_beat(settings, providers)
    assert len(fake_prolific.requests) == before  # nothing owed any more: nothing read


def timed_out_turns(settings: Settings, fake: FakeProlific, batch_id: int, study_id: str, count: int) -> list[str]:
    """``count`` turns stored an hour ago whose submissions then timed out on Prolific (written in bulk)."""
    from turkflow.simulator.fake_prolific import Submission

    an_hour_ago = utcnow() - timedelta(hours=1)
    with session_scope(settings.database_url) as s:
        conversation_id = s.exec(select(Conversation.id).where(Conversation.batch_id == batch_id)).first()
        worker = Worker(external_id="prolific:p-slow", role="student", onboarded=True)
        s.add(worker)
        s.flush()
        first = 1_000_000
        s.execute(insert(Turn), [{"id": first + n, "conversation_id": conversation_id, "index": 100 + n,
                                  "role": "student", "status": "submitted", "worker_id": worker.id,
                                  "text": "...", "answers": {}, "flags": [], "signals": {},
                                  "opened_at": an_hour_ago, "submitted_at": an_hour_ago,
                                  "reviewed_at": an_hour_ago} for n in range(count)])
        s.execute(insert(Hit), [{"id": first + n, "turn_id": first + n, "attempt": 1, "provider": "prolific",
                                 "external_id": study_id, "role": "student", "status": HitStatus.submitted,
                                 "created_at": an_hour_ago} for n in range(count)])
        s.execute(insert(Assignment), [{"id": first + n, "hit_id": first + n, "worker_id": worker.id,
                                        "external_id": f"slow-{n}", "status": AssignmentStatus.submitted,
                                        "accepted_at": an_hour_ago, "submitted_at": an_hour_ago}
                                       for n in range(count)])
    started = an_hour_ago.isoformat().replace("+00:00", "Z")
    for n in range(count):
        fake.submissions[f"slow-{n}"] = Submission(f"slow-{n}", study_id, "p-slow", "TIMED-OUT", started_at=started)
    return [f"slow-{n}" for n in range(count)]


# ---- the poller reads what can still change ----------------------------------------------------------------


def test_the_poller_reads_past_a_page_shorter_than_it_asked_for(settings, providers, fake_prolific):
    _, study_id, hits = launch(settings, providers, conversations=5)
    fake_prolific.max_page_size = 2  # Prolific answers fewer than asked per page
    taken = []
    for number, hit_id in enumerate(hits, start=1):
        submission_id = fake_prolific.start(study_id, f"p{number}")
        with session_scope(settings.database_url) as s:
            worker = Worker(external_id=worker_external_id(f"p{number}"), role="student", onboarded=True)
            s.add(worker)
            s.flush()
            s.add(Assignment(hit_id=hit_id, worker_id=worker.id, external_id=submission_id))
        taken.append(submission_id)
    fake_prolific.return_submission(taken[0])  # the oldest and the newest give their turns back
    fake_prolific.return_submission(taken[-1])

    found = sync.poll(settings, providers.get("prolific"))
    assert sorted(found.released) == sorted([ours(settings, taken[0]).id, ours(settings, taken[-1]).id])


def test_a_round_reads_no_submissions_of_a_study_with_nothing_of_ours_unsettled(settings, providers, fake_prolific):
    _, _, hits = launch(settings, providers, conversations=2)
    for number, hit_id in enumerate(hits, start=1):
        writes(settings, fake_prolific, providers, hit_id, f"p{number}")
    sync.poll(settings, providers.get("prolific"))  # asks Prolific to approve both
    sync.poll(settings, providers.get("prolific"))  # takes the approvals in
    assert {ours(settings, s.id).status for s in fake_prolific.submissions.values()} == {AssignmentStatus.approved}
    before = len(fake_prolific.requests)
    sync.poll(settings, providers.get("prolific"))
    assert list_calls(fake_prolific, before) == 0


# ---- bonuses whose payment nobody can tell: a person decides ------------------------------------------------


def bonus_on_a_turn(settings: Settings, providers, fake: FakeProlific) -> tuple[int, str]:  # noqa: ANN001
    _, _, hits = launch(settings, providers)
    submission_id = writes(settings, fake, providers, hits[0], "p1")
    with session_scope(settings.database_url) as s:
        assignment = s.exec(select(Assignment).where(Assignment.external_id == submission_id)).one()
        bonus = Bonus(turn_id=s.get(Hit, assignment.hit_id).turn_id, worker_id=assignment.worker_id,
                      assignment_id=assignment.id, amount_cents=8, request_token="bonus-1")
        s.add(bonus)
        s.flush()
        return bonus.id, submission_id


def cli(settings: Settings, *args: str):  # noqa: ANN201
    return CliRunner().invoke(main, ["prolific", *args], obj=App(settings, registry.providers(settings)))


def test_a_bonus_whose_worker_died_between_claim_and_pay_is_released_by_a_person_and_paid_once(
        settings, providers, fake_prolific, monkeypatch):
    bonus_id, submission_id = bonus_on_a_turn(settings, providers, fake_prolific)
    with monkeypatch.context() as dying:
        def die(*args):  # noqa: ANN002, ANN202
            raise SystemExit("worker killed after the claim, before the pay call")

        dying.setattr(api, "pay_bonus_payments", die)
        with pytest.raises(SystemExit):
            pipeline.pay_bonus(settings, providers, bonus_id)
    round_of_beat(settings, providers)  # the poller asks Prolific: no payment, never pays again
    assert sync.stuck_bonuses(settings) == []  # not before the stated time
    assert "no bonus waits for a person" in cli(settings, "bonuses").output

    settings.prolific_bonus_unknown_after_seconds = 0
    [stuck] = sync.stuck_bonuses(settings, providers.get("prolific"))
    assert (stuck.bonus_id, stuck.submission_id, stuck.prolific_payments) == (bonus_id, submission_id, [])
    assert "between the claim and the pay call" in stuck.reason
    listed = cli(settings, "bonuses")
    assert listed.exit_code == 0 and str(bonus_id) in listed.output and "shows it approved, bonuses paid on it: none" in listed.output
    assert "`turkflow prolific bonuses` lists those a person must release or settle" in cli(settings, "spend").output
    early = cli(settings, "bonuses", "--release", str(bonus_id), "--by", "ana")  # Prolific may still be paying it
    assert early.exit_code == 1 and "can be released from" in early.output and pay_calls(fake_prolific) == 0
    claimed_ago(settings, bonus_id, sync.PAYS_WITHIN)

    released = cli(settings, "bonuses", "--release", str(bonus_id), "--by", "ana")
    assert released.exit_code == 0, released.output
    assert f"bonus {bonus_id} released by ana" in released.output
    assert fake_prolific.paid(submission_id) == [8] and pay_calls(fake_prolific) == 1
    again = cli(settings, "bonuses", "--release", str(bonus_id), "--by", "ana")
    assert again.exit_code == 1 and "not waiting for a person" in again.output
    round_of_beat(settings, providers)
    assert fake_prolific.paid(submission_id) == [8] and pay_calls(fake_prolific) == 1
    with session_scope(settings.database_url) as s:
        assert s.get(Bonus, bonus_id).status == BonusStatus.paid
        decision = s.exec(select(Event).where(Event.kind == "prolific_bonus_released")).one()
        assert decision.actor == "requester:ana" and decision.data["prolific_payments"] == []


def test_a_bonus_whose_pay_failed_on_prolifics_side_is_marked_settled_by_a_person(
        settings, providers, fake_prolific):
    bonus_id, submission_id = bonus_on_a_turn(settings, providers, fake_prolific)
    fake_prolific.lose_pays = 1
    with pytest.raises(api.ProlificError):
        pipeline.pay_bonus(settings, providers, bonus_id)
    round_of_beat(settings, providers)
    settings.prolific_bonus_unknown_after_seconds = 0
    [stuck] = sync.stuck_bonuses(settings)
    assert "500" in stuck.reason

    settled = cli(settings, "bonuses", "--settle", str(bonus_id), "--by", "ben")
    assert settled.exit_code == 0, settled.output
    assert pay_calls(fake_prolific) == 1 and fake_prolific.paid(submission_id) == []
    with session_scope(settings.database_url) as s:
        assert s.get(Bonus, bonus_id).status == BonusStatus.paid
        assert s.exec(select(Event).where(Event.kind == "prolific_bonus_settled")).one().actor == "requester:ben"
    assert sync.stuck_bonuses(settings) == [] and round_of_beat(settings, providers).claimed_bonuses == []


def test_each_bonus_is_settled_by_a_payment_of_its_own_amount_never_by_another_bonus_paid_beside_it(
        settings, providers, fake_prolific, monkeypatch):
    """Issue 34, item 4: a never-paid quality bonus was marked paid because the turn's reward (another amount)
    had been paid as a bonus on the same submission; the reward then stayed stuck, and its release paid it
    again. Prolific keeps the amount of each payment on the submission: each bonus is matched to its own."""
    _, _, hits = launch(settings, providers)
    submission_id = writes(settings, fake_prolific, providers, hits[0], "p1", goes_back=False)
    with session_scope(settings.database_url) as s:
        assignment = s.exec(select(Assignment).where(Assignment.external_id == submission_id)).one()
        quality = Bonus(turn_id=s.get(Hit, assignment.hit_id).turn_id, worker_id=assignment.worker_id,
                        assignment_id=assignment.id, amount_cents=8, request_token="quality-bonus")
        s.add(quality)
        s.flush()
        quality_id = quality.id
    real_pay = api.pay_bonus_payments

    def dies_before_the_call(*args):  # noqa: ANN002, ANN202
        raise SystemExit("worker killed after the claim, before the pay call")

    def pays_then_dies(client, bulk_id):  # noqa: ANN001, ANN202
        real_pay(client, bulk_id)
        raise SystemExit("worker killed right after the pay call")

    with monkeypatch.context() as dying:
        dying.setattr(api, "pay_bonus_payments", dies_before_the_call)
        with pytest.raises(SystemExit):
            pipeline.pay_bonus(settings, providers, quality_id)
    fake_prolific.return_submission(submission_id)  # the turn's reward is now owed as a bonus
    with monkeypatch.context() as dying:
        dying.setattr(api, "pay_bonus_payments", pays_then_dies)
        with pytest.raises(SystemExit):
            round_of_beat(settings, providers)
    assert fake_prolific.paid(submission_id) == [REWARD]

    round_of_beat(settings, providers)
    reward = next(b for b in bonuses_of(settings, submission_id) if b.kind == BonusKind.reward)
    assert reward.status == BonusStatus.paid
    assert next(b for b in bonuses_of(settings, submission_id) if b.id == quality_id).status == BonusStatus.pending
    settings.prolific_bonus_unknown_after_seconds = 0
    for bonus in bonuses_of(settings, submission_id):
        claimed_ago(settings, bonus.id, sync.PAYS_WITHIN)
    assert [stuck.bonus_id for stuck in sync.stuck_bonuses(settings)] == [quality_id]
    assert cli(settings, "bonuses", "--release", str(quality_id), "--by", "ana").exit_code == 0
    round_of_beat(settings, providers)
    assert sorted(fake_prolific.paid(submission_id)) == [8, REWARD] and pay_calls(fake_prolific) == 2
    assert {b.status for b in bonuses_of(settings, submission_id)} == {BonusStatus.paid}


def test_a_payment_made_by_hand_in_prolifics_app_never_settles_a_bonus_of_ours(settings, providers, fake_prolific,
                                                                               monkeypatch):
    """Issue 34, item 4: an adjustment a person paid by hand on the submission (Prolific asks for them when a
    study underpays) marked a claimed bonus paid."""
    bonus_id, submission_id = bonus_on_a_turn(settings, providers, fake_prolific)
    with monkeypatch.context() as dying:
        dying.setattr(api, "pay_bonus_payments", lambda *args: (_ for _ in ()).throw(SystemExit("killed")))
        with pytest.raises(SystemExit):
            pipeline.pay_bonus(settings, providers, bonus_id)
    fake_prolific.submissions[submission_id].bonus_payments.append(25)  # the adjustment, paid in the app
    fake_prolific.payments.append(fake_module.Payment("in Prolific's app", submission_id, "p1", 25))
    found = round_of_beat(settings, providers)
    assert found.claimed_bonuses == [bonus_id]
    with session_scope(settings.database_url) as s:
        assert s.get(Bonus, bonus_id).status == BonusStatus.pending
    settings.prolific_bonus_unknown_after_seconds = 0
    claimed_ago(settings, bonus_id, sync.PAYS_WITHIN)
    [stuck] = sync.stuck_bonuses(settings, providers.get("prolific"))
    assert stuck.prolific_payments == [25]
    listed = cli(settings, "bonuses")
    assert "$0.08 to prolific:p1" in listed.output and "bonuses paid on it: $0.25" in listed.output  # the batch pays in USD
    assert cli(settings, "bonuses", "--release", str(bonus_id), "--by", "ana").exit_code == 0
    assert fake_prolific.paid(submission_id) == [25, 8] and pay_calls(fake_prolific) == 1


def test_a_bonus_prolific_shows_paid_cannot_be_released_for_a_second_payment(settings, providers, fake_prolific):
    bonus_id, submission_id = bonus_on_a_turn(settings, providers, fake_prolific)
    fake_prolific.lose_pays = 1
    with pytest.raises(api.ProlificError):  # a 500: it may have paid
        pipeline.pay_bonus(settings, providers, bonus_id)
    settings.prolific_bonus_unknown_after_seconds = 0
    claimed_ago(settings, bonus_id, sync.PAYS_WITHIN)
    with session_scope(settings.database_url) as s:
        bulk_id = s.get(Bonus, bonus_id).external_id
    fake_prolific.payments.append(fake_module.Payment(bulk_id, submission_id, "p1", 8))  # it paid, after all
    fake_prolific.submissions[submission_id].bonus_payments.append(8)
    refused = cli(settings, "bonuses", "--release", str(bonus_id), "--by", "ana")
    assert refused.exit_code == 1 and "shows a payment of its amount" in refused.output
    assert pay_calls(fake_prolific) == 1


def test_a_crash_after_prolific_accepted_the_pay_call_is_never_offered_for_release(settings, providers, fake_prolific):
    """Issue 34, item 5: Prolific's acceptance is committed on its own right after the call, so a worker dying
    before its own transaction ends still knows Prolific will pay; the bonus is only ever settled."""
    bonus_id, submission_id = bonus_on_a_turn(settings, providers, fake_prolific)
    fake_prolific.pay_later = True  # Prolific pays asynchronously, minutes later
    with pytest.raises(RuntimeError), session_scope(settings.database_url) as s:
        bonus = s.get(Bonus, bonus_id)
        providers.get("prolific").pay_bonus(s, bonus, s.get(Worker, bonus.worker_id),
                                            s.get(Assignment, bonus.assignment_id))
        raise RuntimeError("the worker died before recording the payment")
    settings.prolific_bonus_unknown_after_seconds = 0
    claimed_ago(settings, bonus_id, timedelta(days=2))
    [stuck] = sync.stuck_bonuses(settings)
    assert stuck.cause == "accepted" and stuck.releasable_from is None
    assert "--settle only" in cli(settings, "bonuses").output
    refused = cli(settings, "bonuses", "--release", str(bonus_id), "--by", "ana")
    assert refused.exit_code == 1 and "Prolific accepted its pay call" in refused.output
    fake_prolific.settle_payments()  # the payment lands
    round_of_beat(settings, providers)
    assert fake_prolific.paid(submission_id) == [8] and pay_calls(fake_prolific) == 1
    with session_scope(settings.database_url) as s:
        assert s.get(Bonus, bonus_id).status == BonusStatus.paid


def claimed_ago(settings: Settings, bonus_id: int, ago: timedelta) -> None:
    """The bonus was claimed for payment ``ago``."""
    with session_scope(settings.database_url) as s:
        bonus = s.get(Bonus, bonus_id)
        bonus.pay_claimed_at = utcnow() - ago - timedelta(seconds=1)
        s.add(bonus)


def test_a_person_releases_a_stuck_bonus_on_the_dashboard_and_it_is_paid_once(
        settings, providers, fake_prolific, client):
    import re

    from turkflow.requesters import create_requester

    bonus_id, submission_id = bonus_on_a_turn(settings, providers, fake_prolific)
    fake_prolific.lose_pays = 1
    with pytest.raises(api.ProlificError):
        pipeline.pay_bonus(settings, providers, bonus_id)
    settings.prolific_bonus_unknown_after_seconds = 0
    claimed_ago(settings, bonus_id, sync.PAYS_WITHIN)
    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")  # the first: an admin
        create_requester(s, "bea", "correct horse")  # a requester the batch does not belong to

    def signed_in(client, username):  # noqa: ANN001, ANN202
        login = client.get("/admin/login").get_data(as_text=True)
        token = re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', login).group(1)
        client.post("/admin/login", data={"csrf_token": token, "username": username, "password": "correct horse"})
        return re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"',
                         client.get("/admin/prolific/bonuses").get_data(as_text=True)).group(1)

    bea = client.application.test_client()
    token = signed_in(bea, "bea")
    assert "No bonus waits for you" in bea.get("/admin/prolific/bonuses").get_data(as_text=True)
    assert bea.post(f"/admin/prolific/bonuses/{bonus_id}/release", data={"csrf_token": token}).status_code == 404
    assert pay_calls(fake_prolific) == 1  # nothing paid for her
    signed_in(client, "ada")

    page = client.get("/admin/prolific/bonuses").get_data(as_text=True)
    assert f'id="bonus-{bonus_id}"' in page and submission_id in page and "500" in page
    token = re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', page).group(1)
    done = client.post(f"/admin/prolific/bonuses/{bonus_id}/release", data={"csrf_token": token})
    assert done.status_code == 302
    assert fake_prolific.paid(submission_id) == [8] and pay_calls(fake_prolific) == 2  # the lost one, and this
    assert "No bonus waits for you" in client.get("/admin/prolific/bonuses").get_data(as_text=True)
    with session_scope(settings.database_url) as s:
        assert s.get(Bonus, bonus_id).status == BonusStatus.paid
        assert s.exec(select(Event).where(Event.kind == "prolific_bonus_released")).one().actor == "requester:ada"


# ---- the whole collection, simulated -----------------------------------------------------------------------


def test_a_simulated_prolific_batch_with_time_outs_and_a_lost_pay_pays_every_turn_once(tmp_path, sqlite_url,
                                                                                       fake_prolific):
    from tests.test_simulator_prolific import SMALL
    from turkflow.simulator.run import run_with_stack

    settings = Settings(data_dir=tmp_path, database_url=sqlite_url, secret_key="test", worker_hash_key="test")
    config = SMALL.__class__(**{**SMALL.__dict__, "prolific_time_outs": 0.3, "prolific_lost_pays": 1})
    report = run_with_stack(settings, tmp_path, config, web_workers=2, web_threads=2, prolific_fake=fake_prolific)

    paid = report["reproducible"]["prolific_settlement"]
    assert paid["turns_timed_out_after_writing"] >= 1
    assert paid["turns_paid_once"] == paid["turns_stored"] == report["reproducible"]["turns"]["stored"] > 0
    assert paid["turns_paid_more_than_once"] == paid["turns_unpaid"] == 0
    outcomes = paid["bonuses_by_outcome"]
    assert set(outcomes) <= {"paid once", "left for a person"} and outcomes.get("left for a person", 0) >= 1
    assert sum(outcomes.values()) == paid["bonuses"]
    left = report["prolific_left_for_a_person"]
    assert len(left) == outcomes["left for a person"] and all("500" in b["reason"] for b in left)
    payments = [(p.bulk_id, p.submission_id) for p in fake_prolific.payments]
    assert len(payments) == len(set(payments))  # nothing paid twice on Prolific
