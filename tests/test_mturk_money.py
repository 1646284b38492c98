"""Money (MTurk's fees, estimates, actual spend) and onboarding (the quiz, its MTurk test, the local page)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

import pytest
from sqlmodel import select

from tests.test_mturk import (  # noqa: F401 - fixtures
    expect_create_hit,
    launch,
    mturk_client,
    mturk_id,
    mturk_providers,
    mturk_settings,
    publish,
    stubber,
    submitted,
)
from turkflow.db import session_scope
from turkflow.hits import money, onboarding
from turkflow.hits.mturk import qualifications
from turkflow.invites import invite_url
from turkflow.models import Assignment, AssignmentStatus, Worker


@pytest.mark.parametrize("amount, assignments, fee", [
    (20, 1, 4),      # 20% of the $0.20 reward
    (8, 1, 2),       # 20% of an $0.08 bonus is 1.6 cents, rounded half up
    (2, 1, 1),       # at least $0.01 per assignment or bonus
    (20, 10, 8),     # HITs with 10 or more assignments pay another 20% on rewards
    (1000, 1, 200),
])
def test_mturk_fee_is_20_percent_at_least_one_cent(amount, assignments, fee):
    assert money.fee_cents("mturk", amount, assignments) == fee
    assert money.fee_cents("local", amount, assignments) == 0


def test_currency_amounts_are_mturk_strings():
    assert [money.usd(c) for c in (0, 8, 20, 1234)] == ["0.00", "0.08", "0.20", "12.34"]
    assert money.cents_from_usd("10000.00") == 1_000_000
    with pytest.raises(ValueError):
        money.usd(-1)


def test_estimate_is_the_most_a_batch_can_cost_and_says_why():
    cost = money.estimate("mturk", conversations=10, max_turns=20, reward_cents=20, bonus_cents=8)
    assert (cost.turns, cost.rewards_cents, cost.bonuses_cents, cost.fees_cents) == (200, 4000, 1600, 1200)
    assert cost.total_cents == 6800
    assert "20 turns per conversation (the maximum; a conversation may end earlier)" in cost.assumptions  # any protocol
    assert any("MTurk fee" in a for a in cost.assumptions)
    expected = money.estimate("mturk", 10, 20, 20, 8, turns_per_conversation=12, bonus_share=0.25)
    assert (expected.turns, expected.bonuses, expected.total_cents) == (120, 30, 120 * 24 + 30 * 10)
    assert money.estimate("local", 10, 20, 20, 8).fees_cents == 0


def test_estimate_stops_where_the_budget_stops_the_batch():
    cost = money.estimate("mturk", conversations=10, max_turns=20, reward_cents=20, bonus_cents=8, budget_cents=1400)
    assert cost.turns == 50 and cost.rewards_cents + cost.bonuses_cents == 1400
    assert any("budget" in a for a in cost.assumptions)


def test_spend_per_batch_worker_and_turn(mturk_settings, mturk_providers, stubber):
    batch_id, hit_ids = launch(mturk_settings, conversations=2)
    turns = []
    for n, hit_id in enumerate(hit_ids, 1):
        expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", n))
        publish(mturk_settings, mturk_providers, hit_id)
        turns.append(submitted(mturk_settings, hit_id, mturk_id("3ASG", n), f"AWORKER{n}"))
    with session_scope(mturk_settings.database_url) as s:
        first = s.exec(select(Assignment).where(Assignment.external_id == mturk_id("3ASG", 1))).one()
        first.status = AssignmentStatus.approved
        s.add(first)
        s.flush()
        assert money.spend(s, batch_id=batch_id) == money.Spend(rewards_cents=20, fees_cents=4, pending_cents=24)
        assert money.spend(s, worker_id=first.worker_id).total_cents == 24
        assert money.spend(s, turn_id=turns[1]) == money.Spend(pending_cents=24)
        assert money.spend(s, batch_id=batch_id + 1) == money.Spend()
    stubber.assert_no_pending_responses()


# ---- onboarding ---------------------------------------------------------------------------------------


def test_the_quiz_passes_at_the_pass_mark_and_names_wrong_answers():
    quiz = onboarding.quiz_for("teacher")
    right = {q.name: q.answer for q in quiz.questions}
    assert onboarding.grade(quiz, right, 80) == onboarding.Grade(score=100, passed=True, wrong=[])
    one_wrong = dict(right, share="paste")
    assert onboarding.grade(quiz, one_wrong, 80) == onboarding.Grade(score=80, passed=True, wrong=["share"])
    two_wrong = dict(one_wrong, words="copy")
    assert onboarding.grade(quiz, two_wrong, 80).passed is False
    with pytest.raises(ValueError, match="no onboarding quiz"):
        onboarding.quiz_for("wizard")


@pytest.mark.parametrize("role", ["student", "teacher"])
def test_the_mturk_test_and_answer_key_are_the_same_quiz(role):
    quiz = onboarding.quiz_for(role)
    ns = {"q": qualifications.QUESTION_FORM_NS, "k": qualifications.ANSWER_KEY_NS}
    form = ElementTree.fromstring(qualifications.question_form_xml(quiz))
    key = ElementTree.fromstring(qualifications.answer_key_xml(quiz))
    asked = [(q.findtext("q:QuestionIdentifier", namespaces=ns),
              [s.text for s in q.findall(".//q:SelectionIdentifier", ns)]) for q in form.findall("q:Question", ns)]
    assert asked == [(q.name, [key for key, _ in q.options]) for q in quiz.questions]
    keyed = {q.findtext("k:QuestionIdentifier", namespaces=ns): q.findtext(".//k:SelectionIdentifier", namespaces=ns)
             for q in key.findall("k:Question", ns)}
    assert keyed == {q.name: q.answer for q in quiz.questions}
    assert key.findtext(".//k:MaximumSummedScore", namespaces=ns) == str(len(quiz.questions))


def test_a_local_worker_passes_the_onboarding_page(settings, client):
    with session_scope(settings.database_url) as s:
        worker = Worker(external_id="local-new", role="student")
        s.add(worker)
        s.flush()
        link = invite_url(settings.secret_key, "", worker)
    client.get(link)
    page = client.get("/onboarding")
    assert page.status_code == 200 and "Student onboarding" in page.get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.get_data(as_text=True)).group(1)
    quiz = onboarding.quiz_for("student")
    wrong = client.post("/onboarding",
                        data={"csrf_token": token, **{q.name: q.options[-1][0] for q in quiz.questions}})
    assert wrong.status_code == 200 and re.search(r"You scored \d+%", wrong.get_data(as_text=True))
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Worker)).one().onboarded is False
    passed = client.post("/onboarding", data={"csrf_token": token, **{q.name: q.answer for q in quiz.questions}})
    assert passed.status_code == 303 and passed.headers["Location"].endswith("/queue")
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Worker)).one().onboarded is True


def test_the_onboarding_page_needs_a_joined_worker(client):
    assert client.get("/onboarding").status_code == 403
