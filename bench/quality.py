"""Quality-control efficacy: does the default policy (k=5, p=0.5) catch spammers without blocking the
honest crowd? Target: with 15% spammers and 10% careless raters, at least 90% of spammers blocked within
their first 6 rated turns and at most 3% of honest workers blocked.

Three simulations of the same seeded crowd through the real stack (SQLite), each worker writing about 45
turns as in the Wizard of Tasks collection (18,000 turns over 400 workers):

1. the batch runs with the policy ``none``: the monitor judges every rating but blocks nobody, so every
   worker's complete stream of ratings is collected, and every policy (the default, alternatives, staged
   "probation" and pooled policies) is replayed on it exactly;
2. the batch runs live with the default policy: what its blocks actually do to the crowd and the batch;
3. the same with the recommended policy (``turkflow.simulator.policies.RECOMMENDED``).

    python -m bench.quality
    python -m bench.quality --workers 400 --conversations 549     # the full Wizard of Tasks size
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench._cpu import load
from turkflow.simulator.policies import RECOMMENDED

OUT = Path(__file__).resolve().parent / "out"


def simulate(policy: str, conversations: int, workers: int, seed: int) -> dict[str, Any]:
    from turkflow.config import Settings
    from turkflow.simulator.run import SimulationConfig, run_with_stack

    config = SimulationConfig(students=workers // 2, teachers=workers - workers // 2, conversations=conversations,
                              max_turns=66, mean_turns=33, seed=seed, policy=policy, settle_timeout=120)
    with tempfile.TemporaryDirectory(prefix="turkflow-bench-quality-") as scratch:
        work = Path(scratch)
        return run_with_stack(Settings(data_dir=work, database_url=f"sqlite:///{work / 'turkflow.db'}"), work,
                              config)


def row(e: dict[str, Any]) -> str:
    def pct(x: Any) -> str:
        return "  n/a" if x is None else f"{100 * x:4.1f}%"

    return (f"    {e['policy']:34} | {e['blocked']:4} | {pct(e['precision'])} | {pct(e['recall'])} | "
            f"{e['honest_blocked']:3} ({pct(e['honest_blocked_share'])}) | "
            f"{e['spammers_blocked_early']:3}/{e['spammers']} ({pct(e['spammers_blocked_early_share'])}) | "
            f"{e['median_rated_turns_before_block'] if e['median_rated_turns_before_block'] is not None else '':>6} | "
            f"${e['bonus_cents'] / 100:8.2f} | {'met' if e['meets_target'] else 'missed'}")


HEADER = ("    policy                             | blocked | precision | recall | honest blocked | "
          "spammers within 6 | median rated turns | bonuses | target")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=275)
    parser.add_argument("--workers", type=int, default=200, help="simulated workers, half of each role")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    print(f"quality: {args.conversations} conversations (mean 33 turns), {args.workers} workers, 15% spammers and "
          f"10% careless raters per role, seed {args.seed}; {load()}")

    observed = simulate("none", args.conversations, args.workers, args.seed)
    (OUT / "quality-none.json").write_text(json.dumps(observed, indent=2, default=str))
    done = observed["reproducible"]
    print(f"  1. policy none: {done['turns']['stored']} turns, {done['ratings']} ratings; every policy replayed "
          "on every worker's complete ratings:")
    print(HEADER)
    for efficacy in done["policies"]:
        print(row(efficacy))

    for step, (what, policy) in enumerate((("the default policy", "k=5,p=0.5"),
                                           ("the recommended policy", RECOMMENDED)), start=2):
        live = simulate(policy, args.conversations, args.workers, args.seed)
        (OUT / f"quality-live-{step}.json").write_text(json.dumps(live, indent=2, default=str))
        done = live["reproducible"]
        monitor = done["monitor"]
        print(f"  {step}. live with {what}: {done['turns']['stored']} of {done['turns']['planned']} turns, "
              f"{done['conversations']['completed']}/{done['conversations']['launched']} conversations completed "
              f"({done['stop_reason']}); replay agrees with the live monitor: "
              f"{monitor['replay_agrees_with_live_monitor']}")
        print(HEADER)
        print(row(monitor))
        money = done["money"]
        print(f"    share of pay to bad workers {100 * money['share_paid_to_bad_workers']:.1f}% "
              f"(to spammers and lazy writers {100 * money['share_paid_to_bad_writers']:.1f}%); median turns a bad "
              f"writer wrote before the block: {monitor['median_turns_written_before_block']}; {load()}", flush=True)

if __name__ == "__main__":
    main()
