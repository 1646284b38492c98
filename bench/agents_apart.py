"""Telling agents apart in the simulator (issue 37's statistical targets): two agents whose turns are right 15
points apart are told apart by the agents' report on how many seeds, at 60 conversations each; two equal agents
are wrongly told apart on how many.

One real stack (redis-server, gunicorn, a Celery worker per queue with the agents queue on threads, beat), as
``bench agents`` runs it. Per seed, a simulated Wizard of Tasks batch (``turkflow simulate --agent teacher=A,B
--teachers 0``): the teachers are the two built-in simulated agents (``sim-NN``: each turn right with probability
NN/100 by construction, wrong ones off-topic), one drawn per conversation, balanced, so each plays half the
conversations; the students are honest simulated people who rate each teacher turn by what it was (misjudging
5%, ``crowd.RATER_ERROR``). The batch's agents' report, computed as ``turkflow agents report`` computes it,
gives each agent's "turns rated relevant" (the share of its turns the next person rated relevant: its success
as people see it, turn by turn) with a bootstrap interval over conversations, and the two agents' difference
with its interval and a permutation test. Told apart: the test rejects and the interval excludes 0; right sign:
the agent told better is the better one. The same is counted for the people's evaluation at the end of each
dialog (satisfaction 1-5, and whether it completed their task), one answer a conversation.

    python -m bench agents_apart                                   # 10 seeds apart, 20 equal, 120 conversations
    python -m bench agents_apart --apart-seeds 3 --equal-seeds 3   # a quick look
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._cpu import load

OUT = Path("bench/out")
QUEUES = {"turns": 1, "reviews": 1, "platform,sweeps": 1, "agents": 16}
FIGURE = "relevant"
ALSO = ("satisfaction", "claimed_success")  # the people's evaluation at the end of each dialog, per conversation


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench agents_apart", description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=120, help="per seed, shared by the two agents")
    parser.add_argument("--apart", default="sim-60,sim-75", help="two agents whose turns are right 15 points apart")
    parser.add_argument("--equal", default="sim-70,sim-070", help="two agents equally right (two names, one quality)")
    parser.add_argument("--apart-seeds", type=int, default=10, help="seeds 1..N for the two agents apart")
    parser.add_argument("--equal-seeds", type=int, default=20, help="seeds 101..100+N for the two equal agents")
    parser.add_argument("--students", type=int, default=30, help="honest simulated students")
    parser.add_argument("--max-turns", type=int, default=12)
    args = parser.parse_args(argv)

    from turkflow.config import Settings
    from turkflow.simulator.stack import Stack

    OUT.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"agents_apart at {commit}: {args.conversations} conversations a seed, figure '{FIGURE}'; {load()}")
    runs = [("apart", args.apart, seed) for seed in range(1, args.apart_seeds + 1)]
    runs += [("equal", args.equal, seed) for seed in range(101, 101 + args.equal_seeds)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="turkflow-bench-apart-") as scratch:
        work = Path(scratch)
        settings = Settings(data_dir=work, database_url=f"sqlite:///{work / 'turkflow.db'}", secret_key="bench",
                            worker_hash_key="bench", agent_sweep_seconds=1)
        with Stack(settings, work / "logs", web_workers=3, web_threads=4, queue_workers=QUEUES) as stack:
            print("  pair  | seed | agents              | conversations | turns rated relevant              | "
                  "difference [95%]     | p      | told apart | right sign | s")
            for kind, pair, seed in runs:
                row = one_run(stack, args, kind, tuple(pair.split(",")), seed)
                rows.append(row)
                print(f"  {kind:5} | {seed:4} | {' vs '.join(row['agents']):19} | "
                      f"{' / '.join(str(n) for n in row['conversations']):13} | "
                      f"{' / '.join(row['shown']):33} | {row['difference_shown']:20} | {row['p']:.4f} | "
                      f"{'yes' if row['told_apart'] else 'no':10} | {'yes' if row['right_sign'] else '-':10} | "
                      f"{row['seconds']}", flush=True)
    apart = [r for r in rows if r["kind"] == "apart"]
    equal = [r for r in rows if r["kind"] == "equal"]
    summary = {"apart_told_apart_right_sign": sum(r["told_apart"] and r["right_sign"] for r in apart),
               "apart_seeds": len(apart), "equal_told_apart": sum(r["told_apart"] for r in equal),
               "equal_seeds": len(equal),
               "most_conversations_per_agent": max((n for r in rows for n in r["conversations"]), default=0)}
    for name in ALSO:
        print(f"  {name} (the people's evaluation, one per dialog): apart told apart on "
              f"{sum(r['also'][name]['told_apart'] for r in apart)} of {len(apart)} seeds, equal on "
              f"{sum(r['also'][name]['told_apart'] for r in equal)} of {len(equal)}")
    print(f"  apart ({args.apart}): told apart with the right sign on {summary['apart_told_apart_right_sign']} of "
          f"{len(apart)} seeds (target: at least 9 of 10)")
    print(f"  equal ({args.equal}): told apart on {summary['equal_told_apart']} of {len(equal)} seeds "
          f"(target: at most 1 of 20); at most {summary['most_conversations_per_agent']} conversations an agent")
    (OUT / "agents_apart.json").write_text(json.dumps({"commit": commit, "args": vars(args), "rows": rows,
                                                       "summary": summary}, indent=2))
    print(f"  written to {OUT / 'agents_apart.json'}")


def one_run(stack: Any, args: argparse.Namespace, kind: str, pair: tuple[str, str], seed: int) -> dict[str, Any]:
    """One simulated batch of the two agents, and what its agents' report says of them."""
    from sqlmodel import func, select

    from turkflow.agents import builtins, evaluation, report
    from turkflow.db import session_scope
    from turkflow.models import Batch
    from turkflow.simulator.run import SimulationConfig, run_on

    started = time.monotonic()
    config = SimulationConfig(students=args.students, teachers=0, conversations=args.conversations,
                              max_turns=args.max_turns, mean_turns=args.max_turns, seed=seed, policy="none", mix={},
                              concurrency=16, settle_timeout=300, agents={"teacher": pair})
    run_on(stack.settings, stack.url, config)
    with session_scope(stack.settings.database_url) as session:
        batch_id = session.exec(select(func.max(Batch.id))).one()
        records = evaluation.batch_records(session, batch_id, stack.settings.worker_hash_key)
    built = report.build(records, report.Options(seed=seed))
    teacher = next(role for role in built["roles"] if role["role"] == "teacher")
    agents = {a["agent"]: a for a in teacher["agents"]}
    names = sorted(pair)
    found = next(d for d in teacher["differences"][FIGURE])
    better = max(pair, key=builtins.quality_of)
    equal = builtins.quality_of(pair[0]) == builtins.quality_of(pair[1])
    figures = [agents[name]["measures"][FIGURE] for name in names]
    return {
        "kind": kind, "seed": seed, "batch": batch_id, "agents": names,
        "true": [builtins.quality_of(name) for name in names],
        "conversations": [agents[name]["conversations"] for name in names],
        "figures": figures, "shown": [report.interval_text(f, "share") for f in figures],
        "difference": found, "difference_shown": report.difference_text(found, "share"), "p": found["p"],
        "told_apart": found["told_apart"],
        "right_sign": (not equal) and found["told_apart"] and (found["a"] if found["difference"] > 0
                                                               else found["b"]) == better,
        "also": {name: {"told_apart": d["told_apart"], "difference": d["difference"], "p": d["p"],
                        "values": [agents[n]["measures"][name]["value"] for n in names]}
                 for name in ALSO for d in teacher["differences"][name][:1]},
        "seconds": round(time.monotonic() - started),
    }


if __name__ == "__main__":
    main()
