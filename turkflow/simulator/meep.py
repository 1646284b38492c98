"""A simulated crowd that plays MEEP: users type where they want to go, agents only click, over HTTP.

Scenarios are made as ``turkflow batch launch --protocol meep`` makes them, from a requester's MEEP folder
(``config.dialogs``; turkflow's sample, ``turkflow/samples/meep``, by default). Each conversation is five
paid turns, as in MEEP's trips: the user says where they want to go (the destination's name and street,
in one of a few phrasings); the agent clicks those words into ``find_place``'s query and the start
location's fields into its point, then says what it found in a template filled by clicking the result's
fields ("I found {} on {}. It is {} minutes and {} miles away.") and asks "Shall we go?"; the user agrees;
the agent clicks the result's point into ``start_driving`` and says where they are going; the user sees
the destination on the map and approves or disapproves it, which ends the dialog (MEEP's success label).
An agent that never drove leaves the user to end the dialog with a last message. A shorter ``max_turns``
keeps the first user turns, the last one ending the dialog.

Bad workers are the crowd's (``crowd.PROFILES``): a spamming agent picks random templates filled with
random words of the user's message, a lazy one sends "Where would you like to go?"; spamming and lazy users
type what such users type. Whatever they do is a click the log can execute, so replay finds nothing to
report on an untouched batch. MEEP has no qualification of its own: workers pass the role's first
onboarding stage (``turkflow.protocols.star.stages``) on the onboarding pages, as a STAR worker of the role does.

Every random draw is seeded by what it decides, as in ``crowd.py``, so a seed gives the same dialogs.
"""

from __future__ import annotations

import json
import random
import string
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from sqlmodel import Session, col, select

from turkflow import samples
from turkflow.protocols.star import stages
from turkflow.protocols.meep.kb import KnowledgeBase
from turkflow.protocols.meep.tokens import words
from turkflow.protocols.meep.dialog import make_scenarios, read_tasks
from turkflow.models import Conversation, DialogEvent, Task, Turn, TurnStatus
from turkflow.protocols.questions import MEEP
from turkflow.simulator.crowd import LAZY_REPLIES, RATER_ERROR, SPAM_PHRASES, SimWorker, Written, writing_report
from turkflow.simulator.driver import Outcome, QueueSurveys, Surveys, TurnPage, WorkerClient

ROLES = ("user", "wizard")
ASKS = ("Hi! I'd like to go to {name} on {street}, please.", "Can you take me to {name} on {street}?",
        "Hello, I want to go to {name}, the one on {street}.")
AGREE = ("Yes, let's go.", "Yes, that's the one. Let's go!", "Perfect, let's go there.")
THANKS = ("Thank you!", "Great, thanks a lot.", "Thanks, bye!")
FOUND = "t8"  # I found {} on {}. It is {} minutes and {} miles away.
FOUND_FIELDS = ("name", "street_name", "duration_minutes", "distance_miles")
SHALL_WE, GOING, WHERE = "t5", "t11", "t1"


def sample_folder() -> Path:
    return samples.TASKS["meep"]


@dataclass(frozen=True)
class MeepScript:
    """One conversation: its scenario and what its user says; user turn ``2j`` says ``user[j]``, the
    last one ending the dialog. The agent's turns follow from the page (module docstring)."""

    source: str  # "generated:<goal id>"
    scenario: dict
    user: tuple[str, ...]

    @property
    def length(self) -> int:
        return 2 * len(self.user) - 1

    def stops_at(self, index: int) -> bool:
        return index == self.length - 1

    def turns(self, max_turns: int) -> int:
        return min(self.length, max_turns)


def write_meep_scripts(folder: Path, conversations: int, seed: int, max_turns: int) -> list[MeepScript]:
    """A script per conversation on the folder's goals, its scenario as a launch makes it."""
    scenarios = make_scenarios(read_tasks(folder), conversations, seed=seed)
    keep = max(1, (max_turns + 1) // 2)  # user turns that fit
    scripts = []
    for n, (_, scenario) in enumerate(scenarios):
        rng = random.Random(f"{seed}:meep-dialogue:{n}")
        place = scenario["destination"]
        ask = rng.choice(ASKS).format(name=place["name"], street=place["street_name"])
        said = (ask, rng.choice(AGREE), rng.choice(THANKS))
        scripts.append(MeepScript(f"generated:{scenario['goal_id']}", scenario, said[:keep]))
    return scripts


def play_for(config: Any) -> tuple[list[MeepScript], "MeepPlay"]:
    """MEEP's scripts and play for a simulation (``run.PLAYS``), on the folder ``config.dialogs`` or the
    sample."""
    folder = Path(config.dialogs) if config.dialogs else sample_folder()
    scripts = write_meep_scripts(folder, config.conversations, config.seed, config.max_turns)
    return scripts, MeepPlay(folder, scripts, config.seed)


def _spam(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(SPAM_PHRASES)
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 8)))
                    for _ in range(rng.randint(2, 9)))


def _field(result: str, name: str) -> dict[str, str]:
    return {"result": result, "field": name}


class MeepPlay:
    """How simulated workers play MEEP's turns (``driver.ProtocolPlay``)."""

    protocol = MEEP.name
    roles = ROLES

    def __init__(self, folder: Path, scripts: Sequence[MeepScript], seed: int):
        self.folder = folder.resolve()
        self.scripts = list(scripts)
        self.seed = seed
        self.kb = KnowledgeBase.load(self.folder)

    # -- the requester's part --

    def tasks(self, session: Session) -> tuple[list[Task], list[tuple[Task, dict]]]:
        """Load the folder's goals; the batch's tasks and each conversation's (task, scenario)."""
        from turkflow.protocols.registry import load_tasks

        load_tasks(session, read_tasks(self.folder))
        goals = sorted({s.scenario["goal_id"] for s in self.scripts})
        by_goal = {t.star["goal_id"]: t for t in session.exec(
            select(Task).where(col(Task.key).in_([f"meep:{g}" for g in goals])))}
        return [by_goal[g] for g in goals], [(by_goal[s.scenario["goal_id"]], s.scenario) for s in self.scripts]

    # -- a worker's part --

    def join(self, client: WorkerClient, worker: SimWorker) -> None:
        """Pass the role's first onboarding stage (MEEP has none of its own)."""
        stage = stages.stage_for(worker.role, stages.SINGLE_TASK)
        attempt = client.post("POST /onboarding/stage/start", f"/onboarding/stage/{stage.number}/start")["attempt"]
        client.post("POST /onboarding/stage", f"/onboarding/stage/{stage.number}",
                    data={"attempt": attempt, **{q.name: q.answer for q in stage.questions}})

    def turn(self, page: TurnPage, worker: SimWorker, conversation: int, index: int, view: dict[str, Any],
             outcome: Outcome) -> tuple[Written, dict[str, Any]]:
        """Work one turn on its page (an agent clicks first) and submit it; returns what was said and the
        server's answer."""
        script = self.scripts[conversation]
        rng = random.Random(f"{self.seed}:meep-turn:{conversation}:{index}")
        good = rng.random() < worker.quality
        if worker.role == "user" and view["meep"]["user"].get("destination"):
            body = self._judge(worker, script, view["meep"]["user"]["destination"], conversation, outcome)
        elif worker.role == "user":
            body = self._user(worker, script, index, rng)
        else:
            self._agent(page, worker, view["meep"]["agent"], rng)
            body = {"action": "send"}
        confirmed = page.submit(body)
        if confirmed.get("survey_url"):  # this turn ended the dialog: its question comes at once
            self.answer_survey(page, worker, confirmed["survey_url"], conversation, outcome)
        said = Written(form={"response": confirmed["text"]}, good=good, rated_relevant=None, rated_useful=None)
        return said, confirmed

    def _user(self, worker: SimWorker, script: MeepScript, index: int, rng: random.Random) -> dict[str, Any]:
        writes = worker.profile.writes
        if writes == "replay":
            text = script.user[(index // 2) % len(script.user)]
        elif writes == "short":
            text = rng.choice(LAZY_REPLIES)
        else:
            text = _spam(rng)
        keyboard = random.Random(f"{self.seed}:typing:{script.source}:{index}")
        body: dict[str, Any] = {"text": text, "signals": json.dumps(writing_report(worker, text, keyboard, self.seed))}
        if script.stops_at(index):
            body["complete"] = "yes"
        return body

    def _judge(self, worker: SimWorker, script: MeepScript, point: dict[str, Any], conversation: int,
               outcome: Outcome) -> dict[str, Any]:
        """The user's verdict on the map: a truthful user approves the goal's place (slips at the raters'
        rate), a random one flips a coin, a careless one disapproves."""
        wanted = script.scenario["destination"]
        right = (point["latitude"], point["longitude"]) == (wanted["latitude"], wanted["longitude"])
        rng = random.Random(f"{self.seed}:judge:{conversation}")
        rates = worker.profile.rates
        if rates == "truthful":
            approved = right != (rng.random() < RATER_ERROR)
        elif rates == "random":
            approved = rng.random() < 0.5
        else:
            approved = False
        return {"approved": "yes" if approved else "no"}

    def _agent(self, page: TurnPage, worker: SimWorker, shown: dict[str, Any], rng: random.Random) -> None:
        """The clicks of one agent turn: an API call and templates, as the module docstring says."""
        def click(action: str, **fields: Any) -> dict[str, Any]:
            return page.act({"action": action, **fields})

        last = next((m for m in shown["messages"] if m["number"] == shown["last_message"]), None)
        writes = worker.profile.writes
        if writes == "spam" and last is not None:
            template = rng.choice([t for t in shown["templates"] if len(t["parts"]) > 1])
            click("pick_template", template=template["id"],
                  fillers=[{"tokens": [rng.choice(last["tokens"])["index"]]} for _ in template["parts"][1:]])
            return
        if writes == "short" or last is None:
            click("pick_template", template=WHERE, fillers=[])
            return
        found = next((r for r in reversed(shown["panel"]) if r["api"] == "find_place"), None)
        if found is not None:  # the user agreed: drive there
            click("call_api", api="start_driving", arguments={"latitude": _field(found["id"], "latitude"),
                                                              "longitude": _field(found["id"], "longitude")})
            click("pick_template", template=GOING, fillers=[_field(found["id"], "name")])
            return
        named = self._named(shown["messages"])
        if named is None:
            click("pick_template", template=WHERE, fillers=[])
            return
        message, wanted = named
        answer = click("call_api", api="find_place", arguments={
            "query": {"message": message["number"],
                      "tokens": [t["index"] for t in message["tokens"] if t["text"].lower() in wanted]},
            "latitude": _field("source", "latitude"), "longitude": _field("source", "longitude")})
        found = next((r for r in reversed(answer["agent"]["panel"]) if r["api"] == "find_place"), None)
        if found is None:
            click("pick_template", template="t10", fillers=[])
            return
        click("pick_template", template=FOUND, fillers=[_field(found["id"], f) for f in FOUND_FIELDS])
        click("pick_template", template=SHALL_WE, fillers=[])

    def _named(self, messages: list[dict[str, Any]]) -> Optional[tuple[dict[str, Any], set[str]]]:
        """The latest user message naming a place of the knowledge base, and the words that name it (its
        name and street): what an agent reading the chat would click. The simulation finds them by the
        table."""
        for message in reversed(messages):
            said = message["text"].lower()
            named = [row for rows in self.kb.tables.values() for row in rows
                     if str(row.get("name", "")).lower() in said]
            if named:
                best = max(named, key=lambda row: (str(row.get("street_name", "")).lower() in said,
                                                   len(str(row["name"]))))
                return message, set(words(f"{best['name']} {best.get('street_name', '')}"))
        return None

    # -- the end-of-dialog question --

    def answer_survey(self, surveys: Surveys, worker: SimWorker, survey_url: str, conversation: int,
                      outcome: Outcome) -> None:
        """The user confirms whether the agent got them there: truthfully, at random, or "no"."""
        asked = surveys.questions(survey_url)
        if asked["answered"] is not None:
            return
        bad_agent = any(c == conversation and outcome.by_name[r.writer].role == "wizard"
                        and outcome.by_name[r.writer].bad_writer for (c, _), r in outcome.turns.items())
        rng = random.Random(f"{self.seed}:survey:{conversation}:{worker.role}")
        rates = worker.profile.rates
        answers = {}
        for question in asked["questions"]:
            if rates == "truthful":
                answers[question["name"]] = "yes" if (not bad_agent) != (rng.random() < RATER_ERROR) else "no"
            elif rates == "random":
                answers[question["name"]] = rng.choice(("yes", "no"))
            else:
                answers[question["name"]] = "no"
        surveys.answer(survey_url, answers)

    def finish(self, client: WorkerClient, worker: SimWorker, outcome: Outcome) -> None:
        """Answer every dialog's question still owed (a dialog that ran out of turns)."""
        position = {cid: n for n, cid in enumerate(outcome.conversation_ids)}
        for due in client.queue()["surveys"]:
            if due["conversation_id"] in position:
                self.answer_survey(QueueSurveys(client), worker, f"/survey/{due['conversation_id']}",
                                   position[due["conversation_id"]], outcome)

    # -- the report --

    def report(self, session: Session, outcome: Outcome) -> dict[str, Any]:
        """What the MEEP dialogs hold, from the database: clicks by kind, messages, answers."""
        conversations = session.exec(select(Conversation).where(Conversation.batch_id == outcome.batch_id)).all()
        ids = [c.id for c in conversations]
        events = session.exec(select(DialogEvent).where(col(DialogEvent.conversation_id).in_(ids))).all()
        actions = Counter(f"{e.agent} {e.action}" for e in events)
        paid = session.exec(select(Turn.label).join(Conversation, Conversation.id == Turn.conversation_id)
                            .where(Conversation.batch_id == outcome.batch_id,
                                   Turn.status == TurnStatus.submitted)).all()
        return {
            "goals": dict(sorted(Counter(s.scenario["goal_id"] for s in self.scripts).items())),
            "complete_dialogs": sum(1 for c in conversations if c.end_reason == "user_complete"),
            "paid_turns_by_label": dict(sorted(Counter(paid).items())),
            "events": dict(sorted(actions.items())),
            "apis_called": dict(sorted(Counter(e.data.get("API") for e in events if e.action == "call_api").items())),
            "templates_picked": dict(sorted(Counter(e.data.get("Template") for e in events
                                                    if e.action == "pick_template").items())),
            "approved": dict(sorted(Counter("yes" if e.data.get("Approved") else "no" for e in events
                                            if e.action == "judge").items())),
        }

