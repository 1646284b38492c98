"""Agents in the loop, measured (issue 37): failures that lose nothing, and people's next turns unslowed by slow
agents, on one real stack (redis-server, gunicorn, a Celery worker per queue with the agents queue on threads as
the Procfile runs it, beat), the agents' endpoints fake OpenAI-compatible servers, each in a process of its own.

1. Failures: a batch whose teacher is an endpoint agent of which ``--timeouts`` of the calls time out and
   ``--server-errors`` answer 500, whose student is the built-in ``sim-good``, run until every conversation
   ended. Counted: conversations lost (active, nothing open, nothing due), turns half stored, conversations
   ended without a reason; every end reason and every call outcome.
2. People's next turn: a batch of ``--conversations`` conversations at once, each with its own simulated
   student, run to its end twice, alternated ``--rounds`` times: its teachers simulated people who answer in
   ``--delay`` seconds, then an endpoint agent whose model answers in ``--delay`` seconds. The same arrival
   process in both arms: a student takes their turn as soon as it opens and submits ``--think`` seconds later
   on average (the same seeded draws in both arms). Compared, p99 side by side (``waits``): the pipeline's part
   of a student's wait for their next turn, the same quantity in both arms (their submit to the other role's turn
   open, plus the other role's answer, a person's submit sent or the agent's reply received, to the student's
   next turn open), and the stricter whole wait beyond the other role's own time (for an agent everything but
   the model's seconds: the agents queue, the claim, the view, the call's own overhead count against it), with
   where an agent's turn spends its time (its turn open to the call, the call beyond the model).

    python -m bench agents                                       # 100 conversations, a 2 s agent, SQLite
    python -m bench agents --skip-failures --rounds 3 --backend postgresql
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Optional

from bench._cpu import load
from bench._data import SGD_DEV
from bench.capacity import _percentile

OUT = Path("bench/out")
QUEUES = {"turns": 1, "reviews": 1, "platform,sweeps": 1, "agents": 64}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench agents", description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=100, help="conversations of each batch, at once")
    parser.add_argument("--delay", type=float, default=2.0, help="the slow agent's (and people teachers') seconds")
    parser.add_argument("--timeouts", type=float, default=0.10, help="failures run: share of calls timing out")
    parser.add_argument("--server-errors", type=float, default=0.05, help="failures run: share answering 500")
    parser.add_argument("--think", type=float, default=10.0, help="a student's mean seconds from take to submit")
    parser.add_argument("--max-turns", type=int, default=12, help="next turn: each conversation's turn limit")
    parser.add_argument("--mean-turns", type=int, default=12, help="next turn: the scripts' mean length")
    parser.add_argument("--rounds", type=int, default=2, help="people / agent, alternated")
    parser.add_argument("--threads", type=int, default=48, help="the simulated people's request threads")
    parser.add_argument("--poll", type=float, default=0.02, help="seconds between looks for open turns")
    parser.add_argument("--arm-timeout", type=float, default=900, help="seconds an arm may take at most")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-failures", action="store_true")
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"])
    args = parser.parse_args(argv)

    from turkflow.config import Settings
    from turkflow.simulator.fake_openai import FakeOpenAI
    from turkflow.simulator.stack import PostgresCluster, Stack

    OUT.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"agents at {commit}: {args.conversations} conversations, a {args.delay:g} s agent, {args.backend}; "
          f"{load()}")
    results: dict[str, Any] = {"commit": commit, "args": vars(args)}
    with tempfile.TemporaryDirectory(prefix="turkflow-bench-agents-") as scratch, ExitStack() as running:
        work = Path(scratch)
        url = f"sqlite:///{work / 'turkflow.db'}"
        if args.backend == "postgresql":
            cluster = PostgresCluster()
            cluster.start()
            running.callback(cluster.stop)
            url = cluster.create_database("agents")
        settings = Settings(data_dir=work, database_url=url, secret_key="bench",
                            worker_hash_key="bench", agent_backoff_seconds=0.5, agent_backoff_max_seconds=4,
                            agent_sweep_seconds=1, reopen_after_seconds=30)
        flaky = FakeOpenAI(delay=0.2, timeout_sleep=3.0, errors=(args.timeouts, args.server_errors), seed=args.seed,
                           own_process=True)
        slow = FakeOpenAI(delay=args.delay, seed=args.seed, own_process=True)
        for fake in (flaky, slow):
            fake.answer = sharing_teacher(args.seed)
            running.enter_context(fake)
        with Stack(settings, work / "logs", web_workers=3, web_threads=4, queue_workers=QUEUES) as stack:
            declare(stack.settings, "flaky", flaky.url, timeout=1.0)
            declare(stack.settings, "slow", slow.url, timeout=args.delay + 10)
            if not args.skip_failures:
                results["failures"] = failures(stack, args)
            results["next_turn"] = next_turns(stack, args, {"agent endpoint": slow.process})
    (OUT / "agents.json").write_text(json.dumps(results, indent=2, default=str))
    print(f"  written to {OUT / 'agents.json'}")


def sharing_teacher(seed: int) -> Any:
    """What the fake model answers: the plainest answer to the schema, sharing one item of the document, so
    the simulated student carries on."""
    from turkflow.simulator.fake_openai import sample, schema_of

    rng = random.Random(seed)

    def answer(body: dict[str, Any]) -> Any:
        schema = schema_of(body)
        found = sample(schema)
        shared = schema.get("properties", {}).get("shared", {}).get("items", {}).get("enum")
        if isinstance(found, dict) and shared:
            found["shared"] = [rng.choice(shared)]
        return found

    return answer


def declare(settings: Any, name: str, url: str, timeout: float) -> None:
    from turkflow.agents.registry import add_agent
    from turkflow.db import session_scope

    with session_scope(settings.database_url) as session:
        add_agent(session, name, endpoint=url, model="fake-model", timeout_seconds=timeout)


def launch(settings: Any, conversations: int, teacher: str, max_turns: int, name: str) -> int:
    """A batch whose student is the built-in sim-good and whose teacher is ``teacher``: its first turns are the
    agents'."""
    from sqlmodel import select

    from turkflow.agents.registry import find_agents
    from turkflow.db import session_scope
    from turkflow.hits import lifecycle, registry
    from turkflow.models import Task
    from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path

    providers = registry.providers(settings)
    with session_scope(settings.database_url) as session:
        if session.exec(select(Task.id)).first() is None:
            load_documents(session, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(
            session, list(session.exec(select(Task).order_by(Task.id))), conversations, name=name,
            max_turns=max_turns, agents={"student": find_agents(session, ["sim-good"]),
                                         "teacher": find_agents(session, [teacher])})
        for hit in hits:
            lifecycle.publish_hit(session, providers.get(hit.provider), hit.id)
        return batch.id


def failures(stack: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Run the flaky agent's batch to its end; what was lost, half stored or ended without a reason."""
    from sqlmodel import func, select

    from turkflow.db import session_scope
    from turkflow.models import AgentCall, AgentTurn, Conversation, Turn

    started = time.monotonic()
    batch_id = launch(stack.settings, args.conversations, "flaky", 8, "failures")
    url = stack.settings.database_url
    while time.monotonic() - started < 900:
        with session_scope(url) as session:
            active = session.exec(select(func.count()).select_from(Conversation).where(
                Conversation.batch_id == batch_id, Conversation.status == "active")).one()
        if not active:
            break
        time.sleep(1)
    with session_scope(url) as session:
        conversations = session.exec(select(Conversation).where(Conversation.batch_id == batch_id)).all()
        ids = [c.id for c in conversations]
        turns = session.exec(select(Turn).where(Turn.conversation_id.in_(ids))).all()
        agent_turns = {a.turn_id: a for a in session.exec(select(AgentTurn).where(AgentTurn.conversation_id.in_(ids)))}
        outcomes = dict(session.exec(select(AgentCall.outcome, func.count()).join(
            AgentTurn, AgentTurn.turn_id == AgentCall.turn_id).where(AgentTurn.conversation_id.in_(ids))
            .group_by(AgentCall.outcome)).all())
    open_or_due = {t.conversation_id for t in turns if t.status == "open"}
    lost = [c.id for c in conversations if c.status == "active" and c.id not in open_or_due]
    half = [t.id for t in turns if (t.status == "submitted" and not t.text)
            or (t.id in agent_turns and (agent_turns[t.id].status == "answered") != (t.status == "submitted"))]
    no_reason = [c.id for c in conversations if c.status != "active" and not c.end_reason]
    reasons: dict[str, int] = {}
    for c in conversations:
        reasons[c.end_reason or c.status] = reasons.get(c.end_reason or c.status, 0) + 1
    failed = {a.reason.split(":")[0] for a in agent_turns.values() if a.status in ("failed", "handed_over")}
    found = {"conversations": len(conversations), "still_active": sum(c.status == "active" for c in conversations),
             "lost": len(lost), "half_stored_turns": len(half), "ended_without_reason": len(no_reason),
             "end_reasons": reasons, "call_outcomes": outcomes, "failed_turn_reasons": sorted(failed),
             "agent_turns": len(agent_turns), "seconds": round(time.monotonic() - started, 1)}
    print(f"  failures ({args.timeouts:.0%} timeouts, {args.server_errors:.0%} 5xx): {found['conversations']} "
          f"conversations in {found['seconds']} s, lost {found['lost']}, half stored {found['half_stored_turns']}, "
          f"without a reason {found['ended_without_reason']}, still active {found['still_active']}")
    print(f"    end reasons {reasons}; calls {outcomes}")
    return found


class Crowd:
    """One arm's people, open loop: each conversation has its own simulated student (and teacher, where people
    teach), who takes their turn as soon as it is open (``seen``) and submits it after thinking: a student
    ``--think`` seconds on average (drawn from half to one and a half times it, seeded by conversation and turn,
    so both arms draw the same), a teacher exactly the agent's ``--delay``, as the model takes. Every action is
    one request on the scheduler's threads; a slow server delays only that conversation."""

    def __init__(self, scheduler: Any, clients: dict[str, Any], players: dict[tuple[int, str], str],
                 workers: dict[str, Any], scripts: list[Any], seed: int, think: float, delay: float):
        self.scheduler, self.clients, self.players, self.workers = scheduler, clients, players, workers
        self.scripts, self.seed, self.think, self.delay = scripts, seed, think, delay
        self.sent: dict[int, float] = {}  # turn id -> wall clock when its submit was sent
        self.errors: Counter[str] = Counter()
        self.busy = 0
        self.lock = threading.Lock()

    def seen(self, hit_id: int, position: int, index: int, role: str) -> None:
        with self.lock:
            self.busy += 1
        self.scheduler.at(time.monotonic(), lambda: self._take(hit_id, position, index, role))

    def _take(self, hit_id: int, position: int, index: int, role: str) -> None:
        from turkflow.simulator.driver import SimulationError, TurnRefused

        name = self.players[(position, role)]
        try:
            assignment_id, view = self.clients[name].take(hit_id)
        except (TurnRefused, SimulationError) as refused:
            self._failed(f"take: {str(refused)[:80]}")
            return
        wait = (random.Random(f"{self.seed}:think:{position}:{index}").uniform(0.5, 1.5) * self.think
                if role == "student" else self.delay)
        self.scheduler.at(time.monotonic() + wait, lambda: self._submit(name, position, assignment_id, view))

    def _submit(self, name: str, position: int, assignment_id: str, view: dict[str, Any]) -> None:
        from turkflow.simulator.crowd import write_turn
        from turkflow.simulator.driver import SimulationError, TurnRefused

        written = write_turn(self.workers[name], self.seed, position, self.scripts[position], view, True)
        sent = time.time()
        try:
            confirmed = self.clients[name].submit(assignment_id, written.form)
        except (TurnRefused, SimulationError) as refused:
            self._failed(f"submit: {str(refused)[:80]}")
            return
        with self.lock:
            self.sent[confirmed["turn_id"]] = sent
            self.busy -= 1

    def _failed(self, what: str) -> None:
        with self.lock:
            self.errors[what] += 1
            self.busy -= 1


def next_turns(stack: Any, args: argparse.Namespace, outside: dict[str, Any]) -> dict[str, Any]:
    """People teaching and the slow agent teaching, alternated (people first in even rounds, the agent first in
    odd ones), each arm a batch of ``--conversations`` conversations run to their end: the people's (students')
    wait for their next turn beyond the other role's own time, side by side."""
    from bench.capacity import Scheduler

    rows = []
    print(f"  {'teachers':8} | student turns | pipeline p50 / p95 / p99 ms | beyond the other's own p50 / p95 / p99 "
          f"ms | submit -> other open p99 | answer -> next open p99 | agent: open -> called p99, call beyond the "
          f"model p99 | agent turns/s | added per agent turn p50 / p95 | load")
    scheduler = Scheduler(args.threads)
    try:
        for round_no in range(args.rounds):
            for with_agents in ((False, True) if round_no % 2 == 0 else (True, False)):
                row = run_arm(stack, args, scheduler, with_agents, args.seed + round_no, outside)
                row["round"] = round_no
                rows.append(row)
                show(row)
    finally:
        scheduler.close()
    found: dict[str, Any] = {"rows": rows}
    for quantity, label in (("pipeline", "the pipeline's part"), ("beyond", "beyond the other role's own time")):
        pooled = {arm: [ms for r in rows if r["with_agents"] == arm for ms in r.pop(f"{quantity}_samples")]
                  for arm in (False, True)}
        people, agents = ({f"p{pct}": _percentile(pooled[arm], pct) for pct in (50, 95, 99)} for arm in (False, True))
        ratio = agents["p99"] / people["p99"] if people["p99"] and agents["p99"] is not None else None
        by_round = [sorted(pair, key=lambda row: row["with_agents"]) for pair in zip(rows[::2], rows[1::2])]
        rounds = [round(a[f"{quantity}_ms"]["p99"] / p[f"{quantity}_ms"]["p99"], 2) for p, a in by_round
                  if a[f"{quantity}_ms"]["p99"] and p[f"{quantity}_ms"]["p99"]]
        found[quantity] = {"people_ms": people, "agents_ms": agents, "p99_ratio": ratio, "round_p99_ratios": rounds}
        if ratio is not None:
            print(f"  people's next turn, {label}, p99 over {args.rounds} round(s): {agents['p99']:.0f} ms with a "
                  f"{args.delay:g} s agent teaching, {people['p99']:.0f} ms with people teaching: {ratio:.2f}x "
                  f"(target 1.1x; round by round {rounds})")
    return found


def run_arm(stack: Any, args: argparse.Namespace, scheduler: Any, with_agents: bool, seed: int,
            outside: dict[str, Any]) -> dict[str, Any]:
    """One batch to its end, its teachers people or the slow agent; what its students waited, and the CPU it took:
    the stack's processes, and beside them what a real batch runs elsewhere (``outside``: the agent's endpoint;
    the simulated people, this process's own threads), which loads the same 2 cores here."""
    from sqlmodel import col, func, select

    from bench._cpu import cpu_seconds
    from turkflow.config import default
    from turkflow.db import session_scope
    from turkflow.models import Conversation, ConversationStatus, Hit, HitStatus, Turn
    from turkflow.quality.monitor import Policy
    from turkflow.simulator.crowd import build_crowd
    from turkflow.simulator.driver import HttpLog, WorkerClient, launch
    from turkflow.simulator.utterances import read_dialogs, write_scripts

    n = args.conversations
    crowd = build_crowd(n, 0 if with_agents else n, {}, seed, played_by_agents=("teacher",) if with_agents else ())
    scripts = write_scripts(read_dialogs(SGD_DEV), n, seed, args.mean_turns)
    batch_id, join_urls, _, conversation_ids = launch(
        stack.settings, stack.url, crowd, scripts, max_turns=args.max_turns, policy=Policy.parse("none"),
        reward_cents=default("reward_cents"), seed=seed, onboarded=True,
        agents={"teacher": ("slow",)} if with_agents else None)
    http = HttpLog()
    clients = {name: WorkerClient(stack.url, join, http) for name, join in join_urls.items()}
    for client in clients.values():
        client.join()
    by_role: dict[str, list[str]] = {}
    for worker in crowd:
        by_role.setdefault(worker.role, []).append(worker.name)
    players = {(position, role): names[position] for role, names in by_role.items() for position in range(n)}
    people = sorted(by_role)
    positions = {cid: position for position, cid in enumerate(conversation_ids)}
    people_crowd = Crowd(scheduler, clients, players, {w.name: w for w in crowd}, scripts, seed, args.think,
                         args.delay)
    url = stack.settings.database_url
    open_people = (select(Hit.id, Turn.conversation_id, Turn.index, Turn.role).join(Turn, Turn.id == Hit.turn_id)
                   .join(Conversation, Conversation.id == Turn.conversation_id)
                   .where(Conversation.batch_id == batch_id, Hit.status == HitStatus.open,
                          col(Turn.role).in_(people)))
    seen: set[int] = set()
    before = {**cpu_seconds({**stack.processes, **outside}), "simulated people": _own_cpu()}
    started = time.monotonic()
    checked = 0.0
    while time.monotonic() - started < args.arm_timeout:
        with session_scope(url) as session:
            found = session.exec(open_people).all()
        for hit_id, conversation_id, index, role in found:
            if hit_id not in seen:
                seen.add(hit_id)
                people_crowd.seen(hit_id, positions[conversation_id], index, role)
        if time.monotonic() - checked > 0.5:
            checked = time.monotonic()
            with session_scope(url) as session:
                active = session.exec(select(func.count()).select_from(Conversation).where(
                    Conversation.batch_id == batch_id, Conversation.status == ConversationStatus.active)).one()
            if not active and not people_crowd.busy:
                break
        time.sleep(args.poll)
    seconds = time.monotonic() - started
    used = {**cpu_seconds({**stack.processes, **outside}), "simulated people": _own_cpu()}
    row = {"with_agents": with_agents, "seed": seed, "seconds": round(seconds, 1), "still_active": active,
           "crowd_errors": dict(people_crowd.errors), "http_errors": dict(http.errors),
           "cpu_s": {name: round(used[name] - before[name], 1) for name in used}, "load": load(),
           **waits(stack.settings, batch_id, people_crowd.sent, args.delay, seconds)}
    return row


def _own_cpu() -> float:
    """This process's CPU seconds, its threads' but not its children's (the stack, the endpoints)."""
    import psutil

    times = psutil.Process().cpu_times()
    return times.user + times.system


def waits(settings: Any, batch_id: int, sent: dict[int, float], delay: float, seconds: float) -> dict[str, Any]:
    """What each student waited for their next turn, from sending a submit to the conversation's next student turn
    open (its ``hit_published``, written in the opening's transaction). Of that, ``pipeline``: the submit to the
    other role's turn open, plus the other role's answer (a person's submit sent, the agent's reply received) to
    the student's next turn open: what the system does in both arms alike. ``beyond``: the wait less the other
    role's own time; a person teaching: from their turn open to their submit sent (noticing it, taking it, the
    ``--delay`` seconds of writing), the same as ``pipeline``; an agent: the model's ``--delay`` alone, so
    everything else of an agent's turn counts against the system as well: its turn open to the call (the agents
    queue, the claim, the view) and the call beyond the model."""
    from sqlmodel import col, select

    from turkflow.db import session_scope
    from turkflow.models import AgentCall, Conversation, Event, Turn
    from turkflow.simulator.driver import as_utc

    with session_scope(settings.database_url) as session:
        turns = session.exec(select(Turn.id, Turn.conversation_id, Turn.index, Turn.role)
                             .join(Conversation, Conversation.id == Turn.conversation_id)
                             .where(Conversation.batch_id == batch_id)).all()
        published = {turn_id: as_utc(at).timestamp() for turn_id, at in session.exec(
            select(Event.turn_id, Event.at).where(Event.batch_id == batch_id, Event.kind == "hit_published")
            .order_by(col(Event.id).desc()))}  # the first publication of a turn wins
        ids = [t.id for t in turns]
        calls = {turn_id: (as_utc(at).timestamp(), latency / 1000) for turn_id, at, latency in session.exec(
            select(AgentCall.turn_id, AgentCall.started_at, AgentCall.latency_ms)
            .where(col(AgentCall.turn_id).in_(ids), AgentCall.outcome == "ok"))}
    at = {(cid, index): (turn_id, role) for turn_id, cid, index, role in turns}
    beyond, first, second, to_call, call_over, added = [], [], [], [], [], []
    for turn_id, cid, index, role in turns:
        if role != "student" or turn_id not in sent:
            continue
        other, following = at.get((cid, index + 1)), at.get((cid, index + 2))
        if other is None or following is None or other[0] not in published or following[0] not in published:
            continue
        other_open, next_open = published[other[0]], published[following[0]]
        if other[0] in calls:  # an agent's turn
            called, latency = calls[other[0]]
            own, answered = delay, called + latency
            to_call.append(called - other_open)
            call_over.append(latency - delay)
            added.append(next_open - other_open - delay)
        elif other[0] in sent:
            own, answered = sent[other[0]] - other_open, sent[other[0]]
        else:
            continue
        beyond.append(next_open - sent[turn_id] - own)
        first.append(other_open - sent[turn_id])
        second.append(next_open - answered)

    def ms(values: list[float], pct: float) -> Optional[float]:
        found = _percentile(values, pct)
        return None if found is None else round(1000 * found, 1)

    pipeline = [a + b for a, b in zip(first, second)]
    return {"student_turns": len(pipeline), "pipeline_samples": [1000 * v for v in pipeline],
            "beyond_samples": [1000 * v for v in beyond],
            "pipeline_ms": {f"p{pct}": ms(pipeline, pct) for pct in (50, 95, 99)},
            "beyond_ms": {f"p{pct}": ms(beyond, pct) for pct in (50, 95, 99)},
            "submit_to_other_open_ms": {f"p{pct}": ms(first, pct) for pct in (50, 95, 99)},
            "answer_to_next_open_ms": {f"p{pct}": ms(second, pct) for pct in (50, 95, 99)},
            "agent_open_to_call_ms": {f"p{pct}": ms(to_call, pct) for pct in (50, 95, 99)},
            "agent_call_beyond_model_ms": {f"p{pct}": ms(call_over, pct) for pct in (50, 95, 99)},
            "added_per_agent_turn_ms": {f"p{pct}": ms(added, pct) for pct in (50, 95, 99)},
            "agent_turns_per_second": round(len(calls) / seconds, 2) if calls else None}


def show(row: dict[str, Any]) -> None:
    def three(key: str) -> str:
        return " / ".join(str(row[key][p]) for p in ("p50", "p95", "p99"))

    agent = (f"{row['agent_open_to_call_ms']['p99']}, {row['agent_call_beyond_model_ms']['p99']}"
             if row["with_agents"] else "")
    added = (f"{row['added_per_agent_turn_ms']['p50']} / {row['added_per_agent_turn_ms']['p95']}"
             if row["with_agents"] else "")
    print(f"  {'agent' if row['with_agents'] else 'people':8} | {row['student_turns']:13} | {three('pipeline_ms')} | "
          f"{three('beyond_ms')} | "
          f"{row['submit_to_other_open_ms']['p99']} | {row['answer_to_next_open_ms']['p99']} | {agent} | "
          f"{row['agent_turns_per_second'] or ''} | {added} | {row['load']}", flush=True)
    print(f"    CPU seconds: {row['cpu_s']}", flush=True)
    if row["crowd_errors"] or row["http_errors"] or row["still_active"]:
        print(f"    errors {row['crowd_errors']} {row['http_errors']}; still active {row['still_active']}")


if __name__ == "__main__":
    main()
