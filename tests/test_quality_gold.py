"""Gold turns at onboarding give raters a record before the batch, and the sequential test judges writers on
trust-weighted ratings (turkflow.quality.gold, reliability, monitor; issue 25)."""

from __future__ import annotations

import random
from urllib.parse import urlsplit

import pytest
from sqlmodel import select

from tests.quality_factories import STUDENT_LINES, TEACHER_LINES, Crowd
from turkflow.db import session_scope
from turkflow.hits import onboarding
from turkflow.models import Batch, Event, QualityDecision, RaterReliability, Worker, WorkerStatus
from turkflow.quality import gold, reliability
from turkflow.quality.monitor import NAMED_POLICIES, SPRT, Policy, PolicyError, decide, sequential_evidence
from turkflow.simulator.crowd import PROFILES, Behaviour, SimWorker, answer_gold
from turkflow.simulator.policies import RatingRecord, TurnRecord, gold_records, replay

MODEL = reliability.Model()
FRESH = reliability.RaterRecord()


def _key(role: str) -> dict[str, tuple[bool, bool]]:
    """The gold answers an attentive rater gives: yes/yes to the good turns, no/no to the bad ones."""
    return {item.name: (item.good, item.good) for item in gold.gold_for(role)}


def _random(role: str, seed: int) -> dict[str, tuple[bool, bool]]:
    rng = random.Random(seed)
    return {item.name: (rng.random() < 0.5, rng.random() < 0.5) for item in gold.gold_for(role)}


# ---- the trust model on gold answers --------------------------------------------------------------------


def test_gold_answers_as_the_key_trust_a_rater_more_than_the_prior_and_are_not_counted_as_ratings():
    learned = gold.teach(MODEL, FRESH, "student", _key("student"))
    assert learned.gold == len(gold.gold_for("student")) and learned.ratings == 0 and learned.verdict is None
    assert FRESH.trust(MODEL) == pytest.approx(0.8) and learned.trust(MODEL) > 0.999
    one_slip = gold.teach(MODEL, FRESH, "student", {**_key("student"), "t1": (True, False)})
    assert 0.99 < one_slip.trust(MODEL) < learned.trust(MODEL)  # a slip costs little


def test_no_no_to_good_gold_turns_identifies_a_harsh_rater_before_they_rate_anyone():
    harsh = gold.teach(MODEL, FRESH, "teacher", {item.name: (False, False) for item in gold.gold_for("teacher")})
    assert harsh.verdict == reliability.HARSH and harsh.ratings == 0 and harsh.trust(MODEL) == 0.0


@pytest.mark.parametrize("seed", range(20))
def test_random_gold_answers_leave_a_careless_rater_little_trust_or_identify_them(seed):
    careless = gold.teach(MODEL, FRESH, "student", _random("student", seed))
    assert careless.verdict in (None, reliability.CARELESS)
    assert careless.trust(MODEL) < 0.7  # below the prior of 0.8 whatever the coins say


def test_most_careless_raters_are_identified_by_gold_alone_and_no_attentive_one_is():
    crowd = [SimWorker(f"{behaviour}-{i}", role, behaviour, 0.9) for i in range(200)
             for role, behaviour in (("student", Behaviour.careless), ("teacher", Behaviour.honest))]
    records = gold_records(crowd, {w.name: answer_gold(w, 7) for w in crowd})
    careless = [records[w.name] for w in crowd if w.behaviour == Behaviour.careless]
    attentive = [records[w.name] for w in crowd if w.behaviour == Behaviour.honest]
    assert sum(r.verdict == reliability.CARELESS for r in careless) >= 0.6 * len(careless)
    assert not any(r.verdict for r in attentive)
    assert sum(r.trust(MODEL) for r in careless) / len(careless) < 0.1
    # an attentive rater who slipped on several gold turns starts distrusted; their real ratings restore it
    assert sum(r.trust(MODEL) > 0.9 for r in attentive) >= 0.95 * len(attentive)


def test_the_simulated_crowd_answers_gold_as_its_behaviour_rates_and_the_same_way_every_time():
    harsh = SimWorker("h", "teacher", Behaviour.harsh, 0.9)
    assert set(answer_gold(harsh, 3).values()) == {(False, False)}
    honest = SimWorker("a", "student", Behaviour.honest, 0.9)
    assert answer_gold(honest, 3) == answer_gold(honest, 3)
    assert PROFILES[Behaviour.spammer].rates == "random"  # spammers rate at random, gold included


# ---- the sequential test ----------------------------------------------------------------------------------


def _answers(pairs):
    return [p[0] for p in pairs], [p[1] for p in pairs]


def test_sprt_blocks_a_spammer_at_the_third_trusted_no_and_never_on_careless_noes():
    policy = Policy.parse("sprt k=20,a=0.01,b=0.05")
    trusted = gold.teach(MODEL, FRESH, "student", _key("student")).trust(MODEL)
    careless = gold.teach(MODEL, FRESH, "student", _random("student", 1)).trust(MODEL)
    no = (False, False)
    assert decide(policy, *_answers([no, no]), [trusted] * 2)[0] == "none"
    assert decide(policy, *_answers([no, no, no]), [trusted] * 3)[0] == "block"
    # an honest writer who met one careless rater first, then trusted raters who liked the turns
    yes = (True, True)
    honest = [no] + [yes] * 10
    for n in range(1, len(honest) + 1):
        assert decide(policy, *_answers(honest[:n]), [careless] + [trusted] * (n - 1))[0] != "block"
    # ... and even two careless noes and one trusted no do not block
    assert decide(policy, *_answers([no, no, no]), [careless, careless, trusted])[0] != "block"


def test_sprt_evidence_is_weighted_by_trust_and_an_honest_record_buys_no_unlimited_credit():
    policy = Policy.parse("sprt k=20,a=0.05,b=0.05")
    no, yes = (False, False), (True, True)
    nn = reliability.spammer_evidence(MODEL, reliability.answer_of(False, False))
    assert sequential_evidence(policy, *_answers([no]), [0.5], MODEL) == pytest.approx(0.5 * nn)
    low, high = policy.sprt_bounds
    assert sequential_evidence(policy, *_answers([yes] * 15), [1.0] * 15, MODEL) == pytest.approx(low)
    # a writer who turns to spam after 15 good turns is blocked by the fourth trusted no (counted from the
    # lower bound), not the tenth
    turned = [yes] * 15 + [no] * 4
    assert decide(policy, *_answers(turned[:-1]), [1.0] * 18)[0] == "none"
    assert decide(policy, *_answers(turned), [1.0] * 19)[0] == "block"
    assert high == pytest.approx(2.944, abs=1e-3) and policy.weighted


def test_sprt_policy_text_round_trips_and_is_stored_in_the_batch_columns():
    for text in ("sprt k=20,a=0.05,b=0.05", "sprt k=20,a=0.01,b=0.05, not typed 2 of 6",
                 "sprt k=12,a=0.02,b=0.1, not typed 2 of 6, judged 3 of 6", NAMED_POLICIES["recommended"]):
        policy = Policy.parse(text)
        assert Policy.parse(policy.text) == policy
        assert Policy.of(Batch(name="b", **policy.batch_fields())) == policy
    assert Policy.parse("sprt k=20,a=0.05,b=0.05, not typed 2 of 6").rule == SPRT
    with pytest.raises(PolicyError, match="a and b"):
        Policy.parse("sprt k=20,a=0.6,b=0.5")
    with pytest.raises(PolicyError, match="sprt k=20,a=0.01,b=0.05"):
        Policy.parse("sprt a=0.05")


def test_the_paper_and_probation_policies_are_unchanged():
    assert Policy.parse("paper").text == "k=5,p=0.5"
    assert Policy.parse("probation").text == "pooled k=6,p=0.5 for 6, then k=20,p=0.4"


def test_replay_starts_every_rater_with_their_gold_record():
    crowd = [SimWorker("spam", "teacher", Behaviour.spammer, 0.05),
             SimWorker("c1", "student", Behaviour.careless, 0.9), SimWorker("c2", "student", Behaviour.careless, 0.9),
             SimWorker("a1", "student", Behaviour.honest, 0.9), SimWorker("a2", "student", Behaviour.honest, 0.9)]
    wrong = {i.name: (False, False) if i.good else (True, True) for i in gold.gold_for("student")}
    start = gold_records(crowd, {"c1": wrong, "c2": wrong, "a1": _key("student"), "a2": _key("student")})
    stream = [TurnRecord(rater, rating=RatingRecord("spam", False, False, rater)) for rater in ("c1", "c2", "a1")]
    policy = Policy.parse("sprt k=20,a=0.05,b=0.05")
    with_gold = replay(policy, stream, MODEL, start)
    assert with_gold.blocked_after == {}  # the careless noes count for nothing, one trusted no is not enough
    assert with_gold.identified_after == {"c1": 0, "c2": 0}
    # without gold every rater is trusted as much as anyone at first, so the careless noes block the writer
    assert replay(policy, stream, MODEL).blocked_after == {"spam": 3}
    stream.append(TurnRecord("a2", rating=RatingRecord("spam", False, False, "a2")))
    assert replay(policy, stream, MODEL, start).blocked_after == {"spam": 4}  # the second trusted no


# ---- onboarding through the web -------------------------------------------------------------------------


def _onboarding(app, settings, role: str, name: str):
    from tests.test_worker_pages import invite

    worker, url = invite(settings, role, name, onboarded=False)
    browser = app.test_client()
    browser.get(urlsplit(url).path)
    browser.environ_base["HTTP_X_CSRFTOKEN"] = browser.get(
        "/queue", headers={"Accept": "application/json"}).get_json()["csrf_token"]
    return worker, browser


def _form(role: str, answers: dict[str, tuple[bool, bool]], quiz_right: bool = True) -> dict[str, str]:
    quiz = onboarding.quiz_for(role)
    form = {q.name: q.answer if quiz_right else "wrong" for q in quiz.questions}
    for item in gold.gold_for(role):
        for question, value in zip(("relevant", "useful"), answers[item.name]):
            form[gold.field(item, question)] = "yes" if value else "no"
    return form


def test_onboarding_shows_the_gold_turns_and_their_answers_start_the_raters_record(app, settings):
    worker, browser = _onboarding(app, settings, "student", "Ann")
    page = browser.get("/onboarding").get_data(as_text=True)
    assert "Rate a few example turns" in page and "qwe rtz uiop asdf" in page
    assert 'name="gold-t1-relevant"' in page and 'name="gold-t6-useful"' in page
    assert browser.post("/onboarding", data=_form("student", _key("student"))).status_code == 303
    with session_scope(settings.database_url) as s:
        row = s.get(RaterReliability, worker.id)
        assert (row.gold, row.ratings, row.verdict) == (6, 0, None)
        assert reliability.record_of(row).trust(MODEL) > 0.999
        logged = s.exec(select(Event).where(Event.kind == "gold_rated", Event.worker_id == worker.id)).one()
        assert logged.data["gold"]["t2"] == [False, False]
    # a retake after passing does not count the gold answers again
    browser.post("/onboarding", data=_form("student", _key("student")))
    with session_scope(settings.database_url) as s:
        assert s.get(RaterReliability, worker.id).gold == 6


def test_a_harsh_rater_passes_onboarding_but_starts_identified_with_the_evidence(app, settings):
    worker, browser = _onboarding(app, settings, "teacher", "Hal")
    no_no = {item.name: (False, False) for item in gold.gold_for("teacher")}
    answered = browser.post("/onboarding", data=_form("teacher", no_no), headers={"Accept": "application/json"})
    assert answered.status_code == 200
    body = answered.get_json()
    assert body["passed"] and body["rater"]["verdict"] == "harsh" and body["rater"]["gold"] == 6
    with session_scope(settings.database_url) as s:
        assert s.get(Worker, worker.id).onboarded  # gold never fails anyone
        row = s.get(RaterReliability, worker.id)
        assert (row.verdict, row.identified_after) == ("harsh", 0)
        assert s.exec(select(Event).where(Event.kind == "rater_identified", Event.worker_id == worker.id)).one()


def test_gold_answers_are_not_stored_when_the_quiz_fails_and_a_bad_answer_names_its_field(app, settings):
    worker, browser = _onboarding(app, settings, "student", "Bo")
    failed = browser.post("/onboarding", data=_form("student", _key("student"), quiz_right=False))
    assert failed.status_code == 200
    assert 'name="gold-t1-relevant" value="yes" required checked' in failed.get_data(as_text=True)
    form = _form("student", _key("student"))
    form["gold-t3-useful"] = "maybe"
    refused = browser.post("/onboarding", data=form, headers={"Accept": "application/json"})
    assert refused.status_code == 400 and "gold-t3-useful" in refused.get_json()["error"]
    del form["gold-t3-useful"]
    refused = browser.post("/onboarding", data=form, headers={"Accept": "application/json"})
    assert refused.status_code == 400 and "gold-t3-useful" in refused.get_json()["error"]
    with session_scope(settings.database_url) as s:
        assert s.get(RaterReliability, worker.id) is None and not s.get(Worker, worker.id).onboarded


# ---- the live monitor --------------------------------------------------------------------------------------


def test_a_batch_on_the_sequential_test_blocks_a_writer_on_trusted_noes_with_the_evidence(settings, providers):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=4, quality=Policy.parse("sprt k=20,a=0.01,b=0.05").batch_fields())
    teacher = crowd.worker("teacher", "T-spam")
    students = [crowd.worker("student", f"S{i}") for i in range(4)]
    with session_scope(settings.database_url) as s:
        for student in students:
            gold.record_gold(s, student.id, "student", _key("student"), MODEL)
    for i, conversation_id in enumerate(crowd.conversations()[:3]):
        crowd.submit(students[i], conversation_id, STUDENT_LINES[0])
        crowd.submit(teacher, conversation_id, TEACHER_LINES[i])
        crowd.submit(students[i + 1], conversation_id, STUDENT_LINES[1], relevant=False, useful=False)
        with session_scope(settings.database_url) as s:
            status = s.get(Worker, teacher.id).status
        assert status == (WorkerStatus.temporarily_blocked if i == 2 else WorkerStatus.active)
    with session_scope(settings.database_url) as s:
        decision = s.exec(select(QualityDecision).where(QualityDecision.worker_id == teacher.id,
                                                        QualityDecision.outcome == "block")).one()
        assert len(decision.window) == 3 and all(r["trust"] > 0.99 for r in decision.window)
        reason = s.exec(select(Event).where(Event.kind == "worker_blocked", Event.worker_id == teacher.id)).one()
        assert "sequential test" in reason.data["reason"]
