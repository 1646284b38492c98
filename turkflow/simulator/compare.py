"""``turkflow simulate --protocol compare``: judges of a hidden accuracy and position bias compare the dialogs of
systems of known strength side by side, and the report says how well the votes rank the systems (Kendall's tau
against the true order) and how well the quality monitor told careless and one-sided judges from honest ones.

It runs in this process on the domain functions the pages call (no web stack), as the annotation simulation
does: first one Wizard of Tasks batch per system, each with a few finished dialogs on the same sample tasks
(the systems are those batches' people); then a comparison batch over them. Each simulated judge passes the
judge's quiz on the onboarding's rules (a careless judge retakes it until they pass; a one-sided judge reads
it, then clicks one side in the work), then takes units from the queue as a person would. The truth: system
``k`` of the strength order beats system ``k - 1`` with probability ``win_rate`` (Davidson's model with tie
parameter ``tie``). An honest judge reads a pair with their hidden accuracy (else picks at random) and leans
to the left by their position bias; a careless judge picks at random; a one-sided judge always picks the same
side. The pipeline's review runs after every judgement, as the Celery task does, so the monitor blocks on the
known-answer pairs as it would live. The same seed gives the same report.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from sqlmodel import Session, select

from turkflow import pipeline
from turkflow.config import Settings, default
from turkflow.db import session_scope, upgrade
from turkflow.hits import lifecycle, onboarding
from turkflow.hits import registry as platforms
from turkflow.models import Task, Turn, Worker, WorkerStatus
from turkflow.protocols.compare import dialog as compare, pairs, ranking
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.quality.monitor import Policy
from turkflow.simulator.crowd import take_first_offered

HONEST, CARELESS, ONE_SIDED = "honest", "careless", "one_sided"
EARLY_VOTES = 10  # a careless or one-sided judge is caught early when blocked within this many votes


@dataclass(frozen=True)
class CompareConfig:
    systems: int = 4
    votes: int = 400  # votes the ranking counts (judges not blocked) at the end
    judges: int = 20
    careless: float = 0.2  # share of judges careless or one-sided, half each
    strategy: str = pairs.ADAPTIVE
    tasks: int = 2  # sample tasks every system has dialogs of
    dialogs: int = 3  # finished dialogs per system and task
    win_rate: float = 0.6  # how often a system beats the next weaker one
    tie: float = 0.3  # Davidson's nu of an honest judge's reading
    accuracy: tuple[float, float] = (0.9, 1.0)  # an honest judge's hidden accuracy, drawn in this range
    bias: float = 0.2  # standard deviation of honest judges' position bias (log-odds for the left)
    policy: str = default("compare_policy")
    probation: int = default("compare_probation")
    gold_every: int = default("compare_gold_every")
    checkpoint: int = 25  # tau is also measured every this many counted votes
    seed: int = 1


@dataclass
class Judge:
    worker_id: int
    behaviour: str
    accuracy: float
    bias: float
    side: str  # a one-sided judge's side
    votes: int = 0
    known_answer: int = 0
    quiz_attempts: int = 0
    blocked_after: Optional[int] = None  # their votes when the monitor blocked them


@dataclass
class Run:
    strengths: dict[str, float]
    judges: list[Judge]
    tau_by_votes: dict[int, float] = field(default_factory=dict)


def run(settings: Settings, config: CompareConfig) -> dict[str, Any]:
    """Play the systems' batches, compare them, and report (plain data; ``reproducible`` from the seed)."""
    if config.systems < 2 or config.votes < 1 or config.judges < 1:
        raise ValueError("at least two systems, one vote and one judge")
    if not (0 <= config.careless <= 1 and 0.5 < config.win_rate < 1):
        raise ValueError("careless is a share between 0 and 1; win rate is above 0.5 and below 1")
    pairs.check_strategy(config.strategy)
    started = time.monotonic()
    upgrade(settings.database_url)
    rng = random.Random(config.seed)
    providers = platforms.providers(settings)
    local = providers.get("local")
    with session_scope(settings.database_url) as session:
        systems = play_systems(session, local, config)
        order = rng.sample(systems, len(systems))  # the true order, weakest first
        gap = math.log(config.win_rate / (1 - config.win_rate))
        strengths = {pairs.system_of(b): n * gap for n, b in enumerate(order)}
        # units enough for the votes to count even when the monitor blocks some judges' votes out
        per_pair = math.ceil(1.5 * config.votes / math.comb(config.systems, 2))
        batch, hits = compare.launch(session, systems, "Which assistant would you rather talk to?", per_pair,
                                     strategy=config.strategy, probation=config.probation,
                                     gold_every=config.gold_every, seed=config.seed, name="simulated comparison",
                                     quality=Policy.parse(config.policy).batch_fields())
        for hit in hits:
            lifecycle.publish_hit(session, local, hit.id)
        batch_id = batch.id
        crowd = judges(session, config, rng, settings.onboarding_pass_percent)
    state = Run(strengths, crowd)
    counted = 0
    while counted < config.votes:
        worked = False
        for judge in rng.sample(crowd, len(crowd)):
            with session_scope(settings.database_url) as session:
                turn_id = judge_one(session, judge, state, config, rng)
            if turn_id is None:
                continue
            worked = True
            pipeline.after_submission(settings, providers, turn_id)  # as the Celery task does
            with session_scope(settings.database_url) as session:
                if session.get(Worker, judge.worker_id).status != WorkerStatus.active and judge.blocked_after is None:
                    judge.blocked_after = judge.votes
                found = pairs.judgements(session, batch_id)
            counted = len(pairs.votes(found))
            if counted and counted % config.checkpoint == 0 and counted not in state.tau_by_votes:
                state.tau_by_votes[counted] = tau(found, strengths)
            if counted >= config.votes:
                break
        if not worked:
            break
    with session_scope(settings.database_url) as session:
        return _report(session, config, batch_id, state, time.monotonic() - started)


def play_systems(session: Session, local: Any, config: CompareConfig) -> list[int]:
    """One Wizard of Tasks batch per system, each with ``dialogs`` finished dialogs on each of the first
    ``tasks`` sample tasks; returns the batches' ids."""
    load_documents(session, read_documents(sample_tasks_path()))
    tasks = list(session.exec(select(Task).where(Task.protocol == "wizard_of_tasks").order_by(Task.id)))[:config.tasks]
    batches = []
    for n in range(config.systems):
        batch, hits = lifecycle.launch_batch(session, tasks, config.dialogs * len(tasks), name=f"system {n + 1}",
                                             quality=Policy.parse("none").batch_fields())
        student, teacher = (_worker(session, f"sim-system-{n + 1}-{role}", role) for role in ("student", "teacher"))
        for hit in hits:
            lifecycle.publish_hit(session, local, hit.id)
            conversation_id = session.get(Turn, hit.turn_id).conversation_id
            for role, answers in DIALOG:
                worker = student if role == "student" else teacher
                open_hit = session.exec(select(Turn).where(Turn.conversation_id == conversation_id,
                                                           Turn.status == "open")).one()
                mine = next(h for h in lifecycle.open_hits_for(session, worker, limit=200)
                            if h.turn_id == open_hit.id)
                assignment = lifecycle.take_turn(session, worker, mine.id, lease_seconds=600)
                lifecycle.submit_turn(session, assignment.external_id, worker, dict(answers))
                opened = lifecycle.advance_conversation(session, conversation_id)
                if opened is not None:
                    lifecycle.publish_hit(session, local, opened.id)
        batches.append(batch.id)
    return batches


RATED = {"relevant": "yes", "useful": "yes"}
DIALOG = (  # a short dialog of a task: the student asks, the teacher answers, the student stops
    ("student", {"intent": "request_items", "response": "Hi! What do I need for this?"}),
    ("teacher", {**RATED, "action": "return_items", "response": "Everything on the list in the document."}),
    ("student", {**RATED, "real_life": "Take them out.", "intent": "stop", "response": "Thanks, that is all."}),
    ("teacher", {**RATED, "action": "chit_chat", "response": "You are welcome, good luck with it!"}),
)


def _worker(session: Session, external_id: str, role: str) -> Worker:
    worker = Worker(external_id=external_id, role=role, onboarded=True)
    session.add(worker)
    session.flush()
    return worker


def judges(session: Session, config: CompareConfig, rng: random.Random, pass_percent: int) -> list[Judge]:
    """The crowd, each through the judge's quiz: the first ``careless`` share careless or one-sided."""
    bad = round(config.careless * config.judges)
    crowd = []
    for n in range(config.judges):
        behaviour = HONEST if n >= bad else CARELESS if n % 2 == 0 else ONE_SIDED
        worker = Worker(external_id=f"sim-judge-{n + 1}", role="judge")
        session.add(worker)
        session.flush()
        judge = Judge(worker.id, behaviour, rng.uniform(*config.accuracy) if behaviour == HONEST else 0.0,
                      rng.gauss(0, config.bias) if behaviour == HONEST else 0.0, rng.choice(["left", "right"]))
        quiz = onboarding.quiz_for("judge")
        while not worker.onboarded:
            judge.quiz_attempts += 1
            reads = behaviour == ONE_SIDED or (behaviour == HONEST and rng.random() < judge.accuracy)
            answers = {q.name: q.answer if reads else rng.choice(q.options)[0] for q in quiz.questions}
            onboarding.onboard_worker(session, worker, answers, pass_percent)
        crowd.append(judge)
    return crowd


def judge_one(session: Session, judge: Judge, state: Run, config: CompareConfig, rng: random.Random
              ) -> Optional[int]:
    """The judge takes the first unit the queue offers, reads the pair and sends a choice; the submitted
    turn's id, None when they are blocked or nothing is left for them."""
    worker = session.get(Worker, judge.worker_id)
    taken = take_first_offered(session, worker)
    if taken is None:
        return None
    assignment, turn = taken
    compare.judge_view(session, turn, worker)
    shown = compare.shown(session, turn, worker)
    choice = choose(judge, shown, state, config, rng)
    compare.submit_turn(session, assignment.external_id, worker,
                        {"choice": choice, "response": "Clearer and more helpful." if choice != "tie"
                         else "About the same."})
    if shown.get("gold"):
        judge.known_answer += 1
    else:
        judge.votes += 1
    return turn.id


def choose(judge: Judge, shown: dict[str, Any], state: Run, config: CompareConfig, rng: random.Random) -> str:
    """The judge's choice by their behaviour (the hidden truth decides what a reading judge prefers)."""
    if judge.behaviour == ONE_SIDED:
        return judge.side
    if judge.behaviour == CARELESS or rng.random() >= judge.accuracy:
        return rng.choice(["left", "right"])
    if shown.get("gold"):
        return shown["expected"]
    left = state.strengths[shown["left"]["system"]] + judge.bias
    right = state.strengths[shown["right"]["system"]]
    even = (left + right) / 2 + math.log(config.tie)
    weights = [math.exp(x - max(left, right, even)) for x in (left, right, even)]
    return rng.choices(["left", "right", "tie"], weights=weights)[0]


def tau(found: list[pairs.Judgement], strengths: dict[str, float]) -> float:
    """Kendall's tau of the ranking the counted votes give against the true order."""
    systems = sorted(strengths)
    fitted = ranking.fit(ranking.count(systems, pairs.votes(found)))
    return round(ranking.kendall_tau(fitted.strength, [strengths[s] for s in systems]), 4)


def _report(session: Session, config: CompareConfig, batch_id: int, state: Run, wall: float) -> dict[str, Any]:
    found = pairs.judgements(session, batch_id)
    counted = pairs.votes(found)
    bad = [j for j in state.judges if j.behaviour != HONEST]
    honest = [j for j in state.judges if j.behaviour == HONEST]
    caught = [j for j in bad if j.blocked_after is not None and j.blocked_after <= EARLY_VOTES]
    blocked_honest = [j for j in honest if j.blocked_after is not None]
    known = [j for j in found if j.gold]
    return {
        "parameters": asdict(config),
        "reproducible": {
            "kendall_tau": tau(found, state.strengths),
            "votes": len(counted),
            "careless_caught_share": round(len(caught) / len(bad), 4) if bad else None,
            "honest_blocked_share": round(len(blocked_honest) / len(honest), 4) if honest else None,
            "tau_by_votes": {str(n): t for n, t in sorted(state.tau_by_votes.items())},
            "true_order": sorted(state.strengths, key=state.strengths.get, reverse=True),
            "votes_left_out": len(pairs.votes(found, include_blocked=True)) - len(counted),
            "known_answer_pairs": len(known),
            "known_answer_right": sum(1 for j in known if j.choice == j.shown["expected"]),
            "judges": [{"judge": n + 1, "behaviour": j.behaviour, "accuracy": round(j.accuracy, 3),
                        "bias": round(j.bias, 3), "votes": j.votes, "known_answer": j.known_answer,
                        "quiz_attempts": j.quiz_attempts, "blocked_after_votes": j.blocked_after}
                       for n, j in enumerate(state.judges)],
        },
        "measured": {"wall_seconds": round(wall, 1)},
    }
