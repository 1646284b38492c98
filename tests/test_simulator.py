"""The crowd simulator: seeded crowds and scripts, the policy replay, and small simulations through the
real stack (a live web server, the real Celery worker, Redis, SQLite and PostgreSQL)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlmodel import col, select

from tests.conftest import SHARED_DATA
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.hits import money
from turkflow.models import Batch, Bonus, Conversation, Rating, Turn, TurnStatus, Worker, WorkerStatus
from turkflow.quality.monitor import POOLED, Policy, PolicyError
from turkflow.simulator.crowd import Behaviour, Written, build_crowd, revise
from turkflow.simulator.policies import RatingRecord, replay
from turkflow.simulator.run import SimulationConfig, run_with_stack
from turkflow.simulator.utterances import read_dialogs, write_scripts

DIALOGS = SHARED_DATA / "sgd" / "dev"


@pytest.fixture(scope="module")
def dialogs():
    return read_dialogs(DIALOGS)


def test_crowd_gets_exact_behaviour_shares_per_role():
    crowd = build_crowd(20, 10, {Behaviour.spammer: 0.15, Behaviour.careless: 0.10}, seed=7)
    by_role = Counter((w.role, w.behaviour) for w in crowd)
    assert by_role[("student", Behaviour.spammer)] == 3 and by_role[("student", Behaviour.careless)] == 2
    assert by_role[("teacher", Behaviour.spammer)] == 2 and by_role[("teacher", Behaviour.careless)] == 1
    assert by_role[("student", Behaviour.honest)] == 15 and by_role[("teacher", Behaviour.honest)] == 7
    assert all(0.0 <= w.quality <= 0.10 for w in crowd if w.behaviour == Behaviour.spammer)


def test_same_seed_draws_the_same_crowd_and_scripts_and_another_seed_does_not(dialogs):
    mix = {Behaviour.spammer: 0.3, Behaviour.lazy: 0.2}
    assert build_crowd(10, 10, mix, seed=3) == build_crowd(10, 10, mix, seed=3)
    assert build_crowd(10, 10, mix, seed=3) != build_crowd(10, 10, mix, seed=4)
    assert write_scripts(dialogs, 5, seed=3) == write_scripts(dialogs, 5, seed=3)
    assert write_scripts(dialogs, 5, seed=3) != write_scripts(dialogs, 5, seed=4)


def test_scripts_replay_sgd_user_lines_for_students_and_system_lines_for_teachers(dialogs):
    script = write_scripts(dialogs, 1, seed=1)[0]
    first = next(d for d in dialogs if d.dialogue_id == script.dialogue_ids[0])
    assert script.utterance("student", 0) == first.user[0]
    assert script.utterance("teacher", 1) == first.system[0]
    assert script.utterance("student", 2) == first.user[1]
    assert script.length == 2 * min(len(first.user), len(first.system))
    assert script.stops_at(script.length - 2) and not script.stops_at(0)


def test_scripts_with_a_mean_length_chain_dialogs_around_that_mean(dialogs):
    scripts = write_scripts(dialogs, 200, seed=2, mean_turns=33)
    lengths = [s.length for s in scripts]
    assert all(length % 2 == 0 for length in lengths)
    assert 30 <= sum(lengths) / len(lengths) <= 36
    assert any(len(s.dialogue_ids) > 1 for s in scripts)
    assert all(len(s.student) == s.length // 2 for s in scripts)


def test_a_refused_text_answer_is_written_out_in_full_and_other_refusals_are_left_alone():
    written = Written(form={"response": "2", "intent": "request_step", "danger": []}, good=True,
                      rated_relevant=None, rated_useful=None)
    revised = revise(written, "response")
    assert revised.form["response"].startswith("2") and len(revised.form["response"]) > 2
    assert revised.form["intent"] == "request_step" and written.form["response"] == "2"
    assert revise(written, "danger") is None and revise(written, None) is None


def test_replay_blocks_after_a_full_window_of_low_ratings_and_not_before():
    policy = Policy(window=5, block_below=0.5)
    bad = [RatingRecord("a", False, False)] * 5
    assert replay(policy, bad[:4]).blocked_after == {}
    assert replay(policy, bad).blocked_after == {"a": 5}
    mostly_good = [RatingRecord("b", r, True) for r in (True, False, True, False, True, True)]
    assert replay(policy, mostly_good).blocked_after == {}


def test_staged_policy_switches_to_its_long_window_after_probation():
    policy = Policy.parse("k=5,p=0.4 for 6, then k=20,p=0.4")
    spam = [RatingRecord("spammer", False, False)] * 5
    assert replay(policy, spam).blocked_after == {"spammer": 5}
    unlucky = [RatingRecord("honest", True, True)] * 6 + [RatingRecord("honest", False, False)] * 5
    assert replay(policy, unlucky).blocked_after == {}  # k=5,p=0.4 alone would block at the 11th
    assert replay(Policy.parse("k=5,p=0.4"), unlucky).blocked_after == {"honest": 10}
    assert replay(Policy.parse("none"), spam * 3).blocked_after == {}


def test_pooled_policy_blocks_on_the_mean_of_both_ratings_where_the_papers_rule_blocks_on_either():
    # Relevant but rarely useful: usefulness alone is below 0.5, relevance and usefulness together are not.
    relevant_not_useful = [RatingRecord("r", True, u) for u in (False, False, True, False, True, False)]
    assert replay(Policy.parse("k=6,p=0.5"), relevant_not_useful).blocked_after == {"r": 6}
    assert replay(Policy.parse("pooled k=6,p=0.5"), relevant_not_useful).blocked_after == {}
    spam = [RatingRecord("s", r, u) for r, u in ((False, True), (False, False), (True, False), (False, False),
                                                 (False, False), (False, True))]
    assert replay(Policy.parse("pooled k=6,p=0.5"), spam).blocked_after == {"s": 6}
    staged = Policy.parse("pooled k=6,p=0.5 for 6, then k=20,p=0.4")
    assert staged.text == "pooled k=6,p=0.5 for 6, then k=20,p=0.4"
    # After probation the long window blocks, but bonuses are still judged over the last 6 ratings.
    good = [RatingRecord("g", True, True)] * 8
    assert replay(staged, good).bonus_turns == {"g": 3}  # the 6th, 7th and 8th rated turns
    assert staged.stage(6).window == 6 and staged.stage(7).window == 20 and staged.stage(7).rule == POOLED


def test_policy_text_is_parsed_and_bad_text_names_the_form():
    assert Policy.parse("k=6,p=0.4") == Policy(window=6, block_below=0.4)
    assert Policy.parse("k=5,p=0.4 for 6, then k=20,p=0.4").text == "k=5,p=0.4 for 6, then k=20,p=0.4"
    with pytest.raises(ValueError, match="k=5,p=0.5"):
        Policy.parse("window 5")
    with pytest.raises(PolicyError, match="k must be"):
        Policy.parse("k=0,p=0.5")
    with pytest.raises(PolicyError, match="k must be"):
        Policy.parse("k=5,p=0.5 for 6, then k=20,p=1.5")


SMALL = SimulationConfig(students=3, teachers=3, conversations=4, max_turns=12, mean_turns=12,
                         mix={"spammer": 0.34}, seed=11, concurrency=4, dialogs=DIALOGS, settle_timeout=30)


def simulate_on_own_stack(work: Path, database_url: str) -> tuple[dict, Settings]:
    """SMALL on a stack of its own as `turkflow simulate` starts it (redis-server, gunicorn, a prefork Celery
    worker). On the session's shared in-process test worker a worker was now and then blocked mid-round in
    the full suite (never alone, never on a real stack): state left by earlier tests."""
    settings = Settings(data_dir=work, database_url=database_url, secret_key="test", worker_hash_key="test")
    return run_with_stack(settings, work, SMALL, web_workers=2, web_threads=2), settings


@pytest.fixture(scope="module")
def small_run(module_database_url, tmp_path_factory) -> tuple[dict, Settings]:
    """SMALL once per backend, read by the tests below (each run through the stack costs half a minute)."""
    return simulate_on_own_stack(tmp_path_factory.mktemp("small"), module_database_url)


def test_simulation_report_counts_equal_the_database(small_run):
    report, settings = small_run
    done = report["reproducible"]
    with session_scope(settings.database_url) as s:
        batch_id = s.exec(select(Batch.id).order_by(col(Batch.id).desc())).first()
        turns = s.exec(
            select(Turn).join(Conversation, Conversation.id == Turn.conversation_id)
            .where(Conversation.batch_id == batch_id, Turn.status == TurnStatus.submitted)
        ).all()
        names = {w.id: w.name for w in s.exec(select(Worker))}
        ratings = s.exec(select(func.count()).select_from(Rating)).one()
        blocked = s.exec(select(func.count()).select_from(Worker).where(Worker.status != WorkerStatus.active)).one()
        bonus_cents = s.exec(select(func.coalesce(func.sum(Bonus.amount_cents), 0))).one()
        fee = settings.prolific_fee_percent
        bonus_fees = sum(money.fee_cents("prolific", bonus.amount_cents, fee_percent=fee)
                         for bonus in s.exec(select(Bonus)))
        completed = s.exec(select(func.count()).select_from(Conversation)
                           .where(Conversation.batch_id == batch_id, Conversation.status == "completed")).one()

    assert done["turns"]["stored"] == done["turns"]["confirmed"] == len(turns) == 48
    assert done["turns"]["lost"] == done["turns"]["unexpected"] == done["turns"]["history_mismatches"] == 0
    assert done["conversations"]["completed"] == completed == 4
    assert done["ratings"] == ratings == 44  # every turn but each conversation's first rates its predecessor
    assert sum(row["blocked"] for row in done["crowd"].values()) == done["monitor"]["blocked"] == blocked
    assert done["money"]["rewards_cents"] == 20 * len(turns)
    assert done["money"]["bonuses_cents"] == bonus_cents
    assert done["money"]["fees_cents"] == len(turns) * 7 + bonus_fees  # Prolific's 33.33% of 20 cents, each
    per_worker = Counter(names[t.worker_id] for t in turns)
    assert sum(per_worker.values()) == sum(row["turns"] for row in done["crowd"].values())
    assert done["monitor"]["replay_agrees_with_live_monitor"]
    assert report["measured"]["http"]["errors"] == {}
    assert report["measured"]["submit_to_next_hit_open_ms"]["server"]["n"] == len(turns) - 4


def test_same_seed_gives_the_same_report(small_run, tmp_path, another_database_url):
    """SMALL again, on a fresh database of the same backend, reports what the module's run reported."""
    (first, _), (second, _) = small_run, simulate_on_own_stack(tmp_path, another_database_url)
    assert first["reproducible"]["monitor"]["blocked"] >= 1  # the spammers give the monitor work to do
    assert first["reproducible"] == second["reproducible"]
    assert first["parameters"] == second["parameters"]
