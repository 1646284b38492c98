"""A simulated crowd that plays STAR: users and wizards on STAR's pages, over HTTP, as people would.

What honest workers say comes from a *STAR root* (a folder with ``tasks/`` and ``apis/``, as STAR ships it):

- with STAR's sample ``dialogues/`` in it (``../shared/data/star``), each conversation replays one sample
  dialogue: its scenario (tasks, happy or not, the user guide's instructions as nudges at the user turns
  they preceded), its user utterances (consecutive ones joined, as one paid turn says one thing), and per
  wizard turn the queries the sample's wizard ran (those our knowledge base accepts), the draft it asked
  suggestions for, and the first reply it sent;
- without them (turkflow's own sample tasks, the default, so a run needs nothing beside the checkout),
  scenarios are made as ``turkflow batch launch --protocol star`` makes them, and each dialogue is
  generated along the task's flow chart: the user asks for what the scenario says, answers each question
  with a value the knowledge base knows, changes their mind once in an unhappy scenario, and ends it.

A wizard works its turn on the page: it opens the task's tab, runs the turn's queries, asks for
suggestions with its draft, and picks the scripted reply when the page offers it filled (else the reply
the page offers for a search that found nothing), sometimes (``CUSTOM_SHARE``) writing its own words
instead; a reply the page does not offer is written as a custom one. Bad workers are the crowd's
(``crowd.PROFILES``): spammers send random replies or text, lazy workers the first reply offered or a
word. STAR has no peer ratings; the quality monitor judges workers by what ``protocols.star.judged`` says
(content checks, the wizard's agreement with the knowledge base and the chart, the other role's answers).

Every worker passes STAR's staged qualification on the onboarding pages first (both stages, with a few
hints; a bad worker gets one answer wrong at the first try and passes the second). Both roles answer the
end-of-dialog questions: the user who completes at once, the last wizard from their queue.

Every random draw is seeded by what it decides, as in ``crowd.py``, so a seed gives the same dialogs.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from sqlmodel import Session, col, select

from turkflow import samples
from turkflow.errors import TurkflowError
from turkflow.protocols.star import stages
from turkflow.models import Conversation, DialogEvent, SurveyAnswer, Task, Turn, TurnStatus
from turkflow.protocols.questions import STAR, clean_text
from turkflow.simulator.crowd import (
    LAZY_REPLIES, RATER_ERROR, SPAM_PHRASES, SimWorker, Written, writing_report,
)
from turkflow.simulator.driver import Outcome, QueueSurveys, Surveys, TurnPage, WorkerClient
from turkflow.protocols.star import outcomes
from turkflow.protocols.star.kb import check_repeats, constraints_from
from turkflow.protocols.star.log import load_dialogues
from turkflow.protocols.star.dialog import knowledge_base, make_scenarios, read_tasks, star_turns

ROLES = ("user", "wizard")
CUSTOM_SHARE = 0.1  # an honest wizard writes its own words although the page offers the reply
UNHAPPY_SHARE = 0.2  # of the generated scenarios (STAR's samples say their own)
MULTI_TASK_SHARE = 0.25  # of the generated scenarios (STAR's 300 complete samples have none)
HINTS = (0, 1, 1, 2, 3)  # an honest worker's hints per quiz, drawn
_INSTRUCTION = re.compile(r"\s*\[instruction \d+ of \d+\]\s*$")


def sample_star_root() -> Path:
    """turkflow's own STAR-like tasks (``turkflow/samples/star``): tasks and knowledge base, no dialogues."""
    return samples.STAR_ROOT


def star_root(path: Optional[Path]) -> Path:
    """A STAR root from what the user gave: the root itself or its ``dialogues/`` folder."""
    if path is None:
        return sample_star_root()
    root = path.parent if path.name == "dialogues" and not (path / "tasks").is_dir() else path
    if not (root / "tasks").is_dir():
        raise ValueError(f"{path} is not a STAR root: no tasks/ folder (and apis/ beside it) in it")
    return root


# ---- scripts ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WizardStep:
    """What the scripted wizard does in one turn."""

    queries: tuple[tuple[str, dict], ...] = ()  # (api, {"form": ...} or {"constraints": ...})
    draft: str = ""  # the text it asks suggestions for
    label: Optional[str] = None  # the reply it means to pick
    text: str = ""  # its own words for it (the sample's), if any


@dataclass(frozen=True)
class StarScript:
    """One conversation: its scenario, the user's utterances (the last one completes), the wizard's steps.

    User turn ``2j`` says ``user[j]``; wizard turn ``2j + 1`` does ``wizard[j]``.
    """

    source: str  # "star:<DialogueID>" or "generated:<task>"
    scenario: dict
    user: tuple[str, ...]
    wizard: tuple[WizardStep, ...]

    @property
    def length(self) -> int:
        return 2 * len(self.user) - 1

    def stops_at(self, index: int) -> bool:
        return index == self.length - 1

    def turns(self, max_turns: int) -> int:
        return min(self.length, max_turns)


def write_star_scripts(root: Path, conversations: int, seed: int, max_turns: int,
                       multi_task: bool = True) -> list[StarScript]:
    """One script per conversation: STAR's sample dialogues when ``root`` has them, else generated ones
    (``multi_task``: a share of them with two tasks); each cut to end with the user's complete within
    ``max_turns``."""
    tasks = sorted(read_tasks(root / "tasks"), key=lambda t: t.key)
    keep = max(1, (max_turns + 1) // 2)  # user turns that fit
    if (root / "dialogues").is_dir():
        scripts = _replayed(root / "dialogues", tasks, conversations, seed)
    else:
        scripts = _generated(tasks, conversations, seed, MULTI_TASK_SHARE if multi_task else 0.0)
    return [StarScript(s.source, s.scenario, s.user[:keep], s.wizard[:keep - 1]) for s in scripts]


def _clean(text: Any, fallback: str = "") -> str:
    try:
        cleaned = clean_text(" ".join(str(text or "").split()))
    except TurkflowError:
        cleaned = ""
    return (cleaned or fallback)[:STAR.max_response_chars]


def _replayed(folder: Path, tasks: Sequence[Task], conversations: int, seed: int) -> list[StarScript]:
    by_name = {t.star["task"]: t for t in tasks}
    kbs = {t.star["api"]: knowledge_base(t.star["kb_dir"]) for t in tasks}
    usable = []
    for dialogue in load_dialogues(folder):
        scenario = dialogue.get("Scenario") or {}
        names = [c.get("Task") for c in scenario.get("WizardCapabilities") or []]
        if dialogue.get("CompletionLevel") != "Complete" or not names or not all(n in by_name for n in names):
            continue
        script = _script_of(dialogue, [by_name[n] for n in names], kbs)
        if script is not None:
            usable.append(script)
    if not usable:
        raise ValueError(f"{folder}: no complete STAR dialogue whose tasks are all in tasks/ beside it")
    cursor = random.Random(f"{seed}:star-scripts").randrange(len(usable))
    return [usable[(cursor + n) % len(usable)] for n in range(conversations)]


def _valid(kbs: Mapping[str, Any], api: Any, constraints: Any) -> bool:
    """Whether our knowledge base answers the logged query (STAR's wizards sent a few it refuses, and some
    asking one field twice, which the form refuses)."""
    if api not in kbs or not isinstance(constraints, list):
        return False
    try:
        check_repeats(constraints_from(constraints))
        outcomes.call(kbs[api], api, constraints)
    except TurkflowError:
        return False
    return True


def _script_of(dialogue: Mapping[str, Any], tasks: Sequence[Task],
               kbs: Mapping[str, Any]) -> Optional[StarScript]:
    users: list[str] = []
    steps: list[WizardStep] = []
    nudges: list[dict] = []
    pending: list[str] = []
    segment: list[Mapping[str, Any]] = []
    last_agent = None
    for event in dialogue["Events"]:
        agent, action = event.get("Agent"), event.get("Action")
        if (agent, action) == ("UserGuide", "instruct"):
            text = _clean(_INSTRUCTION.sub("", event.get("Text") or ""))
            if text:
                pending.append(text)
        elif (agent, action) == ("User", "utter"):
            text = _clean(event.get("Text"), "Okay.")
            if last_agent == "User":
                users[-1] = _clean(f"{users[-1]} {text}")
            else:
                if users:
                    steps.append(_step_of(segment, kbs))
                segment = []
                users.append(text)
                nudges += [{"turn": 2 * (len(users) - 1), "text": t} for t in pending]
                pending = []
            last_agent = "User"
        elif (agent, action) == ("User", "complete"):
            break
        elif agent in ("Wizard", "KnowledgeBase") and users:
            segment.append(event)
            last_agent = "Wizard"
    if len(users) < 2:
        return None
    scenario = dialogue.get("Scenario") or {}
    names = [t.star["task"] for t in tasks]
    return StarScript(
        source=f"star:{dialogue.get('DialogueID')}",
        scenario={"tasks": names, "domains": [d for d in scenario.get("Domains") or [] if d],
                  "happy": scenario.get("Happy") is not False, "multi_task": len(names) > 1,
                  "user_task": _clean(scenario.get("UserTask"), "Get your task done."),
                  "wizard_task": _clean(scenario.get("WizardTask"), "Help the user."), "nudges": nudges},
        user=tuple(users), wizard=tuple(steps))


def _step_of(segment: Sequence[Mapping[str, Any]], kbs: Mapping[str, Any]) -> WizardStep:
    """A sample wizard's events between two user turns as one turn: its queries, the draft before its
    first reply, that reply."""
    queries, draft = [], ""
    for event in segment:
        action = event.get("Action")
        if action == "query" and event.get("Agent") == "Wizard":
            if _valid(kbs, event.get("APIName"), event.get("Constraints")):
                queries.append((event["APIName"], {"constraints": event["Constraints"]}))
        elif action == "request_suggestions":
            draft = _clean(event.get("Text"))
        elif action in ("pick_suggestion", "utter") and event.get("Agent") == "Wizard":
            label = event.get("ActionLabel") if action == "pick_suggestion" else None
            return WizardStep(tuple(queries), draft, label, _clean(event.get("Text")))
    return WizardStep(tuple(queries), draft)


def _generated(tasks: Sequence[Task], conversations: int, seed: int, multi_task_share: float) -> list[StarScript]:
    """Scenarios as ``batch launch --protocol star`` makes them, a share of them multi-task (two tasks,
    as ``--tasks-per-dialog 2``), each with a dialogue generated along its tasks' flow charts."""
    single = make_scenarios(tasks, conversations, unhappy=UNHAPPY_SHARE, seed=seed)
    double = make_scenarios(tasks, conversations, unhappy=UNHAPPY_SHARE, seed=seed,
                            tasks_per_dialog=2) if len(tasks) > 1 else single
    by_name = {t.star["task"]: t for t in tasks}
    scripts = []
    for n in range(conversations):
        rng = random.Random(f"{seed}:star-dialogue:{n}")
        _, scenario = double[n] if rng.random() < multi_task_share else single[n]
        scripts.append(_dialogue_for([by_name[name] for name in scenario["tasks"]], scenario, rng))
    return scripts


def _path(graph: Mapping[str, str], start: str) -> list[str]:
    path, node = [], start
    while node is not None and node not in path:
        path.append(node)
        node = graph.get(node)
    return path


def _wanted(api: Any, said: str, rng: random.Random) -> dict[str, str]:
    """The values the user wants, in the form's plain words: every required field, most choice fields,
    and the value the scenario's text ``said`` names where it names one ("a comedy this Saturday")."""
    wanted = {}
    for column in api.inputs.values():
        choices = [c for c in column.categories or () if isinstance(c, str)]
        named = [c for c in choices if re.search(rf"\b{re.escape(c.lower())}\b", said.lower())]
        required = column.name in api.required
        if named:
            wanted[column.name] = named[0]
        elif choices and (required or rng.random() < 0.7):
            wanted[column.name] = rng.choice(choices)
        elif required:
            wanted[column.name] = (str(column.minimum if isinstance(column.minimum, int) else 1)
                                   if column.type == "Integer" else "yes" if column.type == "Boolean"
                                   else rng.choice(("Alex", "Sam", "Jordan")))
    return wanted


def _planned(api: Any, scenario: Mapping[str, Any], number: int) -> dict[str, str]:
    """The values the scenario gives the task (``scenarios.plan_task``) in the form's plain words."""
    plans = scenario.get("plans") or []
    values = plans[number]["values"] if number < len(plans) else {}
    return {name: ("yes" if value else "no") if isinstance(value, bool) else str(value)
            for name, value in values.items() if name in api.inputs}


def _as_me(user_task: str) -> str:
    """The scenario's first sentence as the user would say it ("You want" -> "I want")."""
    first = re.split(r"(?<=[.!?])\s", user_task.strip(), maxsplit=1)[0]
    said = re.sub(r"\bYou\b", "I", re.sub(r"\byou\b", "I", first))
    return re.sub(r"\b[Yy]our\b", "my", said)


BYE = "No, that is all. Thank you, Goodbye!"


def _dialogue_for(tasks: Sequence[Task], scenario: dict, rng: random.Random) -> StarScript:
    """A dialogue along each task's flow chart in turn (module docstring): the wizard greets once and
    asks if there is anything else once, at the end; the user brings up the next task when one is done."""
    users = [rng.choice(("Hi there!", "Hello.", "Hi, can you help me?"))]
    steps: list[WizardStep] = []
    changed = scenario["happy"]
    for number, task in enumerate(tasks):
        api = knowledge_base(task.star["kb_dir"]).api(task.star["api"])
        wanted = _wanted(api, task.star["user_task"], rng)
        wanted.update(_planned(api, scenario, number))  # the entities the scenario names, as the user would
        plans = scenario.get("plans") or []
        opening = plans[number]["user_task"] if number < len(plans) else task.star["user_task"]
        choices = {c.name: [v for v in c.categories or () if isinstance(v, str)] for c in api.inputs.values()}
        query: tuple[tuple[str, dict], ...] = ()
        if number > 0:
            users[-1] = f"{users[-1]} Also, {_as_me(opening)}"
        for node in _path(task.star["graph"], task.star["start"]):
            if node == "query":
                query = ((api.name, {"form": dict(wanted)}),)
                continue
            if node.startswith(("anything_else", "goodbye", "bye")):
                break
            if node.startswith("hello") and number > 0:
                continue
            steps.append(WizardStep(queries=query, draft=_draft(task.star["replies"].get(node, ""), rng),
                                    label=node))
            query = ()
            if node.startswith("hello"):
                users.append(_as_me(opening))
            elif "_ask_" in f"_{node}":
                asked = node.split("ask_", 1)[1].replace("_", "").lower()
                field = next((name for name in wanted if name.lower().startswith(asked)
                              or asked.startswith(name.lower())), None)
                users.append(rng.choice(("{}, please.", "I'd like {}.", "{} would be great."))
                             .format(wanted[field]) if field else "Anything is fine.")
            elif "inform" in node and not changed:
                changed = True
                field = next((name for name in wanted if len(choices.get(name, [])) > 1), None)
                if field is None:
                    users.append("Great, thank you.")
                    continue
                wanted[field] = rng.choice([c for c in choices[field] if c != wanted[field]])
                users.append(f"Actually, I changed my mind: could you check {wanted[field]} instead?")
                steps.append(WizardStep(queries=((api.name, {"form": dict(wanted)}),), label=node))
                users.append("Great, thank you.")
            elif "inform" in node:
                users.append(rng.choice(("Great, thank you.", "Perfect, thanks!")))
            else:
                users.append("Okay.")
    steps.append(WizardStep(label="anything_else"))
    users.append(BYE)
    return StarScript(source=f"generated:{'+'.join(t.star['task'] for t in tasks)}", scenario=scenario,
                      user=tuple(users), wizard=tuple(steps))


def _draft(template: str, rng: random.Random) -> str:
    """The first words of the reply the wizard has in mind, typed before asking for suggestions."""
    words = [w for w in re.sub(r"\{[^}]*\}", "", template).split() if w][:3]
    return " ".join(words) if words and rng.random() < 0.5 else ""


# ---- playing on the pages -----------------------------------------------------------------------------


def _spam(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(SPAM_PHRASES)
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 8)))
                    for _ in range(rng.randint(2, 9)))


def _yes(value: bool) -> str:
    return "yes" if value else "no"


class StarPlay:
    """How simulated workers play STAR's turns (``driver.ProtocolPlay``)."""

    protocol = STAR.name
    roles = ROLES

    def __init__(self, root: Path, scripts: Sequence[StarScript], seed: int):
        self.root = root
        self.scripts = list(scripts)
        self.seed = seed
        tasks = read_tasks(root / "tasks")
        self.task_of_api = {t.star["api"]: t.star["task"] for t in tasks}
        self.tasks_of_label: dict[str, list[str]] = {}
        for t in tasks:
            for label in t.star["replies"]:
                self.tasks_of_label.setdefault(label, []).append(t.star["task"])

    # -- the requester's part --

    def tasks(self, session: Session) -> tuple[list[Task], list[tuple[Task, dict]]]:
        """Load the root's tasks; the batch's tasks and each conversation's (first task, scenario)."""
        from turkflow.protocols.registry import load_tasks

        load_tasks(session, read_tasks(self.root / "tasks"))
        names = sorted({name for s in self.scripts for name in s.scenario["tasks"]})
        by_name = {t.star["task"]: t for t in session.exec(
            select(Task).where(col(Task.key).in_([f"star:{n}" for n in names])))}
        return ([by_name[n] for n in names],
                [(by_name[s.scenario["tasks"][0]], s.scenario) for s in self.scripts])

    # -- a worker's part --

    def join(self, client: WorkerClient, worker: SimWorker) -> None:
        """Pass both of the role's stages on the onboarding pages (module docstring)."""
        for number in (stages.SINGLE_TASK, stages.MULTI_TASK):
            stage = stages.stage_for(worker.role, number)
            for attempt_no in (1, 2):
                rng = random.Random(f"{self.seed}:stage:{worker.name}:{number}:{attempt_no}")
                attempt = client.post("POST /onboarding/stage/start",
                                      f"/onboarding/stage/{number}/start")["attempt"]
                asked = [q.name for q in stage.questions]
                for name in rng.sample(asked, rng.choice(HINTS)):
                    client.post("POST /onboarding/stage/hint", f"/onboarding/stage/{number}/hint",
                                data={"attempt": attempt, "hint": name})
                answers = {q.name: q.answer for q in stage.questions}
                if worker.bad_writer and number == stages.SINGLE_TASK and attempt_no == 1:
                    wrong = rng.choice(stage.questions)
                    answers[wrong.name] = next(k for k, _ in wrong.options if k != wrong.answer)
                graded = client.post("POST /onboarding/stage", f"/onboarding/stage/{number}",
                                     data={"attempt": attempt, **answers})
                if graded["passed"]:
                    break

    def turn(self, page: TurnPage, worker: SimWorker, conversation: int, index: int, view: dict[str, Any],
             outcome: Outcome) -> tuple[Written, dict[str, Any]]:
        """Work one turn on its page and submit it; returns what was said and the server's answer."""
        script = self.scripts[conversation]
        rng = random.Random(f"{self.seed}:star-turn:{conversation}:{index}")
        good = rng.random() < worker.quality
        if worker.role == "user":
            body = self._user(worker, script, index, view, rng)
        else:
            body = self._wizard(page, worker, script.wizard[index // 2], view["star"]["wizard"], rng)
        if body["action"] == "utter":  # typed; a picked reply is one click
            keyboard = random.Random(f"{self.seed}:typing:{conversation}:{index}")
            body["signals"] = json.dumps(writing_report(worker, body["text"], keyboard, self.seed))
        confirmed = page.submit(body)
        if confirmed.get("survey_url"):  # this turn ended the dialog: its questions come at once
            self.answer_survey(page, worker, confirmed["survey_url"], conversation, outcome)
        said = Written(form={"response": body["text"]}, good=good, rated_relevant=None, rated_useful=None)
        return said, confirmed

    def _user(self, worker: SimWorker, script: StarScript, index: int, view: dict[str, Any],
              rng: random.Random) -> dict[str, Any]:
        writes = worker.profile.writes
        if writes == "replay":
            text = script.user[(index // 2) % len(script.user)]
            if script.source.startswith("generated:"):  # follow a nudge given now (STAR's users did)
                for nudge in view["star"]["user"]["nudges"]:
                    if nudge["new"] and nudge["text"].startswith("Mention that "):
                        said = _as_me(_INSTRUCTION.sub("", nudge["text"])[len("Mention that "):])
                        text = f"{text} By the way, {said}"
        elif writes == "short":
            text = rng.choice(LAZY_REPLIES)
        else:
            text = _spam(rng)
        body = {"action": "utter", "text": _clean(text, "Okay.")}
        if script.stops_at(index):
            body["complete"] = "yes"
        return body

    def _wizard(self, page: TurnPage, worker: SimWorker, step: WizardStep, shown: dict[str, Any],
                rng: random.Random) -> dict[str, Any]:
        def act(action: str, **fields: Any) -> dict[str, Any]:
            return page.act({"action": action, **fields})["wizard"]

        def open_tab(task: str) -> None:
            nonlocal shown
            if shown["task"]["name"] != task and task in {t["name"] for t in shown["tasks"]}:
                shown = act("select_task", task=task)

        writes = worker.profile.writes
        if writes == "replay":
            for api, query in step.queries:
                open_tab(self.task_of_api.get(api, ""))
                shown = act("query", api=api, **query)
            if step.draft:
                shown = act("request_suggestions", text=step.draft)
            if step.label and step.label not in shown["chart"]["replies"]:
                for task in self.tasks_of_label.get(step.label, []):
                    open_tab(task)
        offered = [s for s in shown["suggestions"] if not s["missing"]]
        options = [s["label"] for s in shown["suggestions"]]

        def pick(s: dict[str, Any]) -> dict[str, Any]:
            return {"action": "pick_suggestion", "label": s["label"], "options": options, "text": s["text"]}

        def own(text: str) -> dict[str, Any]:
            return {"action": "utter", "text": _clean(text, "One moment, please.")}

        if writes == "spam":
            return pick(rng.choice(offered)) if offered and rng.random() < 0.5 else own(_spam(rng))
        if writes == "short":
            return pick(offered[0]) if offered else own(rng.choice(LAZY_REPLIES))
        chosen = next((s for s in offered if s["label"] == step.label), None)
        if chosen is None and step.label and shown["item"] is None:  # the search found nothing
            chosen = next((s for s in offered if "nothing_found" in s["label"]), None)
        custom = rng.random() < CUSTOM_SHARE
        if chosen is not None and not custom:
            return pick(chosen)
        if step.text:
            return own(step.text)
        if chosen is not None:
            return own(rng.choice(("Sure! ", "Okay. ", "Right, ")) + chosen["text"])
        return pick(offered[0]) if offered else own("One moment, please.")

    # -- the end-of-dialog questions --

    def answer_survey(self, surveys: Surveys, worker: SimWorker, survey_url: str, conversation: int,
                      outcome: Outcome) -> None:
        asked = surveys.questions(survey_url)
        if asked["answered"] is not None:
            return
        script = self.scripts[conversation]
        bad = {r.writer for (c, _), r in outcome.turns.items() if c == conversation
               and outcome.by_name[r.writer].bad_writer}
        bad_roles = {outcome.by_name[name].role for name in bad}
        rng = random.Random(f"{self.seed}:survey:{conversation}:{worker.role}")
        truth = {"task_done": "wizard" not in bad_roles, "calm": "wizard" not in bad_roles,
                 "changed_mind": not script.scenario.get("happy", True), "aggressive": "user" in bad_roles,
                 "unsure": rng.random() < 0.1}
        rates = worker.profile.rates
        answers = {}
        for question in asked["questions"]:
            name = question["name"]
            if rates == "truthful":
                answers[name] = _yes(truth.get(name, True) != (rng.random() < RATER_ERROR))
            elif rates == "random":
                answers[name] = _yes(rng.random() < 0.5)
            else:
                answers[name] = "no"
        surveys.answer(survey_url, answers)

    def finish(self, client: WorkerClient, worker: SimWorker, outcome: Outcome) -> None:
        """Answer every dialog's questions still owed (the last wizards find them in their queue)."""
        position = {cid: n for n, cid in enumerate(outcome.conversation_ids)}
        for due in client.queue()["surveys"]:
            if due["conversation_id"] in position:
                self.answer_survey(QueueSurveys(client), worker, f"/survey/{due['conversation_id']}",
                                   position[due["conversation_id"]], outcome)

    # -- the report --

    def report(self, session: Session, outcome: Outcome) -> dict[str, Any]:
        """What the STAR dialogs hold, from the database (STAR's turns as protocols.star.dialog counts them)."""
        conversations = session.exec(
            select(Conversation).where(Conversation.batch_id == outcome.batch_id)).all()
        complete = {c.id for c in conversations
                    if c.status == "completed" and c.end_reason == "user_complete"}
        events = session.exec(select(DialogEvent).where(
            col(DialogEvent.conversation_id).in_([c.id for c in conversations]))
            .order_by(col(DialogEvent.id))).all()
        actions = Counter(f"{e.agent} {e.action}" for e in events)
        answers = session.exec(select(SurveyAnswer.conversation_id, SurveyAnswer.role).where(
            col(SurveyAnswer.conversation_id).in_([c.id for c in conversations]))).all()
        paid = session.exec(select(Turn.label).join(Conversation, Conversation.id == Turn.conversation_id)
                            .where(Conversation.batch_id == outcome.batch_id,
                                   Turn.status == TurnStatus.submitted)).all()
        sources = Counter(self.scripts[n].source.split(":")[0] for n in range(len(outcome.conversation_ids)))
        picks, written = actions["Wizard pick_suggestion"], actions["Wizard utter"]
        return {
            "scripts": dict(sources),
            "multi_task": sum(1 for s in self.scripts if len(s.scenario["tasks"]) > 1),
            "unhappy": sum(1 for s in self.scripts if not s.scenario.get("happy", True)),
            "complete_dialogs": len(complete),
            "star_turns": star_turns(events),
            "star_turns_in_complete_dialogs": star_turns(e for e in events if e.conversation_id in complete),
            "paid_turns_by_label": dict(sorted(Counter(paid).items())),
            "events": dict(sorted(actions.items())),
            "queries_found_nothing": sum(1 for e in events if e.action == "return_item"
                                         and e.data.get("Item") is None),
            "picked_share": round(picks / (picks + written), 4) if picks + written else None,
            "surveys_answered": dict(sorted(Counter(role for _, role in set(answers)).items())),
        }


def play_for(config: Any) -> tuple[list[StarScript], StarPlay]:
    """STAR's scripts and play for a simulation (``run.PLAYS``): STAR's sample dialogues replayed from
    ``config.dialogs``, or dialogues generated on turkflow's sample tasks. On Prolific every dialog has one
    task: the hand-made role groups that vouch for the simulated participants stand for STAR's first
    qualification stage only, and a multi-task dialog needs the second (``prolific.py``)."""
    root = star_root(config.dialogs)
    scripts = write_star_scripts(root, config.conversations, config.seed, config.max_turns,
                                 multi_task=config.provider == "local")
    return scripts, StarPlay(root, scripts, config.seed)
