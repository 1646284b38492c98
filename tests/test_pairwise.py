"""Per-turn pairwise (issue 38, item 2): with two agents for the teacher and ``--pairwise``, each teacher turn is
answered by both, the student who writes the next turn sees both replies and picks one, which the dialog
continues with; both replies and the pick are stored, and the export's preferences.jsonl holds every pick and
nothing else (read back here). In real Chromium, a student picks in a live Wizard of Tasks dialog."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from tests.test_agents import FIRST, STUDENT, student, write_first_turn
from tests.test_star_dialog import command
from tests.test_worker_pages import JSON, joined
from turkflow import pipeline
from turkflow.agents import pairwise
from turkflow.agents.registry import add_agent, find_agents
from turkflow.agents.builtins import OFF_TOPIC
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.models import Agent, AgentCall, Candidate, Pick, Rating, Task, Turn, TurnStatus, Worker
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path

GOOD, BAD = "sim-100", "sim-0"  # always the page's right answer; always off topic


def launch(settings, providers, conversations=1, pairwise=True, teachers=(GOOD, BAD), seed=0) -> int:
    with session_scope(settings.database_url) as s:
        for name in teachers:
            if s.exec(select(Agent).where(Agent.name == name)).first() is None:
                add_agent(s, name)
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task).order_by(Task.id)))[:1], conversations,
                                             name="pairwise", max_turns=8, seed=seed,
                                             agents={"teacher": find_agents(s, list(teachers))}, pairwise=pairwise)
        for hit in hits:
            lifecycle.publish_hit(s, providers.get(hit.provider), hit.id)
        return batch.id


def answered_teacher_turn(settings, providers, student_turn_id: int) -> int:
    """What the Celery tasks do after a student's turn: open the teacher's turn, let the agents answer it (which
    opens the student's next turn). The teacher's turn."""
    opened = pipeline.opening_after(settings, providers, student_turn_id)
    pipeline.answer_agent_turn(settings, providers, opened.turn_id)
    return opened.turn_id


def test_both_agents_answer_a_teacher_turn_and_the_students_pick_is_what_the_dialog_continues_with(
        settings, providers, app, tmp_path):
    batch_id = launch(settings, providers)
    client = joined(app, settings, "student")
    with session_scope(settings.database_url) as s:
        first = s.exec(select(Worker).where(Worker.id == client.worker.id)).one()
    teacher = answered_teacher_turn(settings, providers, write_first_turn(settings, first))
    with session_scope(settings.database_url) as s:
        offered = {s.get(Agent, c.agent_id).name: c for c in s.exec(select(Candidate).where(Candidate.turn_id == teacher))}
        assert set(offered) == {GOOD, BAD} and offered[BAD].text in OFF_TOPIC and offered[GOOD].text not in OFF_TOPIC
        assert {(s.get(Agent, c.agent_id).name, c.outcome) for c in s.exec(select(AgentCall))} == {
            (GOOD, "ok"), (BAD, "ok")}
        held = s.get(Turn, teacher)
        own = held.text  # stored with the conversation's own agent's reply until someone picks
        assert held.status == TurnStatus.submitted and own in (offered[GOOD].text, offered[BAD].text)

    hit_id = client.get("/queue", headers=JSON).get_json()["open"][0]["hit_id"]
    turn_url = client.post(f"/queue/take/{hit_id}", headers=JSON).get_json()["turn_url"]
    page = client.get(turn_url, headers=JSON).get_json()
    shown = {page["pick"]["first"]["text"]: "first", page["pick"]["second"]["text"]: "second"}
    assert set(shown) == {offered[GOOD].text, offered[BAD].text} and "agent" not in json.dumps(page["pick"])
    html = client.get(turn_url).get_data(as_text=True)
    assert 'id="candidate-first"' in html and GOOD not in html and BAD not in html
    refused = client.post(turn_url, data={**STUDENT})
    assert refused.status_code == 400 and "choose the reply you continue with" in refused.get_data(as_text=True)
    # the student picks the reply that is not the turn's own: the turn is now that one, and they rate it
    rival = BAD if own == offered[GOOD].text else GOOD
    sent = client.post(turn_url, data={**STUDENT, "pick": shown[offered[rival].text], "pick_reason": "More to it."})
    assert sent.status_code == 303, sent.get_data(as_text=True)
    with session_scope(settings.database_url) as s:
        held = s.get(Turn, teacher)
        rival_worker = s.exec(select(Agent.worker_id).where(Agent.name == rival)).one()
        assert (held.text, held.worker_id) == (offered[rival].text, rival_worker)
        (pick,) = s.exec(select(Pick)).all()
        assert (pick.chosen_id, pick.rejected_id, pick.reason) == (offered[rival].id, offered[own_name(offered, own)].id,
                                                                  "More to it.")
        rating = s.exec(select(Rating).where(Rating.rated_turn_id == teacher)).one()
        assert rating.author_id == rival_worker  # the student rated the reply they picked
        resend = client.post(turn_url, data={**STUDENT, "pick": "first"})  # a double click changes nothing
        assert resend.status_code in (303, 409) and len(s.exec(select(Pick)).all()) == 1

    # a second teacher turn, picked the other way; a batch without --pairwise beside it has no picks
    student_turn = s_turn(settings, client.worker.id, 2)
    teacher_2 = answered_teacher_turn(settings, providers, student_turn)
    second_hit = client.get("/queue", headers=JSON).get_json()["open"][0]["hit_id"]
    second_url = client.post(f"/queue/take/{second_hit}", headers=JSON).get_json()["turn_url"]
    sent = client.post(second_url, data={**STUDENT, "pick": "first"})
    assert sent.status_code == 303
    plain = launch(settings, providers, pairwise=False)
    other = student(settings, "s9")
    answered_teacher_turn(settings, providers, write_first_turn(settings, other, FIRST))

    out = tmp_path / "export"
    done = command(settings, "export", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "2 preference pairs" in done.stdout
    lines = [json.loads(line) for line in (out / "preferences.jsonl").read_text().splitlines()]
    with session_scope(settings.database_url) as s:
        picks = s.exec(select(Pick).order_by(Pick.id)).all()
        assert [line["id"] for line in lines] == [f"pick-{p.id}" for p in picks]
        assert {line["conversation_id"] for line in lines} == {
            s.get(Turn, teacher).conversation_id} and plain != batch_id
        for line, p in zip(lines, picks):
            chosen, rejected = s.get(Candidate, p.chosen_id), s.get(Candidate, p.rejected_id)
            assert (line["chosen"]["text"], line["rejected"]["text"]) == (chosen.text, rejected.text)
            assert {line["chosen"]["agent"], line["rejected"]["agent"]} == {GOOD, BAD}
            turn = s.get(Turn, p.turn_id)
            history = s.exec(select(Turn.role, Turn.text).where(Turn.conversation_id == turn.conversation_id,
                                                                Turn.index < turn.index).order_by(Turn.index)).all()
            assert line["prompt"] == [{"role": role, "text": text} for role, text in history]
            assert line["turn_index"] == turn.index and line["picker"].startswith("w")
        assert lines[0]["reason"] == "More to it." and s.get(Turn, teacher_2).text == lines[1]["chosen"]["text"]


def own_name(offered: dict, own: str) -> str:
    return next(name for name, c in offered.items() if c.text == own)


def s_turn(settings, worker_id: int, index: int) -> int:
    with session_scope(settings.database_url) as s:
        return s.exec(select(Turn.id).where(Turn.worker_id == worker_id, Turn.index == index)).one()


def test_a_rival_that_fails_leaves_the_turn_its_own_agents_with_nothing_to_pick(settings, providers):
    with session_scope(settings.database_url) as s:
        good = add_agent(s, GOOD).id
        broken = add_agent(s, "broken", endpoint="http://127.0.0.1:9/v1", model="none", timeout_seconds=0.5).id
        load_documents(s, read_documents(sample_tasks_path()))
        key = s.exec(select(Task.key).order_by(Task.id)).first()
    # a launch seed that draws the good agent for the conversation: the broken one is then its rival
    seed = next(n for n in range(20) if lifecycle.draw_agents([key], [good, broken], n, "teacher") == [good])
    launch(settings, providers, teachers=(GOOD, "broken"), seed=seed)
    person = student(settings)
    teacher = answered_teacher_turn(settings, providers, write_first_turn(settings, person))
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Candidate)).all() == []
        held = s.get(Turn, teacher)
        assert held.status == TurnStatus.submitted and held.worker_id == s.get(Agent, good).worker_id
        outcomes = {s.get(Agent, c.agent_id).name: c.outcome for c in s.exec(select(AgentCall))}
        assert outcomes == {GOOD: "ok", "broken": "refused"}
        following = s.exec(select(Turn).where(Turn.index == 2)).one()
        assert pairwise.pending(s, following) is None


def test_pairwise_launch_needs_two_agents_for_a_role_of_a_wizard_of_tasks_batch(settings):
    refused = command(settings, "batch", "launch", "--all", "-n", "1", "--agent", "teacher=sim-good", "--pairwise")
    assert refused.returncode == 1 and refused.stderr.startswith("error: --pairwise compares two agents' replies")
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        for name in ("sim-good", "sim-poor"):
            add_agent(s, name)
    launched = command(settings, "batch", "launch", "--all", "-n", "1", "--agent", "teacher=sim-good,sim-poor",
                       "--pairwise")
    assert launched.returncode == 0, launched.stderr
    assert "pairwise: each teacher turn is answered by two of its agents" in launched.stdout


@pytest.mark.browser
def test_a_student_in_the_browser_picks_one_of_two_replies_and_the_dialog_continues_with_it(
        live_server, browser_context, settings, providers, celery_worker):
    from tests.test_accessibility import serious_violations
    from tests.test_browser_conversation import join, rate_previous, student_turn, submit, take_next_turn

    launch(settings, providers)
    page = join(browser_context, live_server, settings, "student", name="Pia")
    student_turn(page, live_server, "request_items", "Hi! What do I need for this?")
    take_next_turn(page, live_server)  # both agents answered, and the student's next turn is open
    first, second = page.inner_text("#candidate-first"), page.inner_text("#candidate-second")
    assert serious_violations(page) == []  # the two replies and the pick, for a screen reader (axe-core)
    assert sum(any(off in text for off in OFF_TOPIC) for text in (first, second)) == 1
    with session_scope(settings.database_url) as s:
        teacher = s.exec(select(Turn).where(Turn.role == "teacher", Turn.index == 1)).one()
        own = teacher.text
    chosen = "second" if own in first else "first"  # the reply the turn does not hold yet
    picked = page.inner_text(f"#candidate-{chosen}")
    page.check(f"#candidate-{chosen} input[name=pick]")
    page.fill("input[name=pick_reason]", "It answers me.")
    rate_previous(page)
    page.fill("textarea[name=real_life]", "Get the things out.")
    page.check("input[name=intent][value=request_step]")
    page.fill("textarea[name=response]", "Thanks. What comes first?")
    submit(page)
    with session_scope(settings.database_url) as s:
        teacher = s.get(Turn, teacher.id)
        assert teacher.text in picked and teacher.text != own
        (pick,) = s.exec(select(Pick)).all()
        assert pick.reason == "It answers me." and s.get(Candidate, pick.chosen_id).text == teacher.text
    take_next_turn(page, live_server)  # the dialog went on from the reply picked: the history holds it alone
    history = page.inner_text("section.chat")
    assert teacher.text in history and own not in history

