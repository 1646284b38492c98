"""Judging agents (issue 37, items 5-7): people answer the evaluation questions at the end of a dialog with an
agent, success is checked against the goal beside what they claim, and the agents' report gives every figure
with its interval, the differences between agents with a corrected test, and the careless judges."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from sqlmodel import select

from tests.conftest import wait_until
from tests.test_dashboard import sign_in
from tests.test_star_dialog import hold
from turkflow import pipeline, requesters
from turkflow.agents import evaluation, judges, report
from turkflow.agents.evaluation import Call, Judgement, Played, Record, TurnRating
from turkflow.agents.registry import add_agent, find_agents
from turkflow.cli.common import App
from turkflow.cli.main import main
from turkflow.db import session_scope
from turkflow.errors import InvalidAnswer
from turkflow.hits import lifecycle
from turkflow.hits.provider import AGENT
from turkflow.models import (AgentTurnStatus, Conversation, ConversationStatus, JudgedSignal, SurveyAnswer, Task,
                             Turn, Worker)
from turkflow.protocols import registry, surveys
from turkflow.protocols.frames.dialog import domain_of, make_scenarios, read_tasks
from turkflow.protocols.frames.domain import SAMPLE
from turkflow.protocols.frames.goals import BREAKS_GOAL, MEETS_GOAL, goal_from_dict, judge_booking
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path

EVALUATED = ["completed", "understanding", "appropriateness", "satisfaction", "reason"]


# ---- a Frames wizard played by an agent that books what the user names ---------------------------------------


def booker(view: dict) -> dict:
    """A callable agent (``--callable tests.test_agents_report:booker``) playing Frames' wizard: it searches for
    the package the user names (its origin, destination and price) and books it, then says so."""
    said = " ".join(h["text"] for h in view["history"] if h["role"] == "user")
    named = re.search(r"from (\w+) to (\w+) for \$(\d+), package (\d+)", said)
    done = [step["action"] for step in view["steps"]]
    if "search" not in done:
        price = int(named[3])
        return {"action": "search", "constraints": {"origin": named[1], "destination": named[2],
                                                    "price": {"at_least": price, "at_most": price}}}
    if "book" not in done:
        return {"action": "book", "id": int(named[4])}
    return {"action": "utter", "text": f"Done: package {named[4]} is booked for you."}


def frames_batch(settings, providers, conversations: int) -> int:
    with session_scope(settings.database_url) as s:
        registry.load_tasks(s, read_tasks(SAMPLE))
        add_agent(s, "booker", target="tests.test_agents_report:booker")
        chosen = list(s.exec(select(Task).where(Task.protocol == "frames").order_by(Task.id)))
        batch, hits = lifecycle.launch_batch(s, chosen, conversations, name="booking agent", protocol="frames",
                                             max_turns=10, scenarios=make_scenarios(chosen, conversations, seed=2,
                                                                                    success=1.0),
                                             agents={"wizard": find_agents(s, ["booker"])})
        for hit in hits:
            lifecycle.publish_hit(s, providers.get(hit.provider), hit.id)
        return batch.id


def package_for(settings, conversation_id: int, outcome: str) -> dict:
    """A package of the sample database that meets (or breaks) the conversation's goal."""
    with session_scope(settings.database_url) as s:
        conversation = s.get(Conversation, conversation_id)
        db = domain_of(s.get(Task, conversation.task_id)).db
        goal = goal_from_dict(conversation.scenario, db)
    return next(item for item in db.items if judge_booking(goal, item).outcome == outcome)


def user_asks_the_agent_to_book(settings, providers, conversation_id: int, item: dict) -> None:
    """The person's one turn, then the agent's (asked in process, as the agents queue asks it)."""
    parts = registry.parts("frames")
    with session_scope(settings.database_url) as s:
        _, user, assignment = hold(s, conversation_id, "frames-user", "user")
        turn_id = parts.submit_turn(s, assignment, user, {"action": "utter", "text": (
            f"Hello! A trip from {item['origin']} to {item['destination']} for ${item['price']}, "
            f"package {item['id']}, please.")}).turn.id
    opened = pipeline.opening_after(settings, providers, turn_id)
    assert opened is not None and opened.provider == AGENT
    assert pipeline.answer_agent_turn(settings, providers, opened.turn_id).status == AgentTurnStatus.answered
    assert pipeline.opening_after(settings, providers, opened.turn_id) is None  # the booking ended the dialog


def test_a_frames_batch_checks_each_booking_against_the_goal_beside_what_the_user_claims(
        settings, providers, tmp_path, client):
    batch_id = frames_batch(settings, providers, 2)
    with session_scope(settings.database_url) as s:
        first, second = s.exec(select(Conversation.id).order_by(Conversation.id)).all()
    user_asks_the_agent_to_book(settings, providers, first, package_for(settings, first, MEETS_GOAL))
    user_asks_the_agent_to_book(settings, providers, second, package_for(settings, second, BREAKS_GOAL))

    # the person owes each dialog the protocol's own question and the evaluation of the agent, naming its role
    with session_scope(settings.database_url) as s:
        user = s.exec(select(Worker).where(Worker.external_id == "frames-user")).one()
        assert [d["conversation_id"] for d in surveys.surveys_due(s, user)] == [second, first]
        view = surveys.survey_for(s, first, user)
        assert [q.name for q in view.questions] == ["cooperativity", *EVALUATED]
        assert "assistant" in view.questions[1].label and "booker" not in str(view.questions)
        with pytest.raises(InvalidAnswer) as refused:
            surveys.answer_survey(s, first, user, {"cooperativity": "5", "completed": "yes", "understanding": "5",
                                                   "appropriateness": "6", "satisfaction": "5", "reason": "Fast."})
        assert refused.value.field == "appropriateness"
        for conversation_id, satisfied in ((first, 5), (second, 4)):  # the user thinks both went well
            assert surveys.answer_survey(s, conversation_id, user, {
                "cooperativity": "5", "completed": "yes", "understanding": 5, "appropriateness": "5",
                "satisfaction": str(satisfied), "reason": "It booked what I asked for."})
        assert not surveys.answer_survey(s, first, user, {})  # answered already: stored once
        user_id = user.id
    for conversation_id in (first, second):  # the claims judge the judge, as the monitor's signals
        pipeline.review_survey(settings, providers, conversation_id, user_id)
    with session_scope(settings.database_url) as s:
        signals = {(turn.conversation_id, signal.kind, signal.ok) for signal, turn in s.exec(
            select(JudgedSignal, Turn).join(Turn, Turn.id == JudgedSignal.turn_id))}
    assert signals == {(first, judges.OUTCOME, True), (second, judges.OUTCOME, False)}

    with session_scope(settings.database_url) as s:
        found = evaluation.batch_records(s, batch_id, settings.worker_hash_key)
    assert [(r.verified, r.evidence["outcome"]) for r in found] == [(True, MEETS_GOAL), (False, BREAKS_GOAL)]
    assert [r.played["wizard"].agent for r in found] == ["booker", "booker"]
    assert all(r.played["wizard"].calls[-1].outcome == "ok" for r in found)
    built = report.build(found)
    figures = built["roles"][0]["agents"][0]["measures"]
    assert (figures["verified_success"]["value"], figures["claimed_success"]["value"]) == (0.5, 1.0)
    assert figures["satisfaction"]["value"] == 4.5 and figures["turns_to_success"]["value"] == 2
    assert figures["failed_calls"]["value"] == 0 and figures["latency_p50"]["units"] == 2

    # the CLI prints it and writes it; the export keeps what it is computed from, and gives the same report
    runner, app = CliRunner(), App(settings, providers)
    written = runner.invoke(main, ["agents", "report", str(batch_id), "--json", str(tmp_path / "r.json"),
                                   "--plot", str(tmp_path / "r.png")], obj=app)
    assert written.exit_code == 0, written.output
    assert "success checked against the goal" in written.output and "50%" in written.output
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    exported = runner.invoke(main, ["export", "--format", "frames", "--batch", str(batch_id), "--out",
                                    str(tmp_path / "export")], obj=app)
    assert exported.exit_code == 0, exported.output
    assert (tmp_path / "export" / "evaluation.jsonl").is_file() and "hello" not in (
        tmp_path / "export" / "evaluation.jsonl").read_text().lower()  # records, not the dialog's words
    again = runner.invoke(main, ["agents", "report", "--from", str(tmp_path / "export"), "--json",
                                 str(tmp_path / "again.json")], obj=app)
    assert again.exit_code == 0, again.output
    assert (json.loads((tmp_path / "again.json").read_text())["report"]
            == json.loads((tmp_path / "r.json").read_text())["report"])
    assert "frames-user" not in (tmp_path / "again.json").read_text()  # judges are hashed, as in any export

    # the dashboard shows the same figures and the plot
    with session_scope(settings.database_url) as s:
        requesters.create_requester(s, "ada", "correct horse")
    sign_in(client)
    page = client.get(f"/admin/batches/{batch_id}/agents").get_data(as_text=True)
    assert "success checked against the goal" in page and "50% [" in page and 'id="agents-plot"' in page
    assert f'href="/admin/workers/{user_id}"' in page and "frames-user" in page  # the judge, named
    assert client.get(f"/admin/batches/{batch_id}/agents.png").data[:4] == b"\x89PNG"
    assert f"/admin/batches/{batch_id}/agents" in client.get(f"/admin/batches/{batch_id}").get_data(as_text=True)


def test_agents_report_names_what_is_wrong_in_one_line(settings, providers, tmp_path):
    runner, app = CliRunner(), App(settings, providers)
    (tmp_path / "evaluation.jsonl").write_text("{not json\n")
    for args, said in ((["--from", str(tmp_path)], "not an agents' evaluation"),
                       (["--from", str(tmp_path / "evaluation.jsonl"), "3"], "not both")):
        result = runner.invoke(main, ["agents", "report", *args], obj=app)
        assert result.exit_code != 0 and said in result.output and "Traceback" not in result.output


# ---- the Wizard of Tasks: an agent teacher, a person student -------------------------------------------------


STOP = {"relevant": "yes", "useful": "yes", "real_life": "I would eat them.", "intent": "stop",
        "response": "Thanks, that is all!"}


def wot_batch(settings, providers, agents: list[str], conversations: int = 1) -> int:
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task).order_by(Task.id)))[:1], conversations,
                                             name="tutor", max_turns=6,
                                             agents={"teacher": find_agents(s, agents)})
        for hit in hits:
            lifecycle.publish_hit(s, providers.get(hit.provider), hit.id)
        return batch.id


def student_turn(settings, providers, person: Worker, answers: dict) -> int:
    """The person's turn, then the agent teacher's in process; the id of the person's turn."""
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, person)[0]
        assignment = lifecycle.take_turn(s, person, hit.id, lease_seconds=60)
        turn_id = lifecycle.submit_turn(s, assignment.external_id, person, answers).turn.id
    opened = pipeline.opening_after(settings, providers, turn_id)
    assert pipeline.answer_agent_turn(settings, providers, opened.turn_id).status == AgentTurnStatus.answered
    return turn_id


def test_a_student_owes_the_evaluation_of_an_agent_teacher_once_the_agent_closes_the_dialog(settings, providers):
    wot_batch(settings, providers, ["sim-good"])
    with session_scope(settings.database_url) as s:
        person = Worker(external_id="s1", role="student", onboarded=True)
        s.add(person)
        s.flush()
        s.expunge(person)
    student_turn(settings, providers, person, {"intent": "request_items", "response": "What do I need?"})
    with session_scope(settings.database_url) as s:
        assert surveys.surveys_due(s, person) == []  # not over yet
    student_turn(settings, providers, person, STOP)
    with session_scope(settings.database_url) as s:
        conversation = s.exec(select(Conversation)).one()
        assert conversation.status == ConversationStatus.completed
        assert [d["conversation_id"] for d in surveys.surveys_due(s, person)] == [conversation.id]
        view = surveys.survey_for(s, conversation.id, person)
        assert [q.name for q in view.questions] == EVALUATED
        assert view.questions[0].label == "Did the teacher complete your task?"
        for reason, why in (("", "required"), ("x" * 1001, "at most 1000"), ("\u200b", "required")):
            with pytest.raises(InvalidAnswer, match=why) as refused:
                surveys.answer_survey(s, conversation.id, person, {"completed": "yes", "understanding": "4",
                                                                   "appropriateness": "4", "satisfaction": "4",
                                                                   "reason": reason})
            assert refused.value.field == "reason"
        assert surveys.answer_survey(s, conversation.id, person, {
            "completed": True, "understanding": 4, "appropriateness": 3, "satisfaction": 4,
            "reason": "Clear steps, a little slow."})
        assert surveys.surveys_due(s, person) == []
        stored = {a.question: a.answer for a in s.exec(select(SurveyAnswer))}
    assert stored == {"completed": True, "understanding": 4, "appropriateness": 3, "satisfaction": 4,
                      "reason": "Clear steps, a little slow."}


@pytest.mark.browser
def test_a_student_in_the_browser_answers_the_evaluation_questions_at_the_end_of_an_agent_dialog(
        live_server, browser_context, settings, providers, celery_worker):
    from tests.test_browser_conversation import join, student_turn as write_student_turn

    wot_batch(settings, providers, ["sim-good"])
    page = join(browser_context, live_server, settings, "student", name="Sam")
    write_student_turn(page, live_server, "request_items", "Hi! What do I need?")
    write_student_turn(page, live_server, "stop", "Thank you, goodbye!", real_life="I would start now.")

    def questions_listed():
        page.goto(f"{live_server.url}/queue")
        link = page.locator("#surveys-due a.button").first
        return link if link.count() else None

    wait_until(questions_listed, interval=0.2).click()
    assert "Did the teacher complete your task?" in page.inner_text("body")
    assert "sim-good" not in page.content() and "agent" not in page.inner_text("body").lower()
    page.check("input[name=completed][value=no]")
    for name, value in (("understanding", "2"), ("appropriateness", "3"), ("satisfaction", "2")):
        page.check(f"input[name={name}][value='{value}']")
    page.fill("textarea[name=reason]", "It kept listing steps I had not asked for.")
    page.click("#submit-survey")
    assert "your answers are saved" in page.inner_text("#survey-done")
    with session_scope(settings.database_url) as s:
        stored = {a.question: a.answer for a in s.exec(select(SurveyAnswer))}
    assert stored == {"completed": False, "understanding": 2, "appropriateness": 3, "satisfaction": 2,
                      "reason": "It kept listing steps I had not asked for."}


# ---- the report: intervals, differences and careless judges, on records of known quality ----------------------


def simulated(agent: str, success: float, n: int, seed: int, judges_of: list[str],
              careless: str = "") -> list[Record]:
    """``n`` conversations of ``agent`` whose success is checked (drawn at ``success``), each judged by one of
    ``judges_of`` who rates its turns by what they were; ``careless`` says yes to everything."""
    import random

    rng, found = random.Random(f"{agent}:{seed}"), []
    for n_ in range(n):
        ok = rng.random() < success
        judge = judges_of[n_ % len(judges_of)]
        bad_turns = agent == "sim-0" or not ok
        yes = judge == careless
        found.append(Record(
            conversation_id=1000 * seed + n_, task="t", protocol="frames",
            status="completed", end_reason="wizard_booked", turns=4, verified=ok,
            played={"wizard": Played(agent=agent, turns=2, judgements=[Judgement(
                judge, True if yes else ok, {"satisfaction": 5 if yes or ok else 2}, "why")],
                ratings=[TurnRating(1, judge, yes or not bad_turns, yes or not bad_turns)],
                calls=[Call(1, "ok", 400 + 10 * n_, 50, 20), Call(3, "ok" if n_ % 5 else "timeout", 900, 0, 0)])}))
    return found


def test_two_agents_15_points_apart_are_told_apart_and_a_constant_yes_judge_is_caught_by_the_control():
    people = [f"judge-{k}" for k in range(6)]
    records = (simulated("good", 0.85, 60, 1, people, careless="judge-5")
               + simulated("fair", 0.55, 60, 2, people, careless="judge-5")
               + simulated("sim-0", 0.0, 30, 3, people, careless="judge-5"))
    built = report.build(records, report.Options(permutations=1999))
    role = built["roles"][0]
    assert [a["agent"] for a in role["agents"]] == ["fair", "good", "sim-0"]
    assert [a["control"] for a in role["agents"]] == [False, False, True]
    success = {d["a"] + "-" + d["b"]: d for d in role["differences"]["verified_success"]}
    assert list(success) == ["fair-good"]  # the control is not compared
    assert success["fair-good"]["told_apart"] and success["fair-good"]["difference"] < 0
    verdicts = {j["judge"]: j for j in built["judges"]}
    assert verdicts["judge-5"]["careless"] and not any(verdicts[p]["careless"] for p in people[:5])
    assert built["judges"][0]["judge"] == "judge-5"  # the careless first
    left_out = report.build(records, report.Options(permutations=999, exclude_careless=True))
    assert left_out["excluded_judges"] == ["judge-5"]
    claimed = {a["agent"]: a["measures"]["claimed_success"] for a in left_out["roles"][0]["agents"]}
    everyone = {a["agent"]: a["measures"]["claimed_success"] for a in role["agents"]}
    assert claimed["sim-0"]["value"] == 0 < everyone["sim-0"]["value"]  # only the careless judge said yes to it
    assert claimed["good"]["units"] < everyone["good"]["units"]
    figures = role["agents"][1]["measures"]
    assert figures["failed_calls"]["value"] == pytest.approx(12 / 120)
    assert figures["latency_p95"]["low"] <= figures["latency_p95"]["value"] <= figures["latency_p95"]["high"]
    assert report.build(records, report.Options(permutations=1999)) == built  # seeded: the same report again


def test_a_record_survives_the_export_as_it_was():
    record = simulated("good", 0.8, 1, 7, ["j"])[0]
    assert Record.from_dict(json.loads(json.dumps(record.as_dict()))) == record


# ---- success against the goal: STAR's task outcome, MEEP's destination ----------------------------------------


def star_events(*answers: tuple[list, object]) -> list:
    """A STAR log of queries of cinema_search, each with what the knowledge base returned."""
    from turkflow.models import DialogEvent

    found = []
    for n, (constraints, item) in enumerate(answers):
        found += [DialogEvent(id=2 * n + 1, conversation_id=1, turn_index=2 * n + 1, agent="Wizard", action="query",
                              data={"APIName": "cinema_search", "Constraints": constraints}),
                  DialogEvent(id=2 * n + 2, conversation_id=1, turn_index=2 * n + 1, agent="KnowledgeBase",
                              action="return_item", data={"Item": item, "TotalItems": 0 if item is None else 1})]
    return found


PLAN = {"task": "cinema_search", "api": "cinema_search", "values": {"Name": "Cine Rex", "City": "Lyon"},
        "unhappy": None, "change": {"slot": "City", "new": "Paris"}}


@pytest.mark.parametrize("plan, answers, books, done, why", [
    (PLAN, [([{"Name": '"Cine Rex"'}], {"Name": "Cine Rex", "City": "Lyon"})], False, True, "done as the user asked"),
    (PLAN, [([{"Name": '"Cine Rex"'}], {"Name": "Cine Rex", "City": "Paris"})], False, True, "done"),  # changed mind
    (PLAN, [([{"Name": '"Cine Rex"'}], {"Name": "Cine Rex", "City": "Nice"})], False, False, "asked for: City"),
    (PLAN, [([], {"Name": "Cine Rex", "City": "Lyon"}), ([{"City": '"Lyon"'}], None)], False, False, "a no"),
    (PLAN, [([{"Name": '"Cine Rex"'}, {"RequestType": '"Check"'}], {"Name": "Cine Rex"})], True, False,
     "never booked"),
    (PLAN, [([{"Name": '"Cine Rex"'}, {"RequestType": '"Book"'}], {"Message": "Reservation Confirmed"})], True, True,
     "done"),
    ({**PLAN, "unhappy": "nothing_found"}, [([{"Name": '"Cine Rex"'}], None)], False, True, "said no"),
    ({**PLAN, "unhappy": "unavailable"}, [], False, False, "never asked"),
])
def test_a_star_task_is_done_when_the_knowledge_base_gave_what_the_scenario_allows(plan, answers, books, done, why):
    from turkflow.protocols.star.verified import task_verdict

    ok, evidence = task_verdict(plan, star_events(*answers), books)
    assert ok is done and why in evidence["why"]


def test_a_meep_dialog_succeeded_when_the_car_drove_to_the_destination_the_user_wanted(settings, providers):
    from tests.test_meep_dialog import coffee_dialog, launch_meep

    launch_meep(settings, providers, conversations=2)  # the first user wants Bluebird Coffee, the second tacos
    with session_scope(settings.database_url) as s:
        first, second = s.exec(select(Conversation.id).order_by(Conversation.id)).all()
    coffee_dialog(settings, providers, first)
    coffee_dialog(settings, providers, second)  # the agent drives the taco lover to the café: approved all the same
    with session_scope(settings.database_url) as s:
        verified = registry.parts("meep").verified_outcomes(s, [first, second])
    assert (verified[first].ok, verified[second].ok) == (True, False)
    assert verified[second].evidence["driven"] == {"latitude": 34.0016, "longitude": -118.4825}
    assert verified[second].evidence["goal"] == "tacos-washington"


def test_a_person_who_rates_a_control_agents_turn_good_is_judged_by_the_monitor(settings, providers):
    wot_batch(settings, providers, ["sim-0"], conversations=2)  # a control: every turn off-topic
    with session_scope(settings.database_url) as s:
        person = Worker(external_id="s-yes", role="student", onboarded=True)
        s.add(person)
        s.flush()
        s.expunge(person)
    for _ in range(2):
        student_turn(settings, providers, person, {"intent": "request_items", "response": "What do I need?"})
    fooled = student_turn(settings, providers, person, {**STOP, "intent": "request_step",
                                                        "response": "And then?"})  # rates the control yes/yes
    pipeline.review_submission(settings, providers, fooled)
    with session_scope(settings.database_url) as s:
        signal = s.exec(select(JudgedSignal).where(JudgedSignal.turn_id == fooled)).one()
    assert (signal.kind, signal.ok, signal.worker_id) == (judges.CONTROL, False, person.id)
    assert signal.evidence["rated"] == "a turn of sim-0, a control"
