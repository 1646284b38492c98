"""Agents in the loop (issue 37): a model plays a role on the same path as a person's turn, through a fake
OpenAI-compatible server over real HTTP reached with the real ``openai`` client; its failures cost nothing and
lose nothing."""

from __future__ import annotations

import threading
import time

import pytest
from click.testing import CliRunner
from sqlmodel import col, select

from tests.conftest import wait_until
from turkflow import pipeline
from turkflow.agents.registry import add_agent, find_agents
from turkflow.cli.common import App
from turkflow.cli.main import main
from turkflow.db import session_scope
from turkflow.hits import lifecycle, money
from turkflow.hits.provider import AGENT
from turkflow.models import (Agent, AgentCall, AgentTurn, AgentTurnStatus, Assignment, Batch, BatchStatus,
                             Conversation, ConversationAgent, Hit, HitStatus, QualityDecision, Rating, Task, Turn,
                             TurnStatus, Worker, WorkerKind)
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.simulator.fake_openai import FakeOpenAI
from turkflow.workers import tasks

STUDENT = {"relevant": "yes", "useful": "yes", "real_life": "mix it", "intent": "request_step",
           "response": "What comes next?"}
FIRST = {"intent": "request_items", "response": "What do I need for this?"}


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


def fast(settings, **more):
    """The test's settings with back-offs short enough to wait for."""
    return settings.model_copy(update={"agent_backoff_seconds": 0.05, "agent_backoff_max_seconds": 0.2,
                                       "agent_attempts": 3, **more})


def declare(settings, name, url, timeout=5.0):
    with session_scope(settings.database_url) as s:
        add_agent(s, name, endpoint=url, model="fake-model", timeout_seconds=timeout)


def launch(settings, providers, agents, conversations=1, max_turns=6, on_agent_failure="end", seed=0):
    """A Wizard of Tasks batch on the local queue whose roles in ``agents`` ({role: [names]}) agents play."""
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        playing = {role: find_agents(s, names) for role, names in agents.items()}
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task).order_by(Task.id))), conversations,
                                             name="agents", max_turns=max_turns, agents=playing,
                                             on_agent_failure=on_agent_failure, seed=seed)
        for hit in hits:
            lifecycle.publish_hit(s, providers.get(hit.provider), hit.id)
        return batch.id


def student(settings, external_id="s1"):
    with session_scope(settings.database_url) as s:
        worker = Worker(external_id=external_id, role="student", onboarded=True)
        s.add(worker)
        s.flush()
        return worker


def write_first_turn(settings, worker, answers=FIRST):
    """A person takes the oldest student turn from the local queue and submits it; its turn id."""
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, worker)[0]
        assignment = lifecycle.take_turn(s, worker, hit.id, lease_seconds=60)
        return lifecycle.submit_turn(s, assignment.external_id, worker, answers).turn.id


def teacher_turn(settings, batch_id):
    """The batch's first teacher turn, opened as a student's submit opens it (the Celery task's first step)."""
    with session_scope(settings.database_url) as s:
        return s.exec(select(Turn.id).join(Conversation, Conversation.id == Turn.conversation_id)
                      .where(Conversation.batch_id == batch_id, Turn.role == "teacher")).first()


def agent_turn(settings, turn_id):
    with session_scope(settings.database_url) as s:
        row = s.exec(select(AgentTurn).where(AgentTurn.turn_id == turn_id)).one()
        s.expunge(row)
        return row


def calls(settings, turn_id):
    with session_scope(settings.database_url) as s:
        return [(c.outcome, c.structured) for c in s.exec(select(AgentCall).where(AgentCall.turn_id == turn_id)
                                                            .order_by(col(AgentCall.id)))]


def opened_teacher_turn(settings, providers, batch_id, person):
    turn_id = write_first_turn(settings, person)
    opened = pipeline.opening_after(settings, providers, turn_id)
    assert opened is not None and opened.provider == AGENT
    return opened.turn_id


# ---- the declaration -------------------------------------------------------------------------------------


def test_an_agent_is_declared_once_with_the_name_of_its_keys_variable_never_the_key(settings, monkeypatch):
    monkeypatch.setenv("LAB_MODEL_KEY", "sk-secret-value")
    runner = CliRunner()
    app = App(settings)
    added = runner.invoke(main, ["agents", "add", "tutor", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
                                 "--api-key-env", "LAB_MODEL_KEY", "--timeout", "7"], obj=app)
    assert added.exit_code == 0, added.output
    again = runner.invoke(main, ["agents", "add", "tutor", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m"],
                          obj=App(settings))
    assert again.exit_code == 1 and "exists already" in again.output
    bad = runner.invoke(main, ["agents", "add", "x", "--endpoint", "ftp://host", "--model", "m"], obj=App(settings))
    assert bad.exit_code == 1 and "endpoint" in bad.output
    with session_scope(settings.database_url) as s:
        agent = s.exec(select(Agent).where(Agent.name == "tutor")).one()
        worker = s.get(Worker, agent.worker_id)
        assert (agent.api_key_env, agent.timeout_seconds, worker.kind) == ("LAB_MODEL_KEY", 7.0, WorkerKind.agent)
        stored = " ".join(str(v) for v in agent.model_dump().values())
        assert "sk-secret-value" not in stored
    shown = runner.invoke(main, ["agents", "show", "tutor"], obj=App(settings))
    assert "LAB_MODEL_KEY" in shown.output and "sk-secret" not in shown.output


def test_agents_test_calls_the_endpoint_once_and_says_how_it_answered(settings, fake):
    declare(settings, "tutor", fake.url)
    fake.answer = lambda body: {"relevant": "yes", "useful": "yes", "action": "return_items",
                                "shared": ["item-1"], "urls": [], "response": "You need fresh mint."}
    tested = CliRunner().invoke(main, ["agents", "test", "tutor"], obj=App(settings))
    assert tested.exit_code == 0, tested.output
    assert "structured output: json_schema" in tested.output and "valid" in tested.output
    assert len(fake.requests) == 1 and fake.requests[0]["response_format"]["type"] == "json_schema"


# ---- a turn played end to end -----------------------------------------------------------------------------


def test_an_agent_teacher_answers_through_the_agents_queue_and_the_student_gets_the_next_turn(
        settings, providers, fake, celery_worker):
    declare(settings, "tutor", fake.url)
    batch_id = launch(settings, providers, {"teacher": ["tutor"]})
    person = student(settings)
    tasks.turn_submitted.delay(write_first_turn(settings, person))

    def student_turn_open():
        with session_scope(settings.database_url) as s:
            return s.exec(select(Turn).where(Turn.index == 2, Turn.status == TurnStatus.open)).first()

    wait_until(student_turn_open)
    with session_scope(settings.database_url) as s:
        taught = s.exec(select(Turn).where(Turn.index == 1)).one()
        agent = s.exec(select(Agent)).one()
        assert taught.status == TurnStatus.submitted and taught.worker_id == agent.worker_id
        assert taught.answers["action"] == "return_items" and taught.text
        hit = s.exec(select(Hit).where(Hit.turn_id == taught.id)).one()
        assert hit.provider == AGENT and hit.status == HitStatus.submitted
        # paid nothing: no reward counted or pending for the agent's turn, nothing against the budget
        assert money.spend(s, worker_id=agent.worker_id).total_cents == 0
        assert money.spend(s, worker_id=agent.worker_id).pending_cents == 0
        assert lifecycle.committed_cents(s, batch_id) == 2 * s.get(Batch, batch_id).reward_cents
        played = s.exec(select(AgentTurn).where(AgentTurn.turn_id == taught.id)).one()
        assert played.status == AgentTurnStatus.answered and played.prompt_tokens > 0
    assert calls(settings, taught.id) == [("ok", "json_schema")]
    # the next student (a person) rates the agent's turn as any turn; the monitor judges no agent
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, person)[0]
        assignment = lifecycle.take_turn(s, person, hit.id, lease_seconds=60)
        rated = lifecycle.submit_turn(s, assignment.external_id, person, {**STUDENT, "relevant": "no",
                                                                         "useful": "no"}).turn.id
    pipeline.review_submission(settings, providers, rated)
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Rating).where(Rating.rater_turn_id == rated)).one().author_id == agent.worker_id
        assert s.exec(select(QualityDecision)).all() == []
        assert s.get(Worker, agent.worker_id).status == "active"


def test_conversations_are_assigned_to_agents_at_random_balanced_per_task_and_seeded(settings, providers):
    with session_scope(settings.database_url) as s:
        for name in ("sim-good", "sim-poor"):
            add_agent(s, name)
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        tasks_ = list(s.exec(select(Task).order_by(Task.id)))[:2]
    drawn = []
    for seed in (1, 1, 2):
        with session_scope(settings.database_url) as s:
            batch, _ = lifecycle.launch_batch(s, tasks_, 8, name="ab", agents={
                "teacher": find_agents(s, ["sim-good", "sim-poor"])}, seed=seed)
            rows = s.exec(select(Conversation.task_id, ConversationAgent.agent_id)
                          .join(ConversationAgent, ConversationAgent.conversation_id == Conversation.id)
                          .where(Conversation.batch_id == batch.id).order_by(Conversation.id)).all()
        drawn.append(rows)
        for task in tasks_:
            per_agent = [a for t, a in rows if t == task.id]
            assert sorted(per_agent.count(a) for a in set(per_agent)) == [2, 2]  # balanced within each task
    assert drawn[0] == drawn[1] and drawn[0] != drawn[2]  # the seed decides


# ---- structured output and failures -----------------------------------------------------------------------


def test_a_server_that_refuses_json_schema_is_asked_in_json_mode_and_the_agent_remembers_it(
        settings, providers, fake):
    declare(settings, "tutor", fake.url)
    fake.refuse_modes = {"json_schema"}
    batch_id = launch(settings, providers, {"teacher": ["tutor"]})
    turn_id = opened_teacher_turn(settings, providers, batch_id, student(settings))
    done = pipeline.answer_agent_turn(settings, providers, turn_id)
    assert done.status == AgentTurnStatus.answered and done.submitted_turn_id == turn_id
    assert calls(settings, turn_id) == [("ok", "json_object")]
    assert [r.get("response_format", {}).get("type") for r in fake.requests] == ["json_schema", "json_object"]
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Agent.structured)).one() == "json_object"


def test_the_persons_next_turn_is_open_once_the_agents_answer_is_stored_and_the_call_says_when_it_started(
        settings, providers, fake):
    declare(settings, "tutor", fake.url)
    fake.delay = 0.3
    batch_id = launch(settings, providers, {"teacher": ["tutor"]})
    person = student(settings)
    turn_id = opened_teacher_turn(settings, providers, batch_id, person)
    done = pipeline.answer_agent_turn(settings, providers, turn_id)
    assert done.status == AgentTurnStatus.answered
    with session_scope(settings.database_url) as s:  # no opening after it: the answer's transaction opened it
        [hit] = lifecycle.open_hits_for(s, person)
        assert (hit.id, s.get(Turn, hit.turn_id).index) == (done.opened.hit_id, 2)
        call = s.exec(select(AgentCall).where(AgentCall.turn_id == turn_id)).one()
        answered = agent_turn(settings, turn_id)
    assert call.latency_ms >= 300 and (answered.ended_at - call.started_at).total_seconds() >= 0.3


def test_a_timeout_a_429_and_a_500_are_retried_after_their_waits_and_the_answer_is_stored_once(
        settings, providers, fake):
    settings = fast(settings, agent_attempts=4)
    declare(settings, "tutor", fake.url, timeout=0.5)
    fake.timeout_sleep = 2.0
    fake.script.extend(["timeout", "429", "500"])
    batch_id = launch(settings, providers, {"teacher": ["tutor"]})
    turn_id = opened_teacher_turn(settings, providers, batch_id, student(settings))
    assert pipeline.answer_agent_turn(settings, providers, turn_id).status == AgentTurnStatus.waiting
    assert pipeline.answer_agent_turn(settings, providers, turn_id).status is None  # not due yet: nothing asked
    wait_until(lambda: pipeline.answer_agent_turn(settings, providers, turn_id).status is not None)
    limited = agent_turn(settings, turn_id)
    assert limited.status == AgentTurnStatus.waiting and limited.reason.startswith("rate_limited")
    assert (limited.due_at - time_of_last_call(settings, turn_id)).total_seconds() >= 0.9  # Retry-After: 1
    wait_until(lambda: pipeline.answer_agent_turn(settings, providers, turn_id).status is not None)
    wait_until(lambda: pipeline.answer_agent_turn(settings, providers, turn_id).status is not None)
    assert [o for o, _ in calls(settings, turn_id)] == ["timeout", "rate_limited", "server_error", "ok"]
    assert agent_turn(settings, turn_id).status == AgentTurnStatus.answered
    assert pipeline.answer_agent_turn(settings, providers, turn_id).status is None  # a late duplicate: nothing
    with session_scope(settings.database_url) as s:
        assert s.get(Turn, turn_id).status == TurnStatus.submitted
        assert len(s.exec(select(Assignment).join(Hit, Hit.id == Assignment.hit_id)
                          .where(Hit.turn_id == turn_id)).all()) == 1


def time_of_last_call(settings, turn_id):
    with session_scope(settings.database_url) as s:
        return s.exec(select(AgentCall.started_at).where(AgentCall.turn_id == turn_id)
                      .order_by(col(AgentCall.id).desc())).first()


def test_nonsense_answers_store_nothing_and_out_of_attempts_the_conversation_ends_with_the_reason(
        settings, providers, fake):
    settings = fast(settings, agent_attempts=2)
    declare(settings, "tutor", fake.url)
    fake.script.extend(["nonsense", {"relevant": "yes", "useful": "yes", "action": "fly", "response": "Hi"}])
    batch_id = launch(settings, providers, {"teacher": ["tutor"]})
    turn_id = opened_teacher_turn(settings, providers, batch_id, student(settings))
    pipeline.answer_agent_turn(settings, providers, turn_id)
    wait_until(lambda: pipeline.answer_agent_turn(settings, providers, turn_id).status is not None)
    assert [o for o, _ in calls(settings, turn_id)] == ["invalid", "invalid"]
    refused = fake.requests[-1]["messages"][-1]["content"]
    assert "refused" in refused  # the second call was told why the first answer was refused
    ended = agent_turn(settings, turn_id)
    assert ended.status == AgentTurnStatus.failed and "action" in ended.reason
    with session_scope(settings.database_url) as s:
        turn = s.get(Turn, turn_id)
        conversation = s.get(Conversation, turn.conversation_id)
        assert (turn.status, turn.text) == (TurnStatus.cancelled, None)  # nothing half-stored
        assert (conversation.status, conversation.end_reason) == ("completed", "agent_failed")
        assert s.get(Batch, batch_id).status == BatchStatus.completed
        # the person's turn before it is paid as usual; nobody is paid for the agent's
        first = s.exec(select(Turn).where(Turn.conversation_id == conversation.id, Turn.index == 0)).one()
        assert money.spend(s, worker_id=first.worker_id).pending_cents == s.get(Batch, batch_id).reward_cents


def test_with_on_agent_failure_people_the_turn_opens_for_people_of_the_role(settings, providers, fake):
    settings = fast(settings, agent_attempts=1)
    declare(settings, "tutor", fake.url)
    fake.script.append("500")
    batch_id = launch(settings, providers, {"teacher": ["tutor"]}, on_agent_failure="people")
    turn_id = opened_teacher_turn(settings, providers, batch_id, student(settings))
    done = pipeline.answer_agent_turn(settings, providers, turn_id)
    assert done.status == AgentTurnStatus.handed_over
    with session_scope(settings.database_url) as s:
        hits = s.exec(select(Hit).where(Hit.turn_id == turn_id).order_by(Hit.attempt)).all()
        assert [(h.provider, h.status) for h in hits] == [(AGENT, HitStatus.expired), ("local", HitStatus.open)]
        teacher = Worker(external_id="t1", role="teacher", onboarded=True)
        s.add(teacher)
        s.flush()
        assert [h.id for h in lifecycle.open_hits_for(s, teacher)] == [hits[1].id]


def test_an_answer_that_comes_after_the_batch_was_cancelled_stores_nothing(settings, providers, fake):
    declare(settings, "tutor", fake.url)
    fake.delay = 1.0
    batch_id = launch(settings, providers, {"teacher": ["tutor"]})
    turn_id = opened_teacher_turn(settings, providers, batch_id, student(settings))
    answered = {}
    asking = threading.Thread(target=lambda: answered.update(
        done=pipeline.answer_agent_turn(settings, providers, turn_id)))
    asking.start()
    wait_until(lambda: fake.requests)  # the agent is thinking
    with session_scope(settings.database_url) as s:
        lifecycle.set_batch_status(s, s.get(Batch, batch_id), BatchStatus.cancelled, "requester:test")
    asking.join(timeout=30)
    assert answered["done"].status == AgentTurnStatus.cancelled
    assert calls(settings, turn_id) == [("cancelled", "json_schema")]
    with session_scope(settings.database_url) as s:
        assert (s.get(Turn, turn_id).status, s.get(Turn, turn_id).text) == (TurnStatus.cancelled, None)


def test_beats_sweep_queues_agent_turns_that_are_due_once_and_gives_back_those_of_a_lost_worker(
        settings, providers, fake):
    declare(settings, "tutor", fake.url)
    batch_id = launch(settings, providers, {"teacher": ["tutor"]}, conversations=2)
    person = student(settings)
    first = opened_teacher_turn(settings, providers, batch_id, person)
    assert pipeline.sweep_agent_turns(settings) == [first]
    assert pipeline.sweep_agent_turns(settings) == []  # queued already: not again until its mark lapses
    with session_scope(settings.database_url) as s:  # a worker claimed it and died mid-call
        s.execute(AgentTurn.__table__.update().where(AgentTurn.turn_id == first).values(
            status=AgentTurnStatus.calling, claimed_until=lifecycle.utcnow()))
    time.sleep(0.01)
    assert pipeline.sweep_agent_turns(settings) == [first]


# ---- people never see which agent, and the export marks its turns ------------------------------------------


@pytest.mark.browser
def test_a_student_in_the_browser_talks_to_an_agent_teacher_and_nothing_names_the_agent(
        live_server, browser_context, settings, providers, fake, celery_worker):
    from tests.test_browser_conversation import join, student_turn, take_next_turn

    declare(settings, "secret-tutor-7b", fake.url)
    fake.answer = lambda body: {"relevant": "yes", "useful": "yes", "action": "return_items", "shared": ["item-1"],
                                "urls": [], "response": "You need flour first, see the list I shared."}
    launch(settings, providers, {"teacher": ["secret-tutor-7b"]})
    page = join(browser_context, live_server, settings, "student", name="Sam")
    seen = []
    page.on("response", lambda response: seen.append(
        (response.url, response.text() if "text" in response.headers.get("content-type", "")
         or "json" in response.headers.get("content-type", "") else "")))
    student_turn(page, live_server, "request_items", "Hi! What do I need for pancakes?")
    take_next_turn(page, live_server)  # the agent's reply is in, and the next student turn is open
    assert "You need flour first" in page.inner_text("body")
    named = [url for url, body in seen if any(word in (url + body).lower()
                                              for word in ("secret-tutor", "fake-model", "agent"))]
    assert named == [] and "secret-tutor" not in page.content().lower()
    with session_scope(settings.database_url) as s:  # the researchers' export does name it
        from turkflow.dataset.export import iter_conversations

        document = next(iter_conversations(s, "key"))
    assert [t["agent"] for t in document["turns"]] == [None, "secret-tutor-7b"]
    assert document["agents"] == {"teacher": "secret-tutor-7b"}
    from turkflow.dataset.export import schema_validator

    schema_validator().validate(document)


# ---- STAR's wizard by its suggestion model ------------------------------------------------------------------


def test_a_star_batch_whose_wizard_is_star_suggest_replays_with_no_difference(settings, providers):
    from turkflow.protocols import registry
    from turkflow.protocols.star.dialog import make_scenarios, read_tasks
    from turkflow.simulator.star import sample_star_root

    with session_scope(settings.database_url) as s:
        registry.load_tasks(s, read_tasks(sample_star_root() / "tasks"))
        chosen = list(s.exec(select(Task).where(Task.protocol == "star").order_by(Task.id)))
        batch, hits = lifecycle.launch_batch(s, chosen, 2, name="star", protocol="star",
                                             scenarios=make_scenarios(chosen, 2, seed=3),
                                             agents={"wizard": find_agents(s, ["star-suggest"])})
        for hit in hits:
            lifecycle.publish_hit(s, providers.get(hit.provider), hit.id)
        user = Worker(external_id="u1", role="user", onboarded=True, stage=2)
        s.add(user)
        s.flush()
        batch_id = batch.id
    parts = registry.parts("star")
    said = 0
    for _ in range(8):  # people write the user turns on STAR's path, the agent answers each wizard turn
        with session_scope(settings.database_url) as s:
            open_hits = lifecycle.open_hits_for(s, user)
            if not open_hits:
                break
            assignment = lifecycle.take_turn(s, user, open_hits[0].id, lease_seconds=60)
            conversation = s.get(Conversation, s.get(Turn, open_hits[0].turn_id).conversation_id)
            choices = [c for f in parts.query_form(s.get(Task, conversation.task_id)) for c in f["choices"]][:2]
            turn_id = parts.submit_turn(s, assignment.external_id, user, {
                "action": "utter", "text": f"I am looking for {' and '.join(choices) or 'something'}, please."}).turn.id
        said += 1
        opened = pipeline.opening_after(settings, providers, turn_id)
        assert opened is not None and opened.provider == AGENT
        assert pipeline.answer_agent_turn(settings, providers, opened.turn_id).status == AgentTurnStatus.answered
    with session_scope(settings.database_url) as s:
        ids = [c.id for c in s.exec(select(Conversation).where(Conversation.batch_id == batch_id))]
        from turkflow.models import DialogEvent

        wizard = s.exec(select(DialogEvent).where(DialogEvent.agent == "Wizard")).all()
        assert {e.action for e in wizard} >= {"query", "pick_suggestion"}
        count, differences = parts.replay(s, ids)
    assert said >= 4 and count > 0 and differences == []


# ---- the simulator: simulated people judging agents ----------------------------------------------------------


def test_an_ab_simulation_of_two_agents_that_differ_by_construction_shows_the_difference(tmp_path, sqlite_url):
    from turkflow.config import Settings
    from turkflow.simulator.run import SimulationConfig, run_with_stack

    config = SimulationConfig(students=4, teachers=0, conversations=8, max_turns=8, mean_turns=8, seed=2,
                              mix={}, agents={"teacher": ("sim-95", "sim-30")}, settle_timeout=120)
    settings = Settings(data_dir=tmp_path, database_url=sqlite_url, secret_key="test", worker_hash_key="test")
    report = run_with_stack(settings, tmp_path, config, web_workers=2, web_threads=2)
    agents = report["reproducible"]["agents"]
    assert agents["sim-95"]["conversations"] == agents["sim-30"]["conversations"] == 4
    assert agents["sim-95"]["right_share"] > agents["sim-30"]["right_share"]
    # the simulated students rate the agents' turns as they rate a person's: the better agent is rated better
    assert agents["sim-95"]["relevant_share"] > agents["sim-30"]["relevant_share"]
    turns = report["reproducible"]["turns"]
    assert turns["lost"] == 0 and turns["by_agents"] > 0 and turns["history_mismatches"] == 0
    # and at the end each student answers the evaluation of the agent they talked to, by what its turns were
    assert agents["sim-95"]["evaluations"] + agents["sim-30"]["evaluations"] == 8
    assert agents["sim-95"]["claimed_done_share"] > agents["sim-30"]["claimed_done_share"]
    from turkflow.agents import evaluation
    from turkflow.agents import report as agents_report

    with session_scope(settings.database_url) as s:
        built = agents_report.build(evaluation.batch_records(s, 1, "test"))
    satisfied = {a["agent"]: a["measures"]["satisfaction"] for a in built["roles"][0]["agents"]}
    assert satisfied["sim-95"]["units"] == satisfied["sim-30"]["units"] == 4
    assert satisfied["sim-95"]["value"] > satisfied["sim-30"]["value"]


def test_the_sgd_export_names_the_agents_of_a_conversation(settings, providers, tmp_path):
    import json as json_

    from turkflow.dataset.export import ExportFilters
    from turkflow.dataset.sgd import export_sgd

    launch(settings, providers, {"teacher": ["sim-good"]}, conversations=2)
    person = student(settings)
    turn_id = opened_teacher_turn(settings, providers, None, person)
    assert pipeline.answer_agent_turn(settings, providers, turn_id).status == AgentTurnStatus.answered
    with session_scope(settings.database_url) as s:
        export_sgd(s, tmp_path / "sgd", hash_key="key", filters=ExportFilters())
    dialogues = [d for f in sorted((tmp_path / "sgd").rglob("dialogues_*.json"))
                 for d in json_.loads(f.read_text())]
    assert dialogues and all(d["turkflow_agents"] == {"teacher": "sim-good"} for d in dialogues)


def test_batch_launch_with_agent_stores_the_roles_agents_and_costs_only_peoples_turns(settings):
    from tests.test_cli import launched, ok, one_line_error

    runner = CliRunner()

    def turkflow(*args):
        return runner.invoke(main, list(args), obj=App(settings))

    out = ok(turkflow("batch", "launch", "--all", "-n", "2", "--max-turns", "6", "--agent", "teacher=sim-good",
                      "--dry-run"))
    assert "3 turns per conversation" in out and "agents play the teacher: sim-good" in out
    assert "--agent" in one_line_error(turkflow("batch", "launch", "--all", "-n", "2", "--agent", "pilot=sim-good"))
    ok(turkflow("tasks", "load", str(sample_tasks_path())))
    assert "no agent called" in one_line_error(turkflow("batch", "launch", "--all", "-n", "2", "--agent",
                                                        "teacher=unknown-model"))
    batch_id = launched(turkflow, "-n", "2", "--agent", "teacher=sim-good,sim-poor", "--on-agent-failure", "people")
    with session_scope(settings.database_url) as s:
        batch = s.get(Batch, batch_id)
        assert (batch.agents, batch.on_agent_failure) == ({"teacher": ["sim-good", "sim-poor"]}, "people")
        assert len(s.exec(select(ConversationAgent)).all()) == 2
        assert {h.provider for h in s.exec(select(Hit))} == {"local"}  # the students' first turns, for people


def test_agents_list_sums_each_agents_turns_and_tokens_per_batch(settings, providers, fake):
    declare(settings, "tutor", fake.url)
    batch_id = launch(settings, providers, {"teacher": ["tutor"]})
    turn_id = opened_teacher_turn(settings, providers, batch_id, student(settings))
    pipeline.answer_agent_turn(settings, providers, turn_id)
    tokens = agent_turn(settings, turn_id)
    listed = CliRunner().invoke(main, ["agents", "list", "--batch", str(batch_id)], obj=App(settings))
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.output.splitlines() if "tutor" in line)
    assert f"{tokens.prompt_tokens} / {tokens.completion_tokens}" in row and " 1 " in row


def test_an_endpoint_agent_plays_stars_wizard_querying_then_replying_and_the_log_replays(
        settings, providers, fake):
    """A model's STAR wizard turn is two calls: a query (its result shown in the second call's view, as the page
    shows it), then the reply; both are logged in one transaction with the submit, and the query replays."""
    from turkflow.models import DialogEvent
    from turkflow.protocols import registry
    from turkflow.protocols.star.dialog import make_scenarios, read_tasks
    from turkflow.simulator.star import sample_star_root

    declare(settings, "llm-wizard", fake.url)
    with session_scope(settings.database_url) as s:
        registry.load_tasks(s, read_tasks(sample_star_root() / "tasks"))
        chosen = list(s.exec(select(Task).where(Task.protocol == "star").order_by(Task.id)))
        batch, hits = lifecycle.launch_batch(s, chosen, 1, name="star", protocol="star",
                                             scenarios=make_scenarios(chosen, 1, seed=3),
                                             agents={"wizard": find_agents(s, ["llm-wizard"])})
        for hit in hits:
            lifecycle.publish_hit(s, providers.get(hit.provider), hit.id)
        user = Worker(external_id="u1", role="user", onboarded=True, stage=2)
        s.add(user)
        s.flush()
        assignment = lifecycle.take_turn(s, user, hits[0].id, lease_seconds=60)
        task = s.get(Task, s.get(Conversation, s.get(Turn, hits[0].turn_id).conversation_id).task_id)
        api = task.star["api"]
        form = {f["name"]: f["choices"][0] for f in registry.parts("star").query_form(task) if f["required"]}
        turn_id = registry.parts("star").submit_turn(s, assignment.external_id, user, {
            "action": "utter", "text": "Hello, can you help me?"}).turn.id
    fake.script.extend([{"action": "query", "api": api, "form": form},
                        {"action": "utter", "text": "I looked it up for you."}])
    opened = pipeline.opening_after(settings, providers, turn_id)
    done = pipeline.answer_agent_turn(settings, providers, opened.turn_id)
    with session_scope(settings.database_url) as s:
        why = [c.detail for c in s.exec(select(AgentCall))]
    assert done.status == AgentTurnStatus.answered, why
    second = fake.requests[1]["messages"][-1]["content"]
    assert '"kb_log"' in second and '"this turn so far"' in second  # the query's answer, shown before the reply
    with session_scope(settings.database_url) as s:
        logged = [e.action for e in s.exec(select(DialogEvent).where(DialogEvent.turn_id == opened.turn_id)
                                             .order_by(DialogEvent.id))]
        assert logged == ["query", "return_item", "utter"]
        count, differences = registry.parts("star").replay(s, [s.get(Turn, turn_id).conversation_id])
    assert count == 1 and differences == []


def test_agents_play_both_roles_of_a_frames_dialog_to_its_end_before_anyone_is_paid(settings, providers):
    """A dry run of a protocol with no person: a simulated user and a simulated wizard (Frames), every turn on
    the agents' path, the dialog ended by the user."""
    from tests.test_frames_dialog import SAMPLE
    from turkflow.protocols import registry
    from turkflow.protocols.frames.dialog import make_scenarios, read_tasks

    with session_scope(settings.database_url) as s:
        registry.load_tasks(s, read_tasks(SAMPLE))
        tasks_ = list(s.exec(select(Task).where(Task.protocol == "frames").order_by(Task.id)))
        batch, hits = lifecycle.launch_batch(s, tasks_, 1, name="dry run", max_turns=10, protocol="frames",
                                             scenarios=make_scenarios(tasks_, 1, seed=1),
                                             agents={"user": find_agents(s, ["sim-100"]),
                                                     "wizard": find_agents(s, ["sim-100"])})
        for hit in hits:
            lifecycle.publish_hit(s, providers.get(hit.provider), hit.id)
        batch_id = batch.id
    for _ in range(10):
        due = pipeline.sweep_agent_turns(settings)
        if not due:
            break
        for turn_id in due:
            done = pipeline.answer_agent_turn(settings, providers, turn_id)
            assert done.status == AgentTurnStatus.answered
    with session_scope(settings.database_url) as s:
        conversation = s.exec(select(Conversation).where(Conversation.batch_id == batch_id)).one()
        assert (conversation.status, conversation.end_reason) == ("completed", "user_complete")
        assert money.spend(s, batch_id=batch_id).total_cents == 0
        assert lifecycle.committed_cents(s, batch_id) == 0
