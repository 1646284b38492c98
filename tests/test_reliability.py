"""The trust model on rating streams whose raters' quality is known, the weighted rule, the machine-written
rule, and the replay that judges them (turkflow.quality.reliability, monitor, simulator.policies)."""

from __future__ import annotations

import random

import pytest

from turkflow.quality import reliability
from turkflow.quality.monitor import LEARN_FROM, NAMED_POLICIES, Policy, decide, judge_typing, machine_written
from turkflow.simulator.crowd import Behaviour, SimWorker
from turkflow.simulator.policies import RatingRecord, TurnRecord, compare, replay

MODEL = reliability.Model()


def _stream(seed: int, raters: dict[str, str], authors: dict[str, float], ratings: int) -> list[RatingRecord]:
    """``ratings`` ratings, each of a random author by a random rater: attentive raters answer the truth about
    the turn (drawn from the author's quality) with a 5% slip per question, careless ones flip coins, harsh
    ones say no/no."""
    rng = random.Random(seed)
    stream = []
    for _ in range(ratings):
        rater, kind = rng.choice(sorted(raters.items()))
        author = rng.choice(sorted(authors))
        good = rng.random() < authors[author]
        if kind == "attentive":
            answer = tuple(good if rng.random() >= 0.05 else not good for _ in range(2))
        elif kind == "careless":
            answer = (rng.random() < 0.5, rng.random() < 0.5)
        else:
            answer = (False, False)
        stream.append(RatingRecord(author, *answer, rater=rater))
    return stream


def _learned(stream: list[RatingRecord]) -> tuple[dict[str, reliability.RaterRecord], dict[str, int]]:
    """Every rater's record after the stream, and after how many of their ratings each was identified."""
    received: dict[str, list[RatingRecord]] = {}
    records: dict[str, reliability.RaterRecord] = {}
    identified: dict[str, int] = {}
    for rating in stream:
        earlier = received.setdefault(rating.author, [])
        quality = reliability.author_quality(MODEL, [
            (reliability.answer_of(r.relevant, r.useful), records.get(r.rater, reliability.RaterRecord()).trust(MODEL))
            for r in earlier[-LEARN_FROM:]])
        before = records.get(rating.rater, reliability.RaterRecord())
        records[rating.rater] = reliability.learn(MODEL, before, reliability.answer_of(rating.relevant, rating.useful),
                                                  quality)
        if records[rating.rater].verdict and not before.verdict:
            identified[rating.rater] = records[rating.rater].ratings
        earlier.append(rating)
    return records, identified


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_careless_and_harsh_raters_are_identified_within_twenty_ratings_and_attentive_ones_never(seed):
    raters = {**{f"a{i}": "attentive" for i in range(14)}, "c1": "careless", "c2": "careless", "h1": "harsh"}
    authors = {**{f"good{i}": 0.9 for i in range(12)}, "bad1": 0.05, "bad2": 0.05}
    records, identified = _learned(_stream(seed, raters, authors, ratings=60 * len(raters)))
    assert {r: records[r].verdict for r in identified} == {"c1": "careless", "c2": "careless", "h1": "harsh"}
    assert all(identified[r] <= 20 for r in identified), identified
    assert all(records[f"a{i}"].trust(MODEL) > 0.9 for i in range(14))
    assert all(records[r].trust(MODEL) == 0.0 for r in identified)  # their ratings stop counting


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_attentive_rater_who_only_meets_spammers_is_not_taken_for_harsh(seed):
    """No/no to authors whom the other raters rate low is the truth, not harshness."""
    raters = {f"a{i}": "attentive" for i in range(14)}
    authors = {**{f"good{i}": 0.9 for i in range(12)}, "bad1": 0.05, "bad2": 0.05}
    crowd = _stream(seed, raters, authors, ratings=600)
    unlucky = _stream(seed + 100, {"unlucky": "attentive"}, {"bad1": 0.05, "bad2": 0.05}, ratings=30)
    stream = [r for chunk in range(30) for r in crowd[chunk * 20:(chunk + 1) * 20] + [unlucky[chunk]]]
    records, identified = _learned(stream + [RatingRecord("good0", True, True, rater="unlucky")])
    assert identified == {}  # their no/no weighs little while it might be harshness, and is never a verdict
    assert records["unlucky"].trust(MODEL) > 0.5  # one yes/yes to a well-rated author and they are trusted


def test_split_answers_are_the_careless_raters_tell():
    """One rating each: yes/no about a good author's turn is far likelier from a coin than from an attentive
    rater, yes/yes far less."""
    fresh = reliability.RaterRecord()
    split = reliability.learn(MODEL, fresh, reliability.answer_of(True, False), quality=0.9)
    agreed = reliability.learn(MODEL, fresh, reliability.answer_of(True, True), quality=0.9)
    assert split.careless > 1.0 > 0 > agreed.careless
    assert split.trust(MODEL) < fresh.trust(MODEL) < agreed.trust(MODEL)


def test_the_weighted_rule_does_not_count_identified_raters_and_waits_for_trusted_ratings():
    policy = Policy.parse("weighted k=4,p=0.4")
    no = [False] * 4
    assert decide(policy, no, no, [1.0] * 4)[0] == "block"
    assert decide(policy, no, no, [0.0, 0.0, 0.0, 1.0])[0] == "none"  # one trusted rating is not a window
    # two trusted yes/yes outweigh two no/no from raters trusted a tenth as much
    outcome, rel, use = decide(policy, [True, True, False, False], [True, True, False, False], [1, 1, 0.1, 0.1])
    assert outcome != "block" and rel == use == pytest.approx(2 / 2.2)
    # the paper's rule ignores trust
    assert decide(Policy.parse("paper"), [False] * 4 + [True], [False] * 5, [0.0] * 5)[0] == "block"


def test_the_recommended_policy_is_named_weighted_with_the_machine_written_rule_and_round_trips():
    policy = Policy.parse("recommended")
    assert policy.weighted and policy.typed_block == 2 and policy.typed_window == 6
    assert policy.name == "recommended" and Policy.parse(policy.text) == policy
    assert NAMED_POLICIES["paper"] == Policy.parse("paper").text == "k=5,p=0.5"
    assert Policy.parse("pooled k=6,p=0.5, not typed 3 of 6").typed_block == 3


def test_a_paste_counts_as_machine_written_and_a_phone_keyboard_does_not():
    text = "I would get the things out and start with the first step."
    pasted = {"page_ms": 30_000, "first_key_ms": None, "keys": 0, "pastes": 1, "drops": 0, "blurs": 1}
    phone = {"page_ms": 40_000, "first_key_ms": 5_000, "keys": int(0.45 * len(text)), "pastes": 0, "drops": 0,
             "blurs": 0}
    assert machine_written(["not_typed"], text, pasted, 0.2)
    assert not machine_written(["not_typed"], text, phone, 0.2)  # flagged, but word completion, not a paste
    assert not machine_written([], text, pasted, 0.2)  # the flag decides; the keystrokes only weigh it
    policy = Policy.parse("k=5,p=0.5, not typed 2 of 6")
    assert not judge_typing(policy, [True, False, False, False, False, False])
    assert judge_typing(policy, [False, True, False, False, True])
    assert not judge_typing(Policy.parse("paper"), [True] * 6)


def _worker(name: str, behaviour: Behaviour) -> SimWorker:
    return SimWorker(name=name, role="teacher", behaviour=behaviour, quality=0.9)


def test_replay_sends_a_paster_to_review_on_their_second_pasted_turn_and_reports_the_shares():
    crowd = [_worker("paster", Behaviour.paster), _worker("honest", Behaviour.honest),
             _worker("careless", Behaviour.careless)]
    stream = [TurnRecord("honest"), TurnRecord("paster", machine_written=True),
              TurnRecord("honest", rating=RatingRecord("paster", True, True, "honest")),
              TurnRecord("paster", machine_written=False), TurnRecord("paster", machine_written=True)]
    outcome = replay(Policy.parse("recommended"), stream)
    assert outcome.blocked_written == {"paster": 3} and outcome.written["paster"] == 3
    paper, recommended = compare(crowd, stream, [Policy.parse("paper"), Policy.parse("recommended")],
                                 reward_cents=20)
    assert paper.pasters_caught_early == 0 and recommended.pasters_caught_early_share == 1.0
    assert recommended.honest_blocked == 0 and recommended.careless_raters == 1
    assert recommended.share_paid_to_spammers_and_pasters == pytest.approx(60 / 100)


def test_simulate_with_pasters_and_harsh_raters_reports_the_new_shares_end_to_end(tmp_path):
    """`turkflow simulate --pasters --harsh` at a small size, through the real stack, live on the recommended
    policy: the pasters go to review within a few written turns, and the report says so for every policy."""
    import json

    from click.testing import CliRunner

    from turkflow.cli.main import main

    out = tmp_path / "report.json"
    env = {"TURKFLOW_DATA_DIR": str(tmp_path / "var"), "TURKFLOW_DATABASE_URL": ""}
    result = CliRunner().invoke(main, [
        "simulate", "--conversations", "4", "--students", "4", "--teachers", "4", "--max-turns", "12",
        "--mean-turns", "10", "--spammers", "0.25", "--careless", "0.25", "--harsh", "0.25", "--pasters", "0.25",
        "--policy", "recommended", "--compare", "paper", "--seed", "5", "--web-workers", "2", "--web-threads", "2",
        "--run-dir", str(tmp_path / "run"), "--json", str(out)], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["parameters"]["mix"] == {"spammer": 0.25, "lazy": 0.0, "careless": 0.25, "harsh": 0.25,
                                           "paster": 0.25}
    done = report["reproducible"]
    monitor = done["monitor"]
    assert monitor["policy"] == Policy.parse("recommended").text
    assert done["crowd"]["paster"]["workers"] == 2 and done["crowd"]["harsh"]["workers"] == 2
    assert monitor["pasters"] == 2 and monitor["pasters_caught_early_share"] == 1.0
    assert monitor["careless_raters"] == 4 and "careless_detected_share" in monitor
    assert {"honest_blocked_share", "spammers_blocked_early_share"} <= set(monitor)
    assert 0 <= done["money"]["share_paid_to_spammers_and_pasters"] < 1
    paper, = [e for e in done["policies"] if e["policy"] == "k=5,p=0.5"]
    assert paper["pasters_caught_early"] == 0  # the paper's rule never looks at how turns were written
    assert done["turns"]["lost"] == 0 and monitor["replay_agrees_with_live_monitor"]
