"""Prolific's money rules: its service fee in estimates, spend and the budget cap, and the least reward
Prolific allows at the estimated minutes per turn."""

from __future__ import annotations

from sqlmodel import select

from turkflow.db import session_scope
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.hits import lifecycle, money
from turkflow.models import Assignment, AssignmentStatus, HitStatus, Task, Worker


def test_the_estimate_adds_prolifics_service_fee_on_rewards_and_bonuses():
    cost = money.estimate("prolific", 2, 6, 20, 8, fee_percent=33.33)
    assert (cost.turns, cost.rewards_cents, cost.bonuses_cents) == (12, 240, 96)
    assert cost.fees_cents == 112  # 33.33% of 336 cents, rounded once on the total (not 6.67 and 2.67 a turn)
    assert any("33.33%" in line and "pricing page" in line for line in cost.assumptions)
    assert money.estimate("local", 2, 6, 20, 8, fee_percent=33.33).fees_cents == 0


def test_a_prolific_budget_covers_the_service_fee_too():
    cost = money.estimate("prolific", 10, 40, 20, 8, fee_percent=50, budget_cents=4200)
    assert cost.turns == 100  # 28 cents a turn with its bonus, 42 with the fee
    assert cost.total_cents <= 4200


def test_the_least_reward_is_the_hourly_minimum_at_the_estimated_minutes():
    assert money.least_reward_cents(800, 3) == 40
    assert money.least_reward_cents(600, 2) == 20
    assert money.least_reward_cents(800, 7) == 94  # 93.3 cents, rounded up


def test_a_running_prolific_batch_counts_the_fee_in_its_budget_and_its_spend(sqlite_url):
    with session_scope(sqlite_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), 2, name="p", provider="prolific",
                                             reward_cents=20, budget_cents=60)
        batch.fee_percent = 50.0
        worker = Worker(external_id="prolific:p1", role="student", onboarded=True)
        s.add(worker)
        s.flush()
        hits[0].status = HitStatus.submitted
        s.add(Assignment(hit_id=hits[0].id, worker_id=worker.id, external_id="submission-1",
                         status=AssignmentStatus.approved))
        batch_id = batch.id
    with session_scope(sqlite_url) as s:
        assert lifecycle.committed_cents(s, batch_id) == 2 * 30  # two first turns with the fee: no third
        spent = money.spend(s, batch_id=batch_id)
        assert (spent.rewards_cents, spent.fees_cents, spent.total_cents) == (20, 10, 30)
