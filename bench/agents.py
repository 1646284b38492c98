"""Agents in the loop, measured (issue 37): failures that lose nothing, and people's next turns unslowed by slow
agents, on one real stack (redis-server, gunicorn, a Celery worker per queue with the agents queue on threads as
the Procfile runs it, beat), the agents' endpoints fake OpenAI-compatible servers in this process.

1. Failures: a batch whose teacher is an endpoint agent of which ``--timeouts`` of the calls time out and
   ``--server-errors`` answer 500, whose student is the built-in ``sim-good``, run until every conversation
   ended. Counted: conversations lost (active, nothing open, nothing due), turns half stored, conversations
   ended without a reason; every end reason and every call outcome.
2. People's next turn: the same people-only simulated batch (both roles simulated people over HTTP) with no
   agents running, then beside ``--conversations`` conversations whose teacher is an agent of ``--delay``
   seconds (student ``sim-good``), alternated ``--rounds`` times: the people's submit-to-next-turn-open p99 side
   by side, the agent turns answered per second and the latency each agent turn adds beyond the model's.

    python -m bench agents                         # 100 agent conversations, a 2 s agent, SQLite
    python -m bench agents --rounds 2 --conversations 60 --people 40
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench._cpu import load

OUT = Path("bench/out")
QUEUES = {"turns": 1, "reviews": 1, "platform,sweeps": 1, "agents": 64}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench agents", description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=100, help="conversations of each batch")
    parser.add_argument("--delay", type=float, default=2.0, help="the slow agent's seconds per answer")
    parser.add_argument("--timeouts", type=float, default=0.10, help="failures run: share of calls timing out")
    parser.add_argument("--server-errors", type=float, default=0.05, help="failures run: share answering 500")
    parser.add_argument("--people", type=int, default=60, help="simulated people, half of each role")
    parser.add_argument("--rounds", type=int, default=1, help="without / with agents, alternated")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--think-time", type=float, default=0.0, help="people's mean seconds before a submit")
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
        with FakeOpenAI(delay=0.2, timeout_sleep=3.0, errors=(args.timeouts, args.server_errors),
                        seed=args.seed) as flaky, FakeOpenAI(delay=args.delay, seed=args.seed) as slow, \
                Stack(settings, work / "logs", web_workers=3, web_threads=4, queue_workers=QUEUES) as stack:
            for fake in (flaky, slow):
                fake.answer = sharing_teacher(args.seed)
            declare(stack.settings, "flaky", flaky.url, timeout=1.0)
            declare(stack.settings, "slow", slow.url, timeout=args.delay + 10)
            if not args.skip_failures:
                results["failures"] = failures(stack, args)
            results["people"] = people(stack, args)
        for name in ("flaky", "slow"):
            results[f"{name}_calls"] = len((flaky if name == "flaky" else slow).requests)
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


def people(stack: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The same batch of ``--conversations`` conversations, its teachers simulated people, then the slow agent
    (its students simulated people both times), alternated: people's submit-to-next-turn-open, side by side."""
    from sqlmodel import func, select

    from turkflow.db import session_scope
    from turkflow.models import Batch
    from turkflow.simulator.run import SimulationConfig, run_on

    rows = []
    print("  teachers       | people turns | people's next turn open p50 / p95 / p99 ms | agent turns/s | "
          "added per agent turn p50 / p95 ms")
    for round_no in range(args.rounds):
        for with_agents in (False, True):
            students = args.people // 2
            config = SimulationConfig(students=students, teachers=0 if with_agents else args.people - students,
                                      conversations=args.conversations, max_turns=16, mean_turns=8,
                                      seed=args.seed + round_no, policy="none", mix={}, concurrency=16,
                                      think_time=args.think_time,
                                      settle_timeout=300, agents={"teacher": ("slow",)} if with_agents else {})
            started = time.monotonic()
            report = run_on(stack.settings, stack.url, config)
            window = (started, time.monotonic())
            with session_scope(stack.settings.database_url) as session:
                batch_id = session.exec(select(func.max(Batch.id))).one()
            agents = agent_rate(stack.settings, batch_id, window, args.delay) if with_agents else {}
            latency = report["measured"]["submit_to_next_hit_open_ms"]["worker"]
            row = {"with_agents": with_agents, "round": round_no, "people_turns":
                   report["reproducible"]["turns"]["stored"], "next_turn_ms": latency, **agents}
            rows.append(row)
            print(f"  {'a 2 s agent' if with_agents else 'people':14} | {row['people_turns']:12} | "
                  f"{latency['p50']} / {latency['p95']} / {latency['p99']} | "
                  f"{agents.get('agent_turns_per_second', '')} | {agents.get('added_ms_p50', '')} / "
                  f"{agents.get('added_ms_p95', '')}")
    without = [r["next_turn_ms"]["p99"] for r in rows if not r["with_agents"]]
    beside = [r["next_turn_ms"]["p99"] for r in rows if r["with_agents"]]
    ratio = (sum(beside) / len(beside)) / (sum(without) / len(without)) if without and sum(without) else None
    print(f"  people's next-turn p99, agent teachers / people teachers: {ratio:.2f}x" if ratio else "  no ratio")
    return {"rows": rows, "p99_ratio": ratio}


def agent_rate(settings: Any, batch_id: int, window: tuple[float, float], delay: float) -> dict[str, Any]:
    """Agent turns answered in the people's window, per second, and what each added beyond the model's delay
    (from its turn opening to its answer stored, less ``delay``)."""
    from sqlmodel import select

    from turkflow.db import session_scope
    from turkflow.models import AgentTurn, Conversation

    with session_scope(settings.database_url) as session:
        rows = session.exec(select(AgentTurn.created_at, AgentTurn.ended_at, AgentTurn.latency_ms)
                            .join(Conversation, Conversation.id == AgentTurn.conversation_id)
                            .where(Conversation.batch_id == batch_id, AgentTurn.status == "answered")).all()
    slow = [(ended - created).total_seconds() * 1000 - delay * 1000 for created, ended, latency in rows
            if latency >= delay * 1000]  # the endpoint agent's (the student, sim-good, answers at once)
    slow.sort()
    seconds = window[1] - window[0]
    return {"agent_turns": len(rows), "agent_turns_per_second": round(len(rows) / seconds, 2),
            "added_ms_p50": round(slow[len(slow) // 2]) if slow else None,
            "added_ms_p95": round(slow[int(len(slow) * 0.95)]) if slow else None}


if __name__ == "__main__":
    main()
