"""A simulated crowd that plays Frames: users and wizards on Frames' pages, over HTTP, as people would.

Goals are drawn as ``turkflow batch launch --protocol frames`` draws them (each template's own probability
of success) from a domain file: turkflow's sample (``turkflow/samples/frames/frames.yaml``) unless the
simulation is given another with ``--dialogs DOMAIN.yaml``. Each conversation is planned from its goal:

- the user states the goal's conditions; the wizard searches with them and says what the search found: the
  first item, or that nothing matches and, when the page shows one, the relaxed suggestion;
- a user whose goal matched something asks to book it, and the next wizard books the first item the
  newest search showed, which ends the dialog (as most Frames dialogues end); one whose goal matched
  nothing follows the goal's failure rule: states the alternate goal (the wizard searches again; if it
  finds something the user asks to book it, else ends the dialog), or ends the dialog at once.

So a dialog is three to six paid turns, known before it starts, while what the wizard says and books comes
from the searches the stack answers. Bad workers are the crowd's (``crowd.PROFILES``): spammers send random text,
lazy workers a word, and neither searches. Workers qualify as STAR's users and wizards do (the roles share
the onboarding stages). Both roles answer the end-of-dialog questions: the user who ends the dialog at
once (cooperativity, 1-5), the last wizard from their queue (whether the user reached the goal).

Every random draw is seeded by what it decides, as in ``crowd.py``, so a seed gives the same dialogs.
"""

from __future__ import annotations

import json
import random
import string
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from sqlmodel import Session, col, select

from turkflow.protocols.frames.domain import SAMPLE
from turkflow.protocols.frames.goals import show
from turkflow.protocols.frames.dialog import make_scenarios, read_tasks, success_summary
from turkflow.models import Conversation, DialogEvent, SurveyAnswer, Task
from turkflow.protocols.questions import FRAMES
from turkflow.simulator.crowd import (
    LAZY_REPLIES, RATER_ERROR, SPAM_PHRASES, SimWorker, Written, writing_report,
)
from turkflow.simulator.driver import Outcome, QueueSurveys, Surveys, TurnPage, WorkerClient
from turkflow.simulator.star import StarPlay

ROLES = ("user", "wizard")
SHOWN_FIELDS = 6  # of the first item, in the wizard's reply


def goal_line(constraints: Sequence[Mapping[str, Any]]) -> str:
    """A goal's conditions as a user says them ("origin is Boston, price at most 1,900")."""
    return ", ".join(f"{c['field'].replace('_', ' ')} {c['op'].replace('_', ' ')} {show(c['value'])}"
                     for c in constraints)


def search_of(constraints: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The conditions as the search action takes them: ``{field: value}`` or ``{field: {op: value}}``."""
    search: dict[str, Any] = {}
    for c in constraints:
        if c["op"] == "is":
            search[c["field"]] = c["value"]
        else:
            search.setdefault(c["field"], {})[c["op"]] = c["value"]
    return search


# ---- scripts ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FramesScript:
    """One conversation planned from its goal: user turn ``2j`` says ``user[j]``; wizard turn ``2j + 1``
    searches with ``searches[j]`` and says what it found, or (``books``, the last turn) books the first
    item the newest search showed, which ends the dialog; otherwise the user's last turn ends it."""

    task_key: str
    scenario: dict
    user: tuple[str, ...]
    searches: tuple[dict, ...]
    books: bool = False

    @property
    def length(self) -> int:
        return 2 * len(self.user) - (0 if self.books else 1)

    def stops_at(self, index: int) -> bool:
        return index == self.length - 1

    def books_at(self, index: int) -> bool:
        return self.books and self.stops_at(index)

    def turns(self, max_turns: int) -> int:
        return min(self.length, max_turns)

    @property
    def reached(self) -> bool:
        """Whether the goal, or the alternate the user falls back on, matches something in the database."""
        alternate = self.scenario.get("alternate")
        return self.scenario["matches"] > 0 or bool(alternate and alternate["matches"] > 0)


def write_frames_scripts(domain: Path, conversations: int, seed: int, max_turns: int) -> list[FramesScript]:
    """A script per conversation from the goals a launch draws on ``domain``, cut to end with the user's
    last message within ``max_turns``."""
    keep = max(1, (max_turns + 1) // 2)  # user turns that fit
    scripts = []
    for n, (task, goal) in enumerate(make_scenarios(read_tasks(domain), conversations, seed=seed)):
        rng = random.Random(f"{seed}:frames-dialogue:{n}")
        hello = rng.choice(("Hi! I'm looking for a trip", "Hello, can you help me find something",
                            "Hi there, I need a package"))
        user = [f"{hello}: {goal_line(goal['constraints'])}."]
        searches = [search_of(goal["constraints"])]
        alternate = goal.get("alternate")
        book = rng.choice(("That sounds perfect, please book it. Thank you!", "Great, book that one please."))
        if goal["matches"] > 0:
            user.append(book)
        elif alternate:
            user.append(f"Hmm. Could you look again with {goal_line(alternate['constraints'])}?")
            searches.append(search_of(alternate["constraints"]))
            user.append(book if alternate["matches"] > 0 else "Too bad. Thanks for looking, goodbye.")
        else:
            user.append("Too bad, then I'll leave it. Thanks anyway, goodbye.")
        books = goal["matches"] > 0 or bool(alternate and alternate["matches"] > 0)
        if books and 2 * len(user) <= max_turns:
            scripts.append(FramesScript(task.key, goal, tuple(user), tuple(searches), books=True))
        else:
            scripts.append(FramesScript(task.key, goal, tuple(user[:keep]), tuple(searches[:keep - 1])))
    return scripts


# ---- playing on the pages -----------------------------------------------------------------------------


def _spam(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(SPAM_PHRASES)
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 8)))
                    for _ in range(rng.randint(2, 9)))


def reply_to(search: Mapping[str, Any]) -> str:
    """What an honest wizard says about the search the page shows (its newest)."""
    if search["total"]:
        first = search["items"][0]
        fields = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in list(first.items())[1:SHOWN_FIELDS + 1])
        many = f"{search['total']} options" if search["total"] > 1 else "one option"
        return f"I have {many} for you. The first: {fields}."
    if search["suggestions"]:
        return f"Sorry, nothing matches exactly. I could offer this instead: {search['suggestions'][0]['text']}."
    return "I'm sorry, nothing in our database matches that."


class FramesPlay:
    """How simulated workers play Frames' turns (``driver.ProtocolPlay``)."""

    protocol = FRAMES.name
    roles = ROLES
    join = StarPlay.join  # the roles share STAR's onboarding stages (turkflow.protocols.star.stages)

    def __init__(self, domain: Path, scripts: Sequence[FramesScript], seed: int):
        self.domain = domain
        self.scripts = list(scripts)
        self.seed = seed

    # -- the requester's part --

    def tasks(self, session: Session) -> tuple[list[Task], list[tuple[Task, dict]]]:
        """Load the domain's templates; the batch's tasks and each conversation's (template, goal)."""
        from turkflow.protocols.registry import load_tasks

        load_tasks(session, read_tasks(self.domain))
        keys = sorted({s.task_key for s in self.scripts})
        by_key = {t.key: t for t in session.exec(select(Task).where(col(Task.key).in_(keys)))}
        return [by_key[k] for k in keys], [(by_key[s.task_key], s.scenario) for s in self.scripts]

    # -- a worker's part --

    def turn(self, page: TurnPage, worker: SimWorker, conversation: int, index: int, view: dict[str, Any],
             outcome: Outcome) -> tuple[Written, dict[str, Any]]:
        """Work one turn on its page and submit it; returns what was said and the server's answer."""
        script = self.scripts[conversation]
        rng = random.Random(f"{self.seed}:frames-turn:{conversation}:{index}")
        good = rng.random() < worker.quality
        writes = worker.profile.writes
        booked = self.book(page, script.searches[-1]) if script.books_at(index) else None
        if writes == "spam":
            text = _spam(rng)
        elif writes == "short":
            text = rng.choice(LAZY_REPLIES)
        elif worker.role == "user":
            text = script.user[(index // 2) % len(script.user)]
        elif booked is not None:
            text = booked
        else:
            found = page.act({"action": "search",
                              "constraints": script.searches[(index // 2) % len(script.searches)]})
            text = reply_to(found["wizard"]["searches"][0])
        body: dict[str, Any] = {"action": "utter", "text": text[:FRAMES.max_response_chars]}
        if worker.role == "user" and script.stops_at(index):
            body["complete"] = "yes"
        keyboard = random.Random(f"{self.seed}:typing:{conversation}:{index}")
        body["signals"] = json.dumps(writing_report(worker, body["text"], keyboard, self.seed))
        confirmed = page.submit(body)
        if confirmed.get("survey_url"):  # this turn ended the dialog: its questions come at once
            self.answer_survey(page, worker, confirmed["survey_url"], conversation, outcome)
        said = Written(form={"response": body["text"]}, good=good, rated_relevant=None, rated_useful=None)
        return said, confirmed

    def book(self, page: TurnPage, search: Mapping[str, Any]) -> str:
        """Book the first item the newest search found, and say so. Booking is a click every wizard makes
        when the user asks (careless ones too, whose reply is still theirs); when the newest search found
        nothing (a careless wizard before searched nothing), the user's last conditions are searched first."""
        searches = page.view()["frames"]["wizard"]["searches"]
        if not searches or not searches[0]["items"]:
            searches = page.act({"action": "search", "constraints": search})["wizard"]["searches"]
        items = searches[0]["items"]
        page.act({"action": "book", "id": items[0]["id"]})
        fields = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in list(items[0].items())[1:SHOWN_FIELDS + 1])
        return f"Done, I booked it for you: {fields}. Have a great trip!"

    # -- the end-of-dialog questions --

    def answer_survey(self, surveys: Surveys, worker: SimWorker, survey_url: str, conversation: int,
                      outcome: Outcome) -> None:
        """The user rates the wizards' cooperativity; the wizard says whether the user reached the goal
        (truthfully but for the odd mistake, at random, or as harshly as possible)."""
        asked = surveys.questions(survey_url)
        if asked["answered"] is not None:
            return
        bad_roles = {outcome.by_name[r.writer].role for (c, _), r in outcome.turns.items()
                     if c == conversation and outcome.by_name[r.writer].bad_writer}
        rng = random.Random(f"{self.seed}:survey:{conversation}:{worker.role}")
        reached = self.scripts[conversation].reached and not bad_roles
        rates, answers = worker.profile.rates, {}
        for question in asked["questions"]:
            if question["kind"] == "rating":
                fair = (rng.choice((1, 2)) if "wizard" in bad_roles
                        else rng.choice((4, 5)) if reached else rng.choice((3, 4)))
                given = fair if rates == "truthful" else rng.randint(1, 5) if rates == "random" else 1
                answers[question["name"]] = str(given)
            else:
                truth = reached != (rng.random() < RATER_ERROR)
                given_yes = truth if rates == "truthful" else rng.random() < 0.5 if rates == "random" else False
                answers[question["name"]] = "yes" if given_yes else "no"
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
        """What the Frames dialogs hold, from the database, and success against the templates' probability
        (``protocols.frames.dialog.success_summary``)."""
        ids = list(session.exec(select(Conversation.id).where(Conversation.batch_id == outcome.batch_id)))
        events = session.exec(select(DialogEvent).where(col(DialogEvent.conversation_id).in_(ids))).all()
        actions = Counter(f"{e.agent} {e.action}" for e in events)
        answers = session.exec(select(SurveyAnswer.conversation_id, SurveyAnswer.role).where(
            col(SurveyAnswer.conversation_id).in_(ids))).all()
        success = success_summary(session, outcome.batch_id)
        overall: Optional[dict[str, Any]] = success["templates"][-1] if success["templates"] else None
        summary = None
        if overall is not None:
            low, high = overall["expected"]
            mean = overall["mean_rating"]
            booked = overall["booked"]
            summary = (f"{overall['feasible']} of {overall['dialogs']} goals could succeed (99% interval of "
                       f"the templates' probabilities: {low}-{high}); wizards judged {overall['reached']} of "
                       f"{overall['judged']} reached; booked: {booked['meets_goal']} meeting the goal, "
                       f"{booked['meets_alternate']} only the alternate, {booked['breaks_goal']} breaking it; "
                       f"mean cooperativity {'-' if mean is None else f'{mean:.2f}'}")
        return {
            "goals": {"feasible": sum(1 for s in self.scripts if s.scenario["matches"] > 0),
                      "with_alternate": sum(1 for s in self.scripts if s.scenario.get("alternate")),
                      "role_play": sum(1 for s in self.scripts if s.scenario["kind"] == "role_play")},
            "events": dict(sorted(actions.items())),
            "searches_found_nothing": sum(1 for e in events if e.action == "search_results"
                                          and not e.data["total"]),
            "surveys_answered": dict(sorted(Counter(role for _, role in set(answers)).items())),
            "success": success,
            "summary": summary,
        }


def play_for(config: Any) -> tuple[list[FramesScript], FramesPlay]:
    """Frames' scripts and play for a simulation (``run.PLAYS``): goals drawn on ``config.dialogs`` (a
    domain file) or on turkflow's sample domain."""
    domain = Path(config.dialogs) if config.dialogs else SAMPLE
    if domain.suffix not in (".yaml", ".yml", ".json") or not domain.is_file():
        raise ValueError(f"{domain} is not a Frames domain file (a .yaml naming the database and templates)")
    scripts = write_frames_scripts(domain, config.conversations, config.seed, config.max_turns)
    return scripts, FramesPlay(domain, scripts, config.seed)
