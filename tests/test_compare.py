"""Side by side (issue 38, items 1, 3 and 5): judges compare two finished dialogs of one task from two systems on
the pipeline. The pair is blinded (nothing a judge receives names a system, batch or conversation), balanced
left and right, never shown twice to a judge; known-answer pairs check judges at onboarding and in the work,
and the monitor blocks a judge who always picks one side; the report ranks the systems (CLI and dashboard);
the simulator reports what the issue's targets measure."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from sqlmodel import select

from tests.test_dashboard import sign_in
from tests.test_quality_gold import _onboarding
from tests.test_star_dialog import command
from tests.test_worker_pages import JSON, joined
from turkflow import pipeline
from turkflow.db import session_scope
from turkflow.errors import Conflict
from turkflow.hits import lifecycle, onboarding
from turkflow.models import (
    Batch, Conversation, ConversationStatus, DialogEvent, JudgedSignal, Turn, TurnStatus, Worker, WorkerStatus,
)
from turkflow.protocols.compare import dialog as compare, pairs
from turkflow.quality.monitor import Policy
from turkflow.requesters import create_requester
from turkflow.simulator import compare as sim

QUESTION = "Which assistant would you rather talk to?"


def systems(settings, providers, n: int = 2, dialogs: int = 2) -> list[int]:
    """``n`` Wizard of Tasks batches (the systems), each with ``dialogs`` finished dialogs of one task."""
    with session_scope(settings.database_url) as s:
        return sim.play_systems(s, providers.get("local"), sim.CompareConfig(systems=n, tasks=1, dialogs=dialogs))


def launch(settings, providers, of: list[int], judges: int, *, probation: int = 0, gold_every: int = 0,
           policy: str = "none, judged 3 of 8", strategy: str = pairs.ADAPTIVE) -> int:
    with session_scope(settings.database_url) as s:
        batch, hits = compare.launch(s, of, QUESTION, judges, strategy=strategy, probation=probation,
                                     gold_every=gold_every, name="side by side",
                                     quality=Policy.parse(policy).batch_fields())
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
        return batch.id


def judge(settings, providers, external_id: str, pick) -> tuple[int, dict]:  # noqa: ANN001
    """A judge (made on first use) takes the first unit the queue offers, opens it and sends ``pick(shown)``;
    then the pipeline closes and reviews it, as the Celery task does. Returns the turn and the pair shown."""
    with session_scope(settings.database_url) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == external_id)).first()
        if worker is None:
            worker = Worker(external_id=external_id, role="judge", onboarded=True)
            s.add(worker)
            s.flush()
        hit = lifecycle.open_hits_for(s, worker, limit=1)[0]
        assignment = lifecycle.take_turn(s, worker, hit.id, lease_seconds=60)
        turn = s.get(Turn, hit.turn_id)
        compare.judge_view(s, turn, worker)
        shown = compare.shown(s, turn, worker)
        compare.submit_turn(s, assignment.external_id, worker, {"choice": pick(shown), "response": "Clearer."})
        turn_id = turn.id
    pipeline.after_submission(settings, providers, turn_id)
    return turn_id, shown


def test_a_judge_reads_two_dialogs_of_one_task_from_two_systems_and_nothing_they_receive_names_either(
        settings, providers, app):
    of = systems(settings, providers, n=3)
    batch_id = launch(settings, providers, of, judges=1)
    with session_scope(settings.database_url) as s:
        names = [s.get(Batch, b).name for b in of]  # "system 1", ...: what a leak would show
        texts = {t for t in s.exec(select(Turn.text).join(Conversation, Conversation.id == Turn.conversation_id)
                                   .where(Conversation.batch_id == of[0]))}
    client = joined(app, settings, "judge")
    queue = client.get("/queue").get_data(as_text=True)
    assert "Two dialogs to compare" in queue and QUESTION in queue
    hit_id = client.get("/queue", headers=JSON).get_json()["open"][0]["hit_id"]
    taken = client.post(f"/queue/take/{hit_id}", headers=JSON).get_json()
    page = client.get(taken["turn_url"])
    assert page.status_code == 303 and page.headers["Location"].startswith("/compare/turn/")
    html = client.get(page.headers["Location"]).get_data(as_text=True)
    data = client.get(page.headers["Location"], headers=JSON).get_json()
    assert data["compare"]["question"] == QUESTION and set(data["compare"]) == {"question", "task", "left", "right"}
    assert all(set(said) == {"speaker", "text"} for side in ("left", "right") for said in data["compare"][side])
    assert texts & {said["text"] for said in data["compare"]["left"]}
    for leak in [*names, "people of", "batch", "system", "conversation"]:
        assert leak not in json.dumps(data["compare"]).lower(), leak
        assert leak not in re.sub(r"<[^>]+>", " ", html).lower(), leak
    assert 'id="left-dialog"' in html and 'id="right-dialog"' in html and html.count('class="message') >= 8
    with session_scope(settings.database_url) as s:
        (shown,) = s.exec(select(DialogEvent).where(DialogEvent.action == "shown")).all()
        left, right = (s.get(Conversation, shown.data[side]["conversation"]) for side in ("left", "right"))
        assert left.task_id == right.task_id and left.batch_id != right.batch_id
        assert {left.status, right.status} == {ConversationStatus.completed}

    refused = client.post(page.headers["Location"], data={"choice": "middle", "response": "?"})
    assert refused.status_code == 400 and "choose one of: left, right, tie" in refused.get_data(as_text=True)
    sent = client.post(page.headers["Location"], data={"choice": "right", "response": "It answered the question."})
    assert sent.status_code == 303 and sent.headers["Location"].startswith("/queue?submitted=")
    with session_scope(settings.database_url) as s:
        turn = s.exec(select(Turn).where(Turn.role == "judge", Turn.status == TurnStatus.submitted)).one()
        assert (turn.label, turn.answers["choice"], turn.text) == ("judged", "right", "It answered the question.")
        assert pairs.votes(pairs.judgements(s, batch_id))[0].winner == shown.data["right"]["system"]


def test_pairs_are_balanced_left_and_right_and_a_judge_never_sees_one_twice(settings, providers):
    of = systems(settings, providers, n=2, dialogs=3)  # one pair of systems, 3 x 3 pairs of dialogs
    launch(settings, providers, of, judges=20, strategy=pairs.UNIFORM)
    seen: dict[str, list[frozenset]] = {"ann": [], "bob": []}
    left = Counter()
    for n in range(10):
        who = "ann" if n % 2 == 0 else "bob"
        _, shown = judge(settings, providers, who, lambda shown: "left")
        seen[who].append(frozenset((shown["left"]["conversation"], shown["right"]["conversation"])))
        left[shown["left"]["system"]] += 1
    assert all(len(set(pairs_)) == len(pairs_) for pairs_ in seen.values())
    assert left[pairs.system_of(of[0])] == left[pairs.system_of(of[1])] == 5
    for _ in range(4):
        _, shown = judge(settings, providers, "ann", lambda shown: "tie")
        seen["ann"].append(frozenset((shown["left"]["conversation"], shown["right"]["conversation"])))
    assert len(set(seen["ann"])) == 9  # every pair of dialogs once
    with session_scope(settings.database_url) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == "ann")).one()
        hit = lifecycle.open_hits_for(s, worker, limit=1)[0]
        lifecycle.take_turn(s, worker, hit.id, lease_seconds=60)
        with pytest.raises(Conflict, match="every pair of dialogs"):
            compare.judge_view(s, s.get(Turn, hit.turn_id), worker)


def test_known_answer_pairs_keep_their_unit_open_and_a_judge_who_always_picks_left_is_blocked(
        settings, providers, app):
    of = systems(settings, providers, n=2, dialogs=3)
    batch_id = launch(settings, providers, of, judges=20, probation=4, gold_every=3)
    answers = []
    for _ in range(20):
        turn_id, shown = judge(settings, providers, "lefty", lambda shown: "left")
        answers.append((turn_id, shown.get("gold"), shown.get("expected")))
        with session_scope(settings.database_url) as s:
            if s.exec(select(Worker.status).where(Worker.external_id == "lefty")).one() != WorkerStatus.active:
                break
    golds = [a for a in answers if a[1]]
    assert [a[1] for a in answers[:4]] == [True, False, True, False]  # one before each probation vote
    assert Counter(a[2] for a in golds[:2]) == Counter({"left": 1, "right": 1})  # the sides balance
    with session_scope(settings.database_url) as s:
        lefty = s.exec(select(Worker).where(Worker.external_id == "lefty")).one()
        assert lefty.status == WorkerStatus.temporarily_blocked
        signals = s.exec(select(JudgedSignal).where(JudgedSignal.worker_id == lefty.id)
                         .order_by(JudgedSignal.id)).all()
        assert {x.kind for x in signals} == {compare.GOLD} and [x.ok for x in signals].count(False) == 3
        assert len(answers) - len(golds) <= 7  # blocked by their 6th known-answer pair, within their first votes
        first_gold = s.get(Turn, golds[0][0])
        unit = s.get(Conversation, first_gold.conversation_id)
        assert first_gold.label == "checked" and unit.status == ConversationStatus.active  # a fresh pair is next
        assert s.exec(select(Turn).where(Turn.conversation_id == unit.id, Turn.index == 1)).one().status == "open"
        vote = s.get(Turn, next(a[0] for a in answers if not a[1]))
        assert s.get(Conversation, vote.conversation_id).status == ConversationStatus.completed
    # an honest judge right on every known-answer pair is never blocked; the blocked judge's votes are left out
    for _ in range(8):
        judge(settings, providers, "reader", lambda shown: shown.get("expected", "right"))
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Worker.status).where(Worker.external_id == "reader")).one() == WorkerStatus.active
        found = pairs.judgements(s, batch_id)
        assert len(pairs.votes(found)) < len(pairs.votes(found, include_blocked=True))
        create_requester(s, "ada", "correct horse")
    client = app.test_client()
    sign_in(client)
    shown = client.get(f"/admin/compare/{batch_id}", headers=JSON).get_json()
    lefty_row = next(j for j in shown["judges"] if j["judge"] == "lefty")
    assert lefty_row["status"] == "temporarily_blocked" and lefty_row["left_share"] == 1.0
    assert lefty_row["known_answer_right"] < lefty_row["known_answer"]
    review = client.get(f"/admin/workers/{lefty.id}").get_data(as_text=True)
    assert "compare_gold signals not ok" in review


def test_the_judge_quiz_shows_known_answer_pairs_and_refuses_one_who_always_picks_left(settings, app):
    _, client = _onboarding(app, settings, "judge", "Jo")
    page = client.get("/onboarding").get_data(as_text=True)
    assert 'id="pair-1-left-dialog"' in page and "football team" in page
    quiz = onboarding.quiz_for("judge")
    lefty = client.post("/onboarding", data={q.name: "left" if q.pair else q.answer for q in quiz.questions},
                        headers=JSON).get_json()
    assert not lefty["passed"] and set(lefty["wrong"]) == {"pair-1", "pair-4"}
    reader = client.post("/onboarding", data={q.name: q.answer for q in quiz.questions}, headers=JSON).get_json()
    assert reader["passed"]


def test_the_report_ranks_the_systems_in_the_cli_and_on_the_dashboard_with_its_plot(settings, providers, client):
    of = systems(settings, providers, n=3)
    strong = {pairs.system_of(b): rank for rank, b in enumerate(of)}  # the last batch is the strongest
    batch_id = launch(settings, providers, of, judges=8)
    for n in range(24):
        judge(settings, providers, f"judge-{n % 4}",
              lambda shown: "left" if strong[shown["left"]["system"]] > strong[shown["right"]["system"]] else "right")
    shown = command(settings, "compare", "report", str(batch_id), "--json")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert [r["system"] for r in report["ranking"]] == [pairs.system_of(b) for b in reversed(of)]
    assert all(r["low"] <= r["strength"] <= r["high"] for r in report["ranking"])
    assert report["votes"]["counted"] == 24 and all(p["a_win_rate"] in (0.0, 1.0) for p in report["pairs"])
    table = command(settings, "compare", "report", str(batch_id))
    assert "Ranking (Bradley-Terry with ties" in table.stdout and "position bias" in table.stdout
    refused = command(settings, "compare", "report", str(of[0]))
    assert refused.returncode == 1 and refused.stderr.strip() == (
        f"error: batch {of[0]} is a wizard_of_tasks batch, not a comparison batch")
    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")
    sign_in(client)
    assert 'id="comparison-link"' in client.get(f"/admin/batches/{batch_id}").get_data(as_text=True)
    page = client.get(f"/admin/compare/{batch_id}").get_data(as_text=True)
    assert 'id="ranking-plot"' in page and "data:image/png;base64," in page and pairs.system_of(of[2]) in page


def test_batch_launch_compares_the_batches_it_is_given_and_refuses_what_cannot_be_compared(settings, providers):
    of = systems(settings, providers, n=2)
    launched = command(settings, "batch", "launch", "--protocol", "compare", "--of", f"{of[0]},{of[1]}",
                       "--question", QUESTION, "--judges", "3")
    assert launched.returncode == 0, launched.stderr
    assert "3 votes (3 per pair of systems, drawn adaptive) on 1 pairs of 2 systems" in launched.stdout
    assert "judged 3 of 8" in launched.stdout
    for args, said in (
            (["--of", "999", "--question", QUESTION, "--judges", "3"], "error: batch 999 does not exist"),
            (["--of", str(of[0]), "--question", QUESTION, "--judges", "3"],
             f"error: of: batches {of[0]} have no two finished dialogs of the same task from different systems to "
             "compare"),
            (["--of", f"{of[0]},{of[1]}", "--judges", "3"], "error: --protocol compare needs --of"),
            (["--of", "x", "--question", QUESTION, "--judges", "3"], "error: --of: expected batch ids")):
        refused = command(settings, "batch", "launch", "--protocol", "compare", *args)
        assert refused.returncode == 1 and refused.stderr.startswith(said) and len(refused.stderr.splitlines()) == 1


def test_simulated_judges_rank_systems_of_known_strength_and_the_monitor_reports_what_it_caught(settings,
                                                                                               tmp_path):
    out = tmp_path / "report.json"
    done = command(settings, "simulate", "--protocol", "compare", "--systems", "3", "--votes", "30", "--judges", "4",
                   "--careless", "0.5", "--seed", "3", "--json", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())["reproducible"]
    assert report["votes"] == 30 and -1 <= report["kendall_tau"] <= 1
    assert set(report) >= {"kendall_tau", "votes", "careless_caught_share", "honest_blocked_share"}
    behaviours = Counter(j["behaviour"] for j in report["judges"])
    assert behaviours == {"careless": 1, "one_sided": 1, "honest": 2}
    one_sided = next(j for j in report["judges"] if j["behaviour"] == "one_sided")
    assert one_sided["blocked_after_votes"] is not None and one_sided["blocked_after_votes"] <= 10
    assert "Kendall's tau" in done.stdout


def test_a_batch_with_no_vote_yet_reports_no_interval_and_its_json_is_json(settings, providers, client):
    of = systems(settings, providers, n=2, dialogs=1)
    batch_id = launch(settings, providers, of, judges=1)
    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")
    sign_in(client)
    shown = client.get(f"/admin/compare/{batch_id}", headers=JSON)
    assert shown.status_code == 200 and "Infinity" not in shown.get_data(as_text=True)
    assert [(r["low"], r["high"]) for r in shown.get_json()["ranking"]] == [(None, None), (None, None)]
    page = client.get(f"/admin/compare/{batch_id}").get_data(as_text=True)
    assert "no votes yet" in page and "No decisive vote yet." in page
