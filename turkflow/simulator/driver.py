"""The driver: a simulated crowd working a batch through the worker pages over HTTP, concurrently.

Concurrency and reproducibility pull in opposite directions: who takes which turn, and in which order
ratings reach the quality monitor, would depend on thread timing. The driver therefore works in *rounds*
with a deterministic scheduler:

- A round belongs to one role. The scheduler lists that role's open turns (oldest first), shuffles the
  role's active workers with a generator seeded by (seed, round), and pairs them: every worker writes at
  most one turn per round, and no author gets two ratings in one round.
- The round's turns are then worked in parallel over HTTP (take, which answers with the turn page, and
  submit, which answers with the queue the worker takes the next turn from), each worker arriving after a
  random think time.
- Before the next round the driver waits until the pipeline has caught up with every judgement the round
  caused: every active conversation has its next HIT open, every rating has its quality decision and
  every submitted turn is reviewed (``Turn.reviewed_at``: the monitor and the content checks ran).
  A quality decision alone does not say its block has landed: on SQLite the decision row commits when its
  savepoint is released (pysqlite opens no transaction before it), a moment before the block, and a round
  planned in that moment gave a turn to a worker blocked before they could submit it (a 403 that made two
  runs of one seed differ). ``reviewed_at`` is written after the whole judgement has committed.

Blocks only hit the authors being rated, who belong to the other role and do not act in this round; each
author's ratings reach the monitor in round order. So the same seed gives the same turns, ratings,
blocks and bonuses on any machine, while wall time, throughput and latency are measured, not reproduced.
The driver reads the database (open turns, worker status) to schedule and to wait; every write goes
through the worker pages, except launching the batch and inviting workers, which are the requester's.

On Prolific (``prolific``: the fake Prolific the stack's provider talks to) a participant cannot pick a
turn: they start a submission on their role's study, open its link, and our page gives them the oldest
waiting turn (the lowest HIT id). Which turn that is depends on the order the Celery worker opened the
turns in, which is a race when turns are submitted together. So a Prolific round serves its participants
one at a time, in the scheduled (shuffled) order: each takes the turn our page gives them, then each writes
theirs (the round stands for the minute in which they all write, so a newcomer finds the sessions busy with
their turns, as the study's places count them), and the driver waits for the pipeline to catch up with each
turn before the next is written: every HIT is then opened in the same order on every run, the k-th
participant of a round gets the same turn, and every rating reaches the monitor in the same order (so
the round needs no rule about an author's ratings). The same seed gives the same report on Prolific, at
the price of parallelism within a round. A participant starts the submission at the fake, reads the turn
page (JSON), submits the form, and completes the submission at the fake with the code of the completion
URL our page redirects to; nobody is invited: participants become workers when they first arrive, let
in by the role groups (``TURKFLOW_PROLIFIC_ROLE_GROUPS``) the simulator made on the fake.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from datetime import datetime, timezone
from typing import Any, Callable, Optional, Protocol, Sequence
from urllib.parse import parse_qs, urlsplit

import requests
from sqlalchemy import func
from sqlmodel import Session, col, or_, select

from turkflow.agents.registry import find_agents
from turkflow import invites
from turkflow.config import Settings, default
from turkflow.db import session_scope
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.hits import keep as keeping, lifecycle, onboarding
from turkflow.hits import registry
from turkflow.quality import gold
from turkflow.models import (
    Batch,
    Bonus,
    BonusStatus,
    Conversation,
    ConversationStatus,
    Hit,
    HitStatus,
    KeepRule,
    ProlificStudy,
    QualityDecision,
    Rating,
    Task,
    Turn,
    TurnStatus,
    Worker,
    WorkerKind,
    WorkerStatus,
    utcnow,
)
from turkflow.protocols.questions import get_protocol
from turkflow.quality.monitor import Policy
from turkflow.simulator.crowd import SimWorker, Written, answer_gold, judge_agent, revise, write_turn
from turkflow.simulator.fake_prolific import Refused
from turkflow.simulator.prolific import ProlificCrowd, room_for_a_session, session_reward_cents, study_terms
from turkflow.simulator.utterances import Script

HTTP_TIMEOUT = 60
RETRIES = 3  # a 5xx or a dropped connection is retried; take and submit are idempotent on the server


class SimulationError(RuntimeError):
    """The simulation cannot go on (the stack is down or the pipeline stopped advancing)."""


# ---- HTTP ---------------------------------------------------------------------------------------------


class HttpLog:
    """Every request the crowd made: counts and durations per route, and every unexpected status."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.durations: dict[str, list[float]] = defaultdict(list)
        self.statuses: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()

    def record(self, route: str, status: int | str, seconds: float, ok: bool) -> None:
        with self._lock:
            self.durations[route].append(seconds)
            self.statuses[f"{route} {status}"] += 1
            if not ok:
                self.errors[f"{route} {status}"] += 1


class HttpClient:
    """One simulated person's browser: a ``requests.Session`` asking for the pages' JSON."""

    def __init__(self, base_url: str, log: HttpLog):
        self.base_url = base_url.rstrip("/")
        self.log = log
        self.http = requests.Session()
        self.http.headers["Accept"] = "application/json"

    def _call(self, method: str, route: str, path: str, **kwargs: Any) -> requests.Response:
        """One request, retried on server errors and dropped connections; other statuses are returned."""
        for attempt in range(1, RETRIES + 1):
            started = time.perf_counter()
            try:
                response = self.http.request(method, f"{self.base_url}{path}", timeout=HTTP_TIMEOUT, **kwargs)
            except requests.RequestException as exc:
                self.log.record(route, type(exc).__name__, time.perf_counter() - started, ok=False)
                if attempt == RETRIES:
                    raise SimulationError(f"{method} {path}: {exc}") from exc
                continue
            ok = response.status_code < 400
            self.log.record(route, response.status_code, time.perf_counter() - started, ok)
            if response.status_code < 500 or attempt == RETRIES:
                return response
        raise AssertionError("unreachable")


class WorkerClient(HttpClient):
    """A local worker's browser, holding the cookie their invite link set."""

    def __init__(self, base_url: str, join_url: str, log: HttpLog):
        super().__init__(base_url, log)
        self.join_url = join_url
        self.listing: Optional[dict[str, Any]] = None  # the queue page this browser shows now

    def join(self) -> dict[str, Any]:
        """Open the invite link; the queue it leads to hands out the CSRF token every POST sends back."""
        path = self.join_url[len(self.base_url):] if self.join_url.startswith(self.base_url) else self.join_url
        self.listing = _json(self._call("GET", "GET /join", path), "join")
        self.http.headers["X-CSRFToken"] = self.listing["csrf_token"]
        return self.listing

    def queue(self) -> dict[str, Any]:
        self.listing = _json(self._call("GET", "GET /queue", "/queue"), "queue")
        return self.listing

    def take(self, hit_id: int) -> tuple[str, Optional[dict[str, Any]]]:
        """The assignment and the turn page's JSON the take answers with (None: the protocol's own page)."""
        taken = _json(self._call("POST", "POST /queue/take", f"/queue/take/{hit_id}"), "take")
        return taken["assignment_id"], taken.get("turn")

    def view(self, assignment_id: str) -> dict[str, Any]:
        return _json(self._call("GET", "GET /turn", f"/turn/{assignment_id}"), "turn page")

    def submit(self, assignment_id: str, form: dict[str, Any]) -> dict[str, Any]:
        """The stored turn; the queue it answers with is the page the worker goes back to."""
        confirmed = _json(self._call("POST", "POST /turn", f"/turn/{assignment_id}", data=form), "submit")
        self.listing = confirmed.get("queue", self.listing)
        return confirmed

    def leave(self) -> None:
        """Close the queue's page: its beacon says the worker left."""
        response = self._call("POST", "POST /queue/leave", "/queue/leave")
        if response.status_code != 204:
            raise TurnRefused("leave", response.status_code, None, response.text[:200])

    def get(self, route: str, path: str) -> dict[str, Any]:
        """Any other page's JSON (``route`` names it in the report's HTTP table)."""
        return _json(self._call("GET", route, path), route)

    def post(self, route: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """Any other POST (``data=`` a form, ``json=`` an object); its JSON answer."""
        return _json(self._call("POST", route, path, **kwargs), route)


class ParticipantClient(HttpClient):
    """A Prolific participant's browser on our study link (no cookie: the page carries a signed token)."""

    def view(self, link: str) -> dict[str, Any]:
        """The turn page's JSON; or, when our page first asks the questions of a dialog the participant wrote
        in and owes (it sends them there), ``{"survey_url": ...}``."""
        response = self._call("GET", "GET /prolific/turn", link, allow_redirects=False)
        if response.status_code == 303 and urlsplit(response.headers["Location"]).path == "/prolific/survey":
            return {"survey_url": response.headers["Location"]}
        return _json(response, "turn page")

    def submit(self, link: str, form: dict[str, Any], token: str) -> Optional[str]:
        """Submit the turn; returns the completion code of the Prolific URL our page redirects to, or None when
        it sends the participant on to their session place's next turn."""
        response = self._call("POST", "POST /prolific/turn", link, data={**form, "turkflow_form": token},
                              allow_redirects=False)
        if response.status_code != 303:
            _json(response, "submit")  # raises on a refusal
            raise TurnRefused("submit", response.status_code, None, "no redirect to Prolific")
        if urlsplit(response.headers["Location"]).path == "/prolific/turn":
            return None
        return completion_code(response.headers["Location"])

    def left(self, left_url: str, token: str) -> None:
        """The page of their session place is closed: its ``pagehide`` beacon, as a browser sends it."""
        response = self._call("POST", "POST /prolific/place/left", left_url, data={"turkflow_form": token})
        if response.status_code != 204:
            raise TurnRefused("leave the session", response.status_code, None, response.text[:200])


def completion_code(url: str) -> str:
    """The code of a Prolific completion URL (``https://app.prolific.com/submissions/complete?cc=...``)."""
    location = urlsplit(url)
    code = parse_qs(location.query).get("cc")
    if location.hostname != "app.prolific.com" or not code:
        raise TurnRefused("submit", 303, None, f"sent to {location.geturl()[:100]}")
    return code[0]


class Surveys(Protocol):
    """Where a worker answers the end-of-dialog questions they owe."""

    def questions(self, survey_url: str) -> dict[str, Any]:
        """The questions (``questions``), and ``answered`` (None while they are owed)."""

    def answer(self, survey_url: str, answers: dict[str, str]) -> None: ...


class TurnPage(Surveys, Protocol):
    """A held turn's page of STAR, Frames or MEEP as a worker's browser has it, whatever the way in (the local
    queue or a Prolific study link): one policy per protocol plays it through these, on either provider."""

    def view(self) -> dict[str, Any]: ...

    def act(self, body: dict[str, Any]) -> dict[str, Any]:
        """One action inside the turn (a query, a search, a click); what it logged and the role's data again."""

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        """Close the turn: ``turn_id``, ``created``, ``text`` (what was said) and ``survey_url`` (the dialog
        ended with questions for this worker) or None."""


class QueueSurveys:
    """The end-of-dialog questions a local worker answers, at ``/survey/<dialog>`` (their queue lists those owed)."""

    def __init__(self, client: WorkerClient):
        self.client = client

    def questions(self, survey_url: str) -> dict[str, Any]:
        return self.client.get("GET /survey", survey_url)

    def answer(self, survey_url: str, answers: dict[str, str]) -> None:
        self.client.post("POST /survey", survey_url, json=answers)


class QueueTurnPage(QueueSurveys):
    """A turn taken from the local queue: ``/<protocol>/turn/<assignment>``."""

    def __init__(self, client: WorkerClient, protocol: str, assignment_id: str):
        super().__init__(client)
        self.route, self.path = f"/{protocol}/turn", f"/{protocol}/turn/{assignment_id}"

    def view(self) -> dict[str, Any]:
        return self.client.get(f"GET {self.route}", self.path)

    def act(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.client.post(f"POST {self.route}/action", f"{self.path}/action", json=body)

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.client.post(f"POST {self.route}", self.path, json=body)


class StudyTurnPage:
    """A turn a Prolific study link gave a participant: every POST carries the link's ids and the page's token
    (no cookie); the questions are at ``/prolific/survey?...&c=<dialog>``, each page with a token of its own."""

    def __init__(self, client: ParticipantClient, link: str, token: str):
        self.client, self.link, self.token = client, link, token
        self.survey_tokens: dict[str, str] = {}

    def view(self) -> dict[str, Any]:
        return self.client.view(self.link)

    def act(self, body: dict[str, Any]) -> dict[str, Any]:
        action = self.link.replace("/prolific/turn?", "/prolific/turn/action?", 1)
        return _json(self.client._call("POST", "POST /prolific/turn/action", action,
                                       json={**body, "turkflow_form": self.token}), "action")

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        return _json(self.client._call("POST", "POST /prolific/turn", self.link,
                                       json={**body, "turkflow_form": self.token}), "submit")

    def questions(self, survey_url: str) -> dict[str, Any]:
        response = self.client._call("GET", "GET /prolific/survey", survey_url, allow_redirects=False)
        if response.status_code == 303:  # answered: on to the turn, or back to Prolific
            return {"answered": True, "questions": []}
        asked = _json(response, "survey")
        self.survey_tokens[survey_url] = asked["turkflow_form"]
        return {**asked, "answered": None}

    def answer(self, survey_url: str, answers: dict[str, str]) -> None:
        _json(self.client._call("POST", "POST /prolific/survey", survey_url, allow_redirects=False,
                                json={**answers, "turkflow_form": self.survey_tokens[survey_url]}), "survey")


def _json(response: requests.Response, what: str) -> dict[str, Any]:
    if response.status_code >= 400:
        try:
            field_name = response.json().get("field")
        except ValueError:
            field_name = None
        raise TurnRefused(what, response.status_code, field_name, response.text[:200])
    return response.json()


class TurnRefused(RuntimeError):
    """The server refused a simulated worker's request; ``field`` is the answer a 400 names."""

    def __init__(self, what: str, status: int, field: Optional[str], detail: str):
        super().__init__(f"{what}: HTTP {status} {detail}")
        self.what, self.status, self.field = what, status, field


# ---- the simulation -----------------------------------------------------------------------------------


class ProtocolPlay(Protocol):
    """How the crowd plays another protocol's turns than Wizard of Tasks' (``star.StarPlay``): the
    requester's tasks and scenarios, what a worker does after joining (qualify), one turn on its pages,
    and what a worker does once the batch is over."""

    protocol: str
    roles: tuple[str, ...]

    def tasks(self, session: Session) -> tuple[list[Task], list[tuple[Task, dict]]]: ...

    def join(self, client: WorkerClient, worker: SimWorker) -> None: ...

    def turn(self, page: TurnPage, worker: SimWorker, conversation: int, index: int, view: dict[str, Any],
             outcome: "Outcome") -> tuple[Written, dict[str, Any]]: ...

    def answer_survey(self, surveys: Surveys, worker: SimWorker, survey_url: str, conversation: int,
                      outcome: "Outcome") -> None: ...

    def finish(self, client: WorkerClient, worker: SimWorker, outcome: "Outcome") -> None: ...

    def report(self, session: Session, outcome: "Outcome") -> dict[str, Any]:
        """The protocol's part of the report; a "summary" line in it is what `turkflow simulate` prints."""


@dataclass
class Job:
    """One turn a simulated worker works in a round (on Prolific: whichever turn our page gives them, so
    ``hit_id``, ``conversation`` and ``index`` are known only once they have it)."""

    worker: SimWorker
    hit_id: Optional[int]
    conversation: int  # position in the batch
    index: int
    arrive_after: float  # seconds after the round starts


@dataclass
class TurnRecord:
    """What the crowd wrote for one turn, the hidden truth about it, and when the server confirmed it."""

    conversation: int
    index: int
    writer: str
    round: int
    turn_id: int
    text: str
    good: bool
    rated_relevant: Optional[bool]
    rated_useful: Optional[bool]
    confirmed_at: float  # wall clock (UTC epoch seconds) when the submit response arrived
    created: bool


@dataclass(frozen=True)
class AgentTurnRecord:
    agent: str
    turn_id: int
    text: str
    good: bool


@dataclass
class Outcome:
    """Everything the driver saw; the report turns it into numbers."""

    batch_id: int
    crowd: list[SimWorker]
    scripts: list[Script]
    policy: Policy
    max_turns: int
    worker_ids: dict[str, int]
    conversation_ids: list[int]
    turns: dict[tuple[int, int], TurnRecord] = field(default_factory=dict)
    rounds: int = 0
    wall_seconds: float = 0.0
    refused: Counter[str] = field(default_factory=Counter)
    revised: Counter[str] = field(default_factory=Counter)  # answers the server refused and the worker rewrote
    history_mismatches: int = 0
    timed_out_after_writing: set[str] = field(default_factory=set)  # Prolific: submissions of turns stored
    # whose participant never went back to Prolific
    stop_reason: str = "all conversations finished"
    http: HttpLog = field(default_factory=HttpLog)
    gold: dict[str, dict[str, tuple[bool, bool]]] = field(default_factory=dict)  # worker -> gold answers sent
    # turns agents wrote (--agent): (conversation position, index) -> the agent's name, its text and whether it
    # was right (a simulated agent's wrong answers are its known off-topic ones)
    agent_turns: dict[tuple[int, int], "AgentTurnRecord"] = field(default_factory=dict)
    # the people's end-of-dialog evaluations of agents: conversation position -> the answers sent
    evaluations: dict[int, dict[str, str]] = field(default_factory=dict)

    @cached_property
    def by_name(self) -> dict[str, SimWorker]:
        return {w.name: w for w in self.crowd}


def launch(settings: Settings, base_url: str, crowd: list[SimWorker], scripts: list[Script], *,
           max_turns: int, policy: Policy, reward_cents: int, seed: int, provider: str = "local",
           play: Optional[ProtocolPlay] = None, keep: str = "",
           onboarded: bool = False, agents: Optional[dict[str, tuple[str, ...]]] = None,
           ) -> tuple[int, dict[str, str], dict[str, int], list[int]]:
    """The requester's part: task documents, one invite per simulated worker (local only: Prolific's
    participants arrive through the study), the batch and its first HITs (on Prolific, its studies).
    Another protocol's ``play`` gives the tasks and scenarios; its workers qualify on the pages themselves.
    ``onboarded`` invites workers who skip the quiz (and its gold turns): for benchmarks of the turns alone.

    Returns the batch id, each worker's join URL and database id, and the conversation ids in batch order.
    """
    providers = registry.providers(settings)
    with session_scope(settings.database_url) as session:
        scenarios = None
        if play is not None:
            tasks, scenarios = play.tasks(session)
        else:
            if session.exec(select(func.count()).select_from(Task)).one() == 0:
                load_documents(session, read_documents(sample_tasks_path()))
            tasks = list(session.exec(select(Task).order_by(Task.id)))
        join_urls, worker_ids = {}, {}
        for worker in crowd if provider == "local" else ():
            row, url = invites.invite_worker(session, settings.secret_key, base_url, worker.role, name=worker.name,
                                             onboarded=onboarded)  # else each takes their role's quiz
            join_urls[worker.name], worker_ids[worker.name] = url, row.id
        batch, hits = lifecycle.launch_batch(
            session, tasks, len(scripts), name=f"simulation seed {seed}", max_turns=max_turns,
            reward_cents=reward_cents, provider=provider,
            quality=policy.batch_fields(), protocol=play.protocol if play else "wizard_of_tasks",
            scenarios=scenarios, keep=keeping.parse(keep) if keep else None, seed=seed,
            agents={role: find_agents(session, list(names)) for role, names in (agents or {}).items()},
        )
        if provider == "prolific":  # what its studies are made with, whoever makes them (as batch launch does)
            batch.platform_terms = study_terms(settings, batch.keep)
        conversation_ids = [session.get(Turn, hit.turn_id).conversation_id for hit in hits]
        batch_id, hit_ids = batch.id, [hit.id for hit in hits]
    for hit_id in hit_ids:  # committed first: Prolific's provider records its study in a session of its own
        with session_scope(settings.database_url) as session:
            lifecycle.publish_hit(session, providers.get(session.get(Hit, hit_id).provider), hit_id)
    return batch_id, join_urls, worker_ids, conversation_ids


class Simulation:
    def __init__(self, settings: Settings, base_url: str, crowd: list[SimWorker], scripts: list[Script], *,
                 seed: int, max_turns: int, policy: Policy,
                 reward_cents: int = default("reward_cents"), think_time: float = 0.0,
                 concurrency: int = 16, settle_timeout: float = 60.0, progress=None,  # noqa: ANN001
                 prolific: Optional[ProlificCrowd] = None, play: Optional[ProtocolPlay] = None,
                 web_urls: Sequence[str] = (), time_outs: float = 0.0, keep: str = "",
                 away: float = 0.0, away_rounds: float = 1.0, leave: float = 0.0, agents: Optional[dict[str, tuple[str, ...]]] = None):
        self.settings = settings
        self.agents = dict(agents or {})  # the roles agents play: their turns are the agents queue's
        self.keep = keep  # the batch's --keep ("": its protocol's own): turns kept for the role's last writer
        self.keep_rule = keeping.for_launch(keep or None, play.protocol if play else "wizard_of_tasks",
                                            "prolific" if prolific else "local").rule
        self.keeps_sessions = self.keep_rule == KeepRule.session
        self.gone: set[str] = set()  # workers whose queue's page said they left (away this round)
        self.asked: dict[str, float] = {}  # when each worker's page last asked the server (time.monotonic)
        self.kept_until: Optional[datetime] = None  # when the first turn kept for a worker is offered to anyone
        self.away = away  # the share of rounds a worker sits out (people come and go)
        self.away_rounds = away_rounds  # the mean length of an absence, in rounds: 1, each round drawn on its own
        self.away_spells: dict[str, list[bool]] = {}  # whether each worker is away, round by round (spells)
        self.someone_away = False  # in the round just planned
        self.leave = leave  # the share of each role's workers who leave for good once half the turns are written
        self.left: set[str] = set()  # those who left
        self.planned = 0  # turns the scripts plan
        self.play = play  # None: Wizard of Tasks' turn pages
        self.on_prolific = prolific  # the fake Prolific the stack's provider uses; None: the local provider
        self.prolific = prolific.fake if prolific else None
        self.session_places = False  # the batch's Prolific places last a session (set at launch, from its terms)
        self.places: dict[str, tuple[str, str]] = {}  # a participant's open session place: submission id, link
        self.exits: dict[str, tuple[str, str]] = {}  # the last page of a participant's place: its left URL, token
        self.time_outs = time_outs  # Prolific: share of written turns whose participant never goes back
        self.base_url = base_url.rstrip("/")  # the public URL: invite and study links name it
        # The web servers behind it, as a load balancer with sticky sessions spreads a crowd over several:
        # each simulated worker sends every request to one, round-robin. Empty: base_url alone.
        self.web_urls = [url.rstrip("/") for url in web_urls] or [self.base_url]
        self.crowd = crowd
        self.by_name = {w.name: w for w in crowd}
        self.scripts = scripts
        self.seed = seed
        self.max_turns = max_turns
        self.policy = policy
        self.reward_cents = reward_cents
        self.think_time = think_time
        self.concurrency = concurrency
        self.settle_timeout = settle_timeout
        self.progress = progress  # called with (turns written, turns planned) after each round
        self.protocol = get_protocol(play.protocol if play else "wizard_of_tasks")
        self._lock = threading.Lock()

    def onboard(self, name: str, out: Outcome) -> None:
        """Wizard of Tasks' quiz, answered right, with the gold turns rated as the worker rates
        (``crowd.answer_gold``); the answers sent are kept for the replay."""
        worker = self.by_name[name]
        rated = answer_gold(worker, self.seed)
        form = {q.name: q.answer for q in onboarding.quiz_for(worker.role).questions}
        for item in gold.gold_for(worker.role):
            for question, answer in zip(("relevant", "useful"), rated[item.name]):
                form[gold.field(item, question)] = "yes" if answer else "no"
        graded = self.clients[name].post("POST /onboarding", "/onboarding", data=form)
        if not graded["passed"]:
            raise SimulationError(f"{name} failed onboarding: {graded['wrong']}")
        with self._lock:
            out.gold[name] = rated

    def run(self) -> Outcome:
        if self.prolific:  # places that last a session: the reward pays the session
            self.reward_cents = session_reward_cents(self.settings, self.prolific.currency, self.reward_cents,
                                                     self.keep_rule)
        batch_id, join_urls, worker_ids, conversation_ids = launch(
            self.settings, self.base_url, self.crowd, self.scripts, max_turns=self.max_turns, policy=self.policy,
            reward_cents=self.reward_cents, seed=self.seed,
            provider="prolific" if self.prolific else "local", play=self.play,
            keep=self.keep, agents=self.agents)
        out = Outcome(batch_id=batch_id, crowd=self.crowd, scripts=self.scripts, policy=self.policy,
                      max_turns=self.max_turns, worker_ids=worker_ids, conversation_ids=conversation_ids)
        self.out = out
        self.position = {cid: n for n, cid in enumerate(conversation_ids)}
        if self.prolific:
            with session_scope(self.settings.database_url) as session:
                self.session_places = bool(session.get(Batch, batch_id).platform_terms.get("session_minutes"))
        self.last_round: dict[int, int] = {}  # conversation position -> round of its latest turn
        self.clients = {name: WorkerClient(web, url.replace(self.base_url, web, 1), out.http)
                        for (name, url), web in zip(join_urls.items(), itertools.cycle(self.web_urls))}
        self.participants = {w.name: ParticipantClient(web, out.http)
                             for w, web in zip(self.crowd, itertools.cycle(self.web_urls)) if self.prolific}
        self.planned = planned = sum(s.turns(self.max_turns) for s in self.scripts)
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="sim") as pool:
            list(pool.map(lambda client: client.join(), self.clients.values()))
            if self.play is None:
                list(pool.map(lambda name: self.onboard(name, out), self.clients))
            else:
                list(pool.map(lambda name: self.play.join(self.clients[name], self.by_name[name]),
                              self.clients))
            role, idle_rounds, written = self.protocol.first_role, 0, None
            while True:
                self._settle(batch_id, written)
                jobs, open_total = self._plan(out.rounds, role)
                if open_total == 0:
                    if self._unfinished():
                        out.stop_reason = self._stuck_reason()
                    break
                if role in self.agents:  # the agents queue plays this role's turns: wait for its answers
                    self._await_agents(batch_id)
                    written = None
                elif not jobs:
                    idle_rounds += 1
                    if self.someone_away:  # the workers who could take the open turns are away this round
                        idle_rounds = 0
                        time.sleep(max(self.think_time, 0.05))
                    elif idle_rounds >= 2 and self._wait_for_kept_turns():
                        idle_rounds = 0  # a turn kept for a worker who cannot take it is offered to anyone now
                    elif idle_rounds >= 2:  # neither role can move
                        out.stop_reason = self._stuck_reason()
                        break
                elif self.prolific:
                    written = self._serve_participants(jobs, out.rounds)
                    idle_rounds = 0 if written else idle_rounds + 1
                    if idle_rounds >= 4:  # each role's participants twice turned away from every open turn
                        out.stop_reason = ("no participant could take an open turn (turned away: "
                                           + ", ".join(f"{n} {what}" for what, n in sorted(out.refused.items())) + ")")
                        break
                else:
                    idle_rounds = 0
                    written = self._work_round(pool, jobs, out.rounds)
                out.rounds += 1
                role = self.protocol.next_role(role)
                if self.progress:
                    self.progress(len(out.turns), planned)
            if self.session_places:  # the sessions still open end with the code
                self._finish_places()
            if self.play is not None:  # what workers do once there is nothing left to take
                list(pool.map(lambda name: self.play.finish(self.clients[name], self.by_name[name], out),
                              sorted(self.clients)))
            elif self.agents:  # the last dialogs' evaluations, owed once the agents closed them
                self._settle(batch_id)
                list(pool.map(lambda name: self._evaluate_agents(name, fresh=True), sorted(self.clients)))
            self._settle(batch_id, bonuses=True)  # the whole batch: nothing left behind, every bonus paid
            if self.agents:
                self._note_agent_turns(batch_id)
        out.wall_seconds = time.monotonic() - started
        return out

    # -- scheduling --

    def _plan(self, round_no: int, role: str) -> tuple[list[Job], int]:
        """This round's pairs of (worker, open turn) for ``role``; also how many turns are open in all."""
        active = {name for name, status in self._statuses().items() if status == WorkerStatus.active}
        names = {worker_id: name for name, worker_id in self.out.worker_ids.items()}
        if self.leave and not self.left and 2 * len(self.out.turns) >= self.planned:
            self.left = self._leavers()
            self._leave_places(self.left)
        workers = sorted(w.name for w in self.crowd if w.role == role and w.name in active and w.name not in self.left)
        self.someone_away = False
        if self.away:
            present = [name for name in workers if not self._away(name, round_no)]
            self.someone_away, workers = len(present) < len(workers), present
        if self.keeps_sessions and not self.prolific:
            self._come_and_go(role, set(workers))
        now = utcnow()
        with session_scope(self.settings.database_url) as session:
            open_hits = session.exec(
                select(Hit.id, Turn.conversation_id, Turn.index, Turn.role, Hit.reserved_for_id, Hit.reserved_until,
                       Worker.present_until)
                .join(Turn, Turn.id == Hit.turn_id).join(Conversation, Conversation.id == Turn.conversation_id)
                .outerjoin(Worker, Worker.id == Hit.reserved_for_id)
                .where(Conversation.batch_id == self.out.batch_id, Hit.status == HitStatus.open,
                       or_(col(Hit.lease_expires_at).is_(None), col(Hit.lease_expires_at) < now))
            ).all()
        # Turns kept for a worker as the server keeps them now, only while that worker may take them (active; in a
        # window, or present for a session): hit id -> the worker; and when the first window ends.
        kept = {}
        for hit_id, _, _, _, worker_id, until, present_until in open_hits:
            keeper = names.get(worker_id)
            if keeper in active and ((until is not None and as_utc(until) > now) or (
                    until is None and present_until is not None and as_utc(present_until) > now)):
                kept[hit_id] = keeper
        if any(keeper in self.left for keeper in kept.values()):
            self.someone_away = True  # their turns go to others once the server no longer counts them present
        self.kept_until = min((as_utc(until) for hit_id, *_, until, _ in open_hits if hit_id in kept and until),
                              default=None)
        candidates = sorted(
            ((self.last_round.get(self.position[cid], -1), self.position[cid], hit_id, index)
             for hit_id, cid, index, hit_role, *_ in open_hits if hit_role == role),
        )
        rng = random.Random(f"{self.seed}:round:{round_no}")
        rng.shuffle(workers)
        if self.prolific:  # our page picks the turn (one kept for them first); the order of the participants is ours
            keepers = {kept[hit_id] for *_, hit_id, _ in candidates if hit_id in kept}
            others = sorted((name for name in reversed(workers) if name not in keepers),
                            key=lambda name: name not in self.places)  # those in a session place first
            free = sum(1 for *_, hit_id, _ in candidates if hit_id not in kept)
            chosen = [name for name in reversed(workers) if name in keepers] + others[:free]
            return [Job(self.by_name[name], None, -1, -1, self._think(round_no, name)) for name in chosen], \
                len(open_hits)
        jobs, rated = [], set()
        # A worker takes a turn kept for them first (their oldest); a turn kept for someone else waits.
        for _, conversation, hit_id, index in candidates:
            name = kept.get(hit_id)
            if name is None or name not in workers:
                continue
            author = self._author(conversation, index)
            if author is not None:
                if author in rated:
                    continue
                rated.add(author)
            workers.remove(name)
            jobs.append(Job(self.by_name[name], hit_id, conversation, index, self._think(round_no, name)))
        for _, conversation, hit_id, index in candidates:
            if not workers:
                break
            if hit_id in kept:
                continue
            author = self._author(conversation, index)
            if author is not None:
                if author in rated:
                    continue  # the author's next rating waits a round, so the monitor sees ratings in order
                rated.add(author)
            name = workers.pop()
            jobs.append(Job(self.by_name[name], hit_id, conversation, index, self._think(round_no, name)))
        return sorted(jobs, key=lambda job: job.arrive_after), len(open_hits)

    def _away(self, name: str, round_no: int) -> bool:
        """Whether the worker sits this round out: each round on its own with chance ``away``; or, with spells
        (``away_rounds`` above 1), away for spells of that mean length and here for spells long enough that
        they are away for that share of the rounds (people who leave for a while and come back), from a draw
        per worker and round either way."""
        def draw(at: int) -> float:
            return random.Random(f"{self.seed}:away:{at}:{name}").random()

        if self.away_rounds <= 1:
            return draw(round_no) < self.away
        back = 1 / self.away_rounds
        leave = self.away * back / (1 - self.away)  # so that the share of rounds away is ``away``
        spells = self.away_spells.setdefault(name, [])
        while len(spells) <= round_no:
            at = len(spells)
            spells.append(draw(at) < self.away if not spells else
                          draw(at) >= back if spells[-1] else draw(at) < leave)
        return spells[round_no]

    def _leavers(self) -> set[str]:
        """The workers who leave for good (``leave`` of each role, drawn from the seed)."""
        rng = random.Random(f"{self.seed}:leave")
        return {name for role in sorted({w.role for w in self.crowd})
                for name in rng.sample(sorted(w.name for w in self.crowd if w.role == role),
                                       round(self.leave * sum(1 for w in self.crowd if w.role == role)))}

    def _come_and_go(self, role: str, here: set[str]) -> None:
        """A batch keeping people for their session keeps a worker's turns while they are present: those of
        ``role`` away this round close the queue's page (its beacon says so), those back open it again, and those
        here whose page has not asked for a while ask now (as its timer does), so the server's presence is the
        round's, whatever the wall clock did meanwhile."""
        fresh = time.monotonic() - self.settings.presence_seconds / 3
        for name in sorted(w.name for w in self.crowd if w.role == role and w.name in self.clients):
            client = self.clients[name]
            if name not in here and name not in self.gone:
                client.leave()
                self.gone.add(name)
            elif name in here and (name in self.gone or self.asked.get(name, 0.0) < fresh):
                client.queue()
                self.gone.discard(name)
                self.asked[name] = time.monotonic()

    def _evaluate_agents(self, name: str, fresh: bool = False) -> None:
        """The worker answers the evaluation of each agent dialog their queue says they owe (``crowd.judge_agent``,
        from what the agent's turns in it were); ``fresh``: load the queue first."""
        client = self.clients[name]
        for owed in (client.queue() if fresh else client.listing or {}).get("surveys", []):
            conversation_id = owed["conversation_id"]
            page = client.get("GET /survey", f"/survey/{conversation_id}")
            if page.get("answered"):
                continue
            position = self.position[conversation_id]
            right = [record.good for (at, _), record in sorted(self.out.agent_turns.items()) if at == position]
            answers = judge_agent(self.by_name[name], self.seed, position, page["questions"], right)
            client.post("POST /survey", f"/survey/{conversation_id}", json=answers)
            with self._lock:
                self.out.evaluations[position] = answers

    def _author(self, conversation: int, index: int) -> Optional[str]:
        """Who wrote the turn before ``index``: a simulated worker's name; None for the first turn or an agent's."""
        before = self.out.turns.get((conversation, index - 1)) if index > 0 else None
        return before.writer if before is not None else None

    def _await_agents(self, batch_id: int) -> None:
        """Wait until the agents queue has answered every agent turn of the batch and the next turns are open,
        then note what each agent wrote (a simulated agent's off-topic answers are its wrong ones)."""
        from turkflow.models import AgentTurn, AgentTurnStatus

        deadline = time.monotonic() + self.settle_timeout
        asking = (AgentTurnStatus.waiting, AgentTurnStatus.calling)
        while True:
            with session_scope(self.settings.database_url) as session:
                left = session.exec(select(func.count()).select_from(AgentTurn)
                                    .join(Conversation, Conversation.id == AgentTurn.conversation_id)
                                    .where(Conversation.batch_id == batch_id,
                                           col(AgentTurn.status).in_(asking))).one()
            if not left:
                break
            if time.monotonic() > deadline:
                raise SimulationError(f"{left} agent turns unanswered after {self.settle_timeout:.0f}s "
                                      "(is a Celery worker taking the agents queue, and beat running?)")
            time.sleep(0.05)
        self._settle(batch_id)
        self._note_agent_turns(batch_id)

    def _note_agent_turns(self, batch_id: int) -> None:
        from turkflow.agents.builtins import OFF_TOPIC
        from turkflow.models import Agent

        with session_scope(self.settings.database_url) as session:
            written = session.exec(
                select(Turn.conversation_id, Turn.index, Turn.id, Turn.text, Agent.name)
                .join(Agent, Agent.worker_id == Turn.worker_id)
                .join(Conversation, Conversation.id == Turn.conversation_id)
                .where(Conversation.batch_id == batch_id, Turn.status == TurnStatus.submitted)).all()
        with self._lock:
            for conversation_id, index, turn_id, text, agent in written:
                key = (self.position[conversation_id], index)
                if key not in self.out.agent_turns:
                    self.out.agent_turns[key] = AgentTurnRecord(agent, turn_id, text or "", text not in OFF_TOPIC)

    def _wait_for_kept_turns(self) -> bool:
        """Every open turn waits for a worker it is kept for who cannot take it this round: sleep until the first
        reservation ends, when the queue offers that turn to anyone. False: nothing is kept."""
        if self.kept_until is None:
            return False
        time.sleep(max(0.0, (self.kept_until - utcnow()).total_seconds()) + 0.05)
        return True

    def _think(self, round_no: int, name: str) -> float:
        return random.Random(f"{self.seed}:think:{round_no}:{name}").uniform(0, 2 * self.think_time)

    def _statuses(self) -> dict[str, WorkerStatus]:
        """Each simulated worker's status; a Prolific participant who has not arrived yet (no worker of
        ours yet) is active."""
        ids = {worker_id: name for name, worker_id in self.out.worker_ids.items()}
        with session_scope(self.settings.database_url) as session:
            rows = session.exec(select(Worker.id, Worker.status).where(col(Worker.id).in_(list(ids)))).all()
        found = {ids[worker_id]: status for worker_id, status in rows}
        return {w.name: found.get(w.name, WorkerStatus.active) for w in self.crowd}

    def _unfinished(self) -> int:
        with session_scope(self.settings.database_url) as session:
            return session.exec(
                select(func.count()).select_from(Conversation)
                .where(Conversation.batch_id == self.out.batch_id, Conversation.status == ConversationStatus.active)
            ).one()

    def _stuck_reason(self) -> str:
        statuses = Counter((self.by_name[name].role, status) for name, status in self._statuses().items())
        waiting = [role for role in self.protocol.roles if statuses[(role, WorkerStatus.active)] == 0]
        if waiting:
            return f"every {' and every '.join(waiting)} is blocked; the open turns wait for a review"
        return "the open turns are leased to workers whose requests failed; they return when the lease ends"

    # -- working --

    def _work_round(self, pool: ThreadPoolExecutor, jobs: list[Job], round_no: int) -> list[int]:
        """Work the round's turns in parallel; returns the ids of the turns the server confirmed."""
        start = time.monotonic()
        futures = [pool.submit(self._work, job, round_no, start) for job in jobs]
        return [turn_id for future in futures if (turn_id := future.result()) is not None]

    def _submit(self, written: Written, send: Callable[[dict[str, Any]], Any]) -> tuple[Written, Any]:
        """Send the turn's answers; a 400 naming a field the worker can fix is fixed and sent once more, as a
        person reads the message and corrects the field. Returns what was sent and the server's answer."""
        try:
            return written, send(written.form)
        except TurnRefused as refusal:
            revised = revise(written, refusal.field) if refusal.status == 400 else None
            if revised is None:
                raise
            with self._lock:
                self.out.revised[refusal.field] += 1
            return revised, send(revised.form)

    def _work(self, job: Job, round_no: int, round_start: float) -> Optional[int]:
        """One simulated worker takes a turn, reads the page, writes and submits, as a person would."""
        delay = round_start + job.arrive_after - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        client = self.clients[job.worker.name]
        try:
            if client.listing is None:  # otherwise the queue is the page the worker already has
                client.queue()
            if self.agents and self.play is None:  # questions owed sit at the top of the queue: answered first
                self._evaluate_agents(job.worker.name)
            assignment_id, view = client.take(job.hit_id)
            if view is None:  # STAR's, Frames' and MEEP's turns have pages of their own
                view = client.view(assignment_id)
            self._check_history(job, view)
            previous = (self.out.turns.get((job.conversation, job.index - 1))
                        or self.out.agent_turns.get((job.conversation, job.index - 1)))
            if self.play is not None:
                page = QueueTurnPage(client, self.play.protocol, assignment_id)
                written, confirmed = self.play.turn(page, job.worker, job.conversation, job.index, view, self.out)
            else:
                written = write_turn(job.worker, self.seed, job.conversation, self.scripts[job.conversation],
                                     view, previous.good if previous else None)
                written, confirmed = self._submit(written, lambda form: client.submit(assignment_id, form))
        except TurnRefused as refusal:
            with self._lock:
                self.out.refused[f"{refusal.what} {refusal.status}"] += 1
            return None
        record = TurnRecord(
            conversation=job.conversation, index=job.index, writer=job.worker.name, round=round_no,
            turn_id=confirmed["turn_id"], text=written.form["response"], good=written.good,
            rated_relevant=written.rated_relevant, rated_useful=written.rated_useful,
            confirmed_at=time.time(), created=confirmed["created"],
        )
        with self._lock:
            self.out.turns[(job.conversation, job.index)] = record
            self.last_round[job.conversation] = round_no
        return record.turn_id

    def _serve_participants(self, jobs: list[Job], round_no: int) -> list[int]:
        """A Prolific round: one participant at a time (see the module's docstring). Everyone served in the round
        first takes the turn our page gives them, then each writes theirs, each turn caught up with before the
        next: a round stands for the minute in which they all write at once, so a newcomer arriving in it finds
        the sessions busy with their turns, as the study's places count them. Returns the ids of the turns
        stored."""
        taken = [turn for job in jobs if (turn := self._take_participant(job)) is not None]
        written = []
        for job, submission_id, link, view in taken:
            turn_id = self._write_participant(job, round_no, submission_id, link, view)
            if turn_id is not None:
                written.append(turn_id)
                self._settle(self.out.batch_id, [turn_id])
        return written

    def _take_participant(self, job: Job) -> Optional[tuple[Job, str, str, dict[str, Any]]]:
        """A participant takes the turn our page gives them on their role's study: on a one-turn place they start
        a submission for it; on a session place they start one the first time and come back to it round after
        round (as its waiting page follows to the next turn), until our page gives them the code
        (``_end_place``). Returns the job, the submission, the link and the turn's page; None when they got none
        (no place for them, the waiting page, the end of the session, a refusal)."""
        client, name = self.participants[job.worker.name], job.worker.name
        if name not in self.places and self.session_places and not room_for_a_session(
                self.settings, self.out.batch_id, job.worker.role):
            return None  # the sessions here will take the waiting turns: the study has no place for a newcomer
        opened = self.places.get(name) or self._start_submission(job.worker)
        if opened is None:
            return None
        submission_id, link = opened
        if self.session_places:
            self.places[name] = opened
        try:
            view = self._arrive(client, link, job.worker)
        except TurnRefused as refusal:
            self._refused(name, submission_id, refusal)
            return None
        if view.get("ended"):  # the session is over (no work left for the role, time up): back to Prolific
            self._end_place(name, view)
            return None
        if self.session_places:  # where its page (a turn's or the waiting screen) says "I left"
            exits = view.get("place") or view
            self.exits[name] = (exits["left_url"], exits["turkflow_form"])
        if view.get("waiting"):  # the waiting page: nothing for them this round
            return None
        return job, submission_id, link, view

    def _refused(self, name: str, submission_id: str, refusal: TurnRefused) -> None:
        if self.places.pop(name, None) is None:  # a session place that ended on Prolific's side says so
            self.prolific.return_submission(submission_id)  # as a participant with nothing to do is asked to
        with self._lock:
            self.out.refused[f"{refusal.what} {refusal.status}"] += 1

    def _write_participant(self, job: Job, round_no: int, submission_id: str, link: str,
                           view: dict[str, Any]) -> Optional[int]:
        """The participant writes and submits the turn they took; on a one-turn place they complete the
        submission with the code they are sent back with."""
        client, name = self.participants[job.worker.name], job.worker.name
        try:
            job.hit_id, job.index = None, view["turn_index"]
            job.conversation = self.position[view["conversation_id"]]
            self._check_history(job, view)
            token = view["turkflow_form"]
            if self.play is not None:
                if job.arrive_after:
                    time.sleep(job.arrive_after)
                page = StudyTurnPage(client, link, token)
                written, confirmed = self.play.turn(page, job.worker, job.conversation, job.index, view, self.out)
                code = completion_code(confirmed["completion_url"]) if confirmed.get("completion_url") else None
            else:
                previous = (self.out.turns.get((job.conversation, job.index - 1))
                            or self.out.agent_turns.get((job.conversation, job.index - 1)))
                script = self.scripts[job.conversation]
                written = write_turn(job.worker, self.seed, job.conversation, script, view,
                                     previous.good if previous else None)
                if job.arrive_after:
                    time.sleep(job.arrive_after)
                written, code = self._submit(written, lambda form: client.submit(link, form, token))
        except TurnRefused as refusal:
            self._refused(name, submission_id, refusal)
            return None
        if code is not None:  # a one-turn place: back to Prolific with the code
            self._complete(submission_id, code, f"{round_no}:{name}")
        with session_scope(self.settings.database_url) as session:
            worker_id = session.get(Turn, view["turn_id"]).worker_id
        record = TurnRecord(
            conversation=job.conversation, index=job.index, writer=job.worker.name, round=round_no,
            turn_id=view["turn_id"], text=written.form["response"], good=written.good,
            rated_relevant=written.rated_relevant, rated_useful=written.rated_useful,
            confirmed_at=time.time(), created=True,
        )
        with self._lock:
            self.out.worker_ids[job.worker.name] = worker_id
            self.out.turns[(job.conversation, job.index)] = record
            self.last_round[job.conversation] = round_no
        return record.turn_id

    def _start_submission(self, worker: SimWorker) -> Optional[tuple[str, str]]:
        """The participant starts a submission on their role's study: its id and the study link (as our path)
        they follow; None when Prolific would not show them the study (blocked, say)."""
        fake, participant_id = self.prolific, self.on_prolific.participant_ids[worker.name]
        study_id = self._open_study(worker.role)
        try:
            submission_id = fake.start(study_id, participant_id)
        except Refused:
            with self._lock:
                self.out.refused["start on Prolific"] += 1
            return None
        url = fake.studies[study_id].fields["external_study_url"]
        for name, value in (("PROLIFIC_PID", participant_id), ("STUDY_ID", study_id),
                            ("SESSION_ID", submission_id)):
            url = url.replace("{{%" + name + "%}}", value)
        return submission_id, url[len(self.base_url):] if url.startswith(self.base_url) else url

    def _complete(self, submission_id: str, code: str, draw: str) -> None:
        """Back on Prolific with the completion code; or (``time_outs``, drawn by ``draw``) they closed the tab
        on the way and Prolific times the submission out, with the turns written in it stored."""
        if random.Random(f"{self.seed}:time-out:{draw}").random() < self.time_outs:
            self.prolific.time_out(submission_id)
            with self._lock:
                self.out.timed_out_after_writing.add(submission_id)
        else:
            self.prolific.complete(submission_id, code)

    def _end_place(self, name: str, ended: dict[str, Any]) -> None:
        """A session place our page ended: the participant finishes the submission with its code."""
        submission_id, _ = self.places.pop(name)
        if ended["turns_written"]:
            self._complete(submission_id, ended["completion_code"], submission_id)
        else:  # a session in which no turn was offered: still finished with the code (they gave their time)
            self.prolific.complete(submission_id, ended["completion_code"])

    def _finish_places(self) -> None:
        """Once the batch is written, every participant still in a session opens its page again and gets the
        code (no work left), answering first the questions of dialogs they owe; in name order."""
        for name in sorted(self.places):
            worker = self.by_name[name]
            try:
                view = self._arrive(self.participants[name], self.places[name][1], worker)
            except TurnRefused as refusal:
                self.places.pop(name)
                with self._lock:
                    self.out.refused[f"{refusal.what} {refusal.status}"] += 1
                continue
            if not view.get("ended"):
                raise SimulationError(f"{name}'s session place did not end once the batch was written: {view}")
            self._end_place(name, view)

    def _leave_places(self, names: set[str]) -> None:
        """Participants who leave for good mid-session close the page of their place, whose ``pagehide`` beacon
        says so (their kept conversations go to others at once), and return their submission on Prolific (their
        place ends once turkflow learns it)."""
        for name in sorted(names & set(self.places)):
            self.participants[name].left(*self.exits[name])
            self.prolific.return_submission(self.places.pop(name)[0])

    def _arrive(self, client: ParticipantClient, link: str, worker: SimWorker) -> dict[str, Any]:
        """The turn page the study link gives the participant, once they have answered the questions of the
        dialogs they wrote in and owe, which our page asks first (their turn is held for them meanwhile)."""
        view = client.view(link)
        while "survey_url" in view and self.play is not None:
            url = view["survey_url"]
            conversation = self.position[int(parse_qs(urlsplit(url).query)["c"][0])]
            self.play.answer_survey(StudyTurnPage(client, link, ""), worker, url,
                                    conversation, self.out)
            view = client.view(link)
        return view

    def _open_study(self, role: str) -> str:
        """The batch role's study once it takes participants (the Celery worker keeps its places in step
        with the waiting turns, a moment after each change)."""
        deadline = time.monotonic() + self.settle_timeout
        while True:
            with session_scope(self.settings.database_url) as session:
                study_id = session.exec(select(ProlificStudy.study_id).where(
                    ProlificStudy.batch_id == self.out.batch_id, ProlificStudy.role == role)).first()
            study = self.prolific.studies.get(study_id) if study_id else None
            if study is not None and study.status == "ACTIVE" and self.prolific.places_free(study_id) > 0:
                return study_id
            if time.monotonic() > deadline:
                raise SimulationError(f"the {role} study on Prolific took no participants for "
                                      f"{self.settle_timeout:.0f}s (is the Celery worker running?)")
            time.sleep(0.02)

    def _check_history(self, job: Job, view: dict[str, Any]) -> None:
        """The page must show exactly the turns the crowd wrote before this one, in order."""
        shown = [(entry["index"], entry["text"]) for entry in view["history"]]
        written = {**self.out.agent_turns, **self.out.turns}
        expected = [(i, written[(job.conversation, i)].text) for i in range(job.index)
                    if (job.conversation, i) in written]
        if shown != expected:
            with self._lock:
                self.out.history_mismatches += 1

    # -- waiting for the pipeline --

    def _settle(self, batch_id: int, turn_ids: Optional[list[int]] = None, bonuses: bool = False) -> None:
        """Wait until Celery has opened the next turns and reviewed the turns ``turn_ids`` (default: the
        whole batch's), and paid every bonus if asked."""
        deadline = time.monotonic() + self.settle_timeout
        while True:
            with session_scope(self.settings.database_url) as session:
                waiting = pipeline_backlog(session, batch_id, turn_ids, bonuses=bonuses)
            if not any(waiting.values()):
                return
            if time.monotonic() > deadline:
                raise SimulationError(
                    "the pipeline stopped advancing: " + ", ".join(f"{n} {what}" for what, n in waiting.items() if n)
                    + f" after {self.settle_timeout:.0f}s (is the Celery worker running?)")
            time.sleep(0.02)


def pipeline_backlog(session: Session, batch_id: int, turn_ids: Optional[list[int]] = None,
                     bonuses: bool = False) -> dict[str, int]:
    """Work Celery still owes a batch: conversations without an open HIT, unjudged ratings, unreviewed
    turns, unpaid bonuses.

    ``turn_ids`` narrows the look to the conversations and ratings of those submitted turns (one round's),
    so waiting costs the same at the end of a large batch as at its start.
    """
    conversations = select(Conversation.id).where(Conversation.batch_id == batch_id)
    turns = select(Turn.id).join(Conversation, Conversation.id == Turn.conversation_id).where(
        Conversation.batch_id == batch_id)
    ratings = (select(Rating.id).join(Turn, Turn.id == Rating.rater_turn_id)
               .join(Conversation, Conversation.id == Turn.conversation_id).where(Conversation.batch_id == batch_id))
    if turn_ids is not None:
        conversations = select(Turn.conversation_id).where(col(Turn.id).in_(turn_ids))
        ratings = select(Rating.id).where(col(Rating.rater_turn_id).in_(turn_ids))
        turns = select(Turn.id).where(col(Turn.id).in_(turn_ids))
    open_hit = (select(Hit.id).join(Turn, Turn.id == Hit.turn_id)
                .where(Turn.conversation_id == Conversation.id, Turn.status == TurnStatus.open,
                       Hit.status == HitStatus.open))
    backlog = {
        "conversations without an open HIT": session.exec(
            select(func.count()).select_from(Conversation)
            .where(col(Conversation.id).in_(conversations), Conversation.status == ConversationStatus.active,
                   ~open_hit.exists())
        ).one(),
        "unjudged ratings": session.exec(  # the monitor judges people's ratings of people only
            select(func.count()).select_from(Rating)
            .where(col(Rating.id).in_(ratings),
                   ~select(QualityDecision.id).where(QualityDecision.rating_id == Rating.id).exists(),
                   ~select(Worker.id).where(col(Worker.id).in_([Rating.author_id, Rating.rater_id]),
                                            Worker.kind == WorkerKind.agent).exists())
        ).one(),
        "unreviewed turns": session.exec(
            select(func.count()).select_from(Turn)
            .where(col(Turn.id).in_(turns), Turn.status == TurnStatus.submitted, col(Turn.reviewed_at).is_(None))
        ).one(),
    }
    if bonuses:  # one claimed for a pay whose outcome is unknown is settled from the platform, or by a person
        backlog["unpaid bonuses"] = session.exec(
            select(func.count()).select_from(Bonus).join(Turn, Turn.id == Bonus.turn_id)
            .join(Conversation, Conversation.id == Turn.conversation_id)
            .where(Conversation.batch_id == batch_id, Bonus.status == BonusStatus.pending,
                   col(Bonus.pay_claimed_at).is_(None))
        ).one()
    return backlog


def as_utc(moment: datetime) -> datetime:
    """Database datetimes come back naive on SQLite; they are UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


