"""Quality-control efficacy (issue 25): every policy side by side on the same collected ratings, several seeds.

Targets, with 15% spammers, 10% careless raters, 5% harsh raters and 10% pasters per role: honest workers
blocked <= 1%; spammers blocked within 6 rated turns >= 95%; careless and harsh raters identified within 20
of their ratings >= 90%; pasters blocked or sent to review within 6 written turns >= 95%; pay to spammers
and pasters <= 3% of all pay; the batch never stalls.

For each seed, one simulation of the issue's size (150 conversations of about 24 turns, 60 workers per role)
runs through the real stack (SQLite) with the policy ``none``: the monitor judges every rating and learns
about every rater but blocks nobody, so every worker's complete stream of ratings and turns is collected.
Every policy is then replayed on that database exactly as the live monitor runs it (the trust model, the
weighted rule, the sequential test and the machine-written rule included:
``turkflow.simulator.policies.replay``), every rater starting with the record their gold answers at
onboarding gave them (``crowd.answer_gold``: the answers the live crowd sends, drawn per seed and worker;
a database kept from before the gold turns replays as a run with them would, since with the policy
``none`` nothing the monitor learns changes who writes which turn). The run's
database is kept (``bench/out/quality-seed<N>/``); ``--reuse`` replays a kept one instead of simulating
again. ``--live POLICY`` also runs the batch live with that policy, for what its blocks do to the batch.

    python -m bench quality                          # seeds 13, 14, 15
    python -m bench quality --seeds 13 --live recommended
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._cpu import load
from bench._data import SGD_DEV

OUT = Path(__file__).resolve().parent / "out"
MIX = {"spammer": 0.15, "careless": 0.10, "harsh": 0.05, "paster": 0.10}
COLUMNS = (("honest blocked", "honest_blocked_share", "≤ 1%"),
           ("spammers within 6 rated", "spammers_blocked_early_share", "≥ 95%"),
           ("careless+harsh identified within 20", "careless_detected_share", "≥ 90%"),
           ("pasters within 6 written", "pasters_caught_early_share", "≥ 95%"),
           ("pay to spammers+pasters", "share_paid_to_spammers_and_pasters", "≤ 3%"))


def config(policy: str, seed: int, conversations: int, workers: int) -> Any:
    from turkflow.simulator import DEFAULT_POLICIES
    from turkflow.simulator.run import SimulationConfig

    return SimulationConfig(dialogs=SGD_DEV, students=workers // 2, teachers=workers - workers // 2, conversations=conversations,
                            max_turns=40, mean_turns=24, seed=seed, policy=policy, mix=MIX,
                            compare=DEFAULT_POLICIES, settle_timeout=180)


def simulate(policy: str, seed: int, conversations: int, workers: int, directory: Path) -> dict[str, Any]:
    from turkflow.config import Settings
    from turkflow.simulator.run import run_with_stack

    directory.mkdir(parents=True, exist_ok=True)
    report = run_with_stack(Settings(data_dir=directory, database_url=f"sqlite:///{directory / 'turkflow.db'}"),
                            directory, config(policy, seed, conversations, workers), web_workers=1, web_threads=4)
    (directory / "report.json").write_text(json.dumps(report, indent=2, default=str))
    return report


@dataclass(frozen=True)
class Collected:
    """A kept run: the crowd, the turns and ratings in the order the monitor judged them, the reward, and
    every rater's record from their gold answers at onboarding (as the live crowd onboards)."""

    crowd: list[Any]
    stream: list[Any]
    reward_cents: int
    start: dict[str, Any]


def kept_run(directory: Path, seed: int, workers: int) -> Collected:
    """Read a kept run's database (the workers' simulated names are in the database)."""
    from sqlmodel import select

    from turkflow.config import default
    from turkflow.db import session_scope
    from turkflow.models import Batch, Worker
    from turkflow.simulator.crowd import Behaviour, answer_gold, build_crowd
    from turkflow.simulator.policies import gold_records
    from turkflow.simulator.report import turn_stream

    crowd = build_crowd(workers // 2, workers - workers // 2, {Behaviour(b): s for b, s in MIX.items()}, seed)
    with session_scope(f"sqlite:///{directory / 'turkflow.db'}") as session:
        batch_id, reward = session.exec(select(Batch.id, Batch.reward_cents).order_by(Batch.id)).first()
        names = dict(session.exec(select(Worker.id, Worker.name)).all())
        stream = turn_stream(session, batch_id, names, default("typed_keys_per_char"))
    return Collected(crowd, stream, reward, gold_records(crowd, {w.name: answer_gold(w, seed) for w in crowd}))


def replay_database(run: Collected) -> list[dict[str, Any]]:
    """Every policy replayed on a kept run."""
    from turkflow.config import default
    from turkflow.quality.monitor import Policy
    from turkflow.simulator import DEFAULT_POLICIES
    from turkflow.simulator.policies import compare

    policies = [Policy.parse(text, default("bonus_above"), default("bonus_cents")) for text in DEFAULT_POLICIES]
    return [{**e.__dict__, "misses": e.misses()}
            for e in compare(run.crowd, run.stream, policies, reward_cents=run.reward_cents, start=run.start)]


def pay_floor(run: Collected) -> dict[tuple[int, int], float]:
    """The least share of the rewards spammers and pasters earn if every spammer is blocked exactly at their
    k-th rating and every paster at their m-th machine-written turn, by (k, m): a rating arrives only after
    the next turn is written, and a worker has other turns in flight meanwhile, so no policy that waits for k
    ratings can pay them less."""
    from turkflow.simulator.crowd import Behaviour

    written: dict[str, int] = {}
    rated: dict[str, int] = {}
    pasted: dict[str, int] = {}
    at_rating: dict[tuple[str, int], int] = {}
    at_paste: dict[tuple[str, int], int] = {}
    for turn in run.stream:
        written[turn.writer] = written.get(turn.writer, 0) + 1
        if turn.machine_written:
            pasted[turn.writer] = pasted.get(turn.writer, 0) + 1
            at_paste.setdefault((turn.writer, pasted[turn.writer]), written[turn.writer])
        if turn.rating:
            author = turn.rating.author
            rated[author] = rated.get(author, 0) + 1
            at_rating.setdefault((author, rated[author]), written.get(author, 0))
    spammers = [w.name for w in run.crowd if w.behaviour == Behaviour.spammer]
    pasters = [w.name for w in run.crowd if w.behaviour == Behaviour.paster]
    return {(k, m): (sum(at_rating.get((n, k), written.get(n, 0)) for n in spammers)
                     + sum(at_paste.get((n, m), written.get(n, 0)) for n in pasters)) / len(run.stream)
            for k in (1, 2, 3, 4, 6) for m in (1, 2)}


def trusted_noes(run: Collected, ratings: int = 6, trusted: float = 0.5) -> dict[str, float]:
    """How much the first ``ratings`` ratings of a writer can tell: the share of spammers whose first ratings
    hold at least one, and at least two, no/no answers from raters trusted over ``trusted`` when they rated
    (no rule that needs two such answers can block the others within ``ratings``), and the share of honest
    workers whose ratings ever hold one, or two in a row (what blocking on one, or on two, would cost)."""
    from turkflow.quality import reliability
    from turkflow.quality.monitor import Policy
    from turkflow.simulator.crowd import Behaviour
    from turkflow.simulator.policies import replay

    received = replay(Policy.parse("none"), run.stream, start=run.start).received
    no_no = reliability.answer_of(False, False)

    def noes(answers: list[tuple[int, float]]) -> int:
        return sum(1 for answer, trust in answers if answer == no_no and trust > trusted)

    def in_a_row(answers: list[tuple[int, float]]) -> bool:
        return any(noes(answers[i:i + 2]) == 2 for i in range(len(answers) - 1))

    spammers = [received.get(w.name, [])[:ratings] for w in run.crowd if w.behaviour == Behaviour.spammer]
    honest = [received.get(w.name, []) for w in run.crowd if w.behaviour == Behaviour.honest]
    return {"spammers with 1+": sum(noes(a) >= 1 for a in spammers) / len(spammers),
            "spammers with 2+": sum(noes(a) >= 2 for a in spammers) / len(spammers),
            "honest ever 1": sum(noes(a) >= 1 for a in honest) / len(honest),
            "honest ever 2 in a row": sum(in_a_row(a) for a in honest) / len(honest)}


def pct(x: Any) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def spread(values: list[float]) -> str:
    """mean (min–max) over the seeds."""
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    return f"{pct(statistics.mean(values))} ({pct(min(values))}–{pct(max(values))})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[13, 14, 15])
    parser.add_argument("--conversations", type=int, default=150)
    parser.add_argument("--workers", type=int, default=120, help="simulated workers, half of each role")
    parser.add_argument("--reuse", action="store_true", help="replay kept databases instead of simulating")
    parser.add_argument("--live", default=None, help="also run live with this policy (e.g. recommended)")
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    print(f"quality: {args.conversations} conversations (mean 24 turns), {args.workers} workers, per role "
          f"{', '.join(f'{100 * s:g}% {b}' for b, s in MIX.items())}; seeds {args.seeds}; {load()}", flush=True)
    by_policy: dict[str, list[dict[str, Any]]] = {}
    for seed in args.seeds:
        directory = OUT / f"quality-seed{seed}"
        if not (args.reuse and (directory / "turkflow.db").exists()):
            collected = simulate("none", seed, args.conversations, args.workers, directory)
            done = collected["reproducible"]
            print(f"  seed {seed}: {done['turns']['stored']} turns, {done['ratings']} ratings, "
                  f"{done['stop_reason']}", flush=True)
        run = kept_run(directory, seed, args.workers)
        floor = pay_floor(run)
        print(f"    seed {seed} least pay to spammers and pasters, blocked at their k-th rating and m-th pasted turn: "
              + ", ".join(f"k={k},m={m} {pct(share)}" for (k, m), share in floor.items()), flush=True)
        print(f"    seed {seed} trusted no/no answers (rater trusted over 0.5 when rating), first 6 ratings of a "
              "spammer, all ratings of an honest worker: " + ", ".join(
                  f"{name} {pct(share)}" for name, share in trusted_noes(run).items()), flush=True)
        for efficacy in replay_database(run):
            by_policy.setdefault(efficacy["policy"], []).append(efficacy)
            print(f"    seed {seed} {efficacy['policy']:60} " + " | ".join(
                f"{pct(efficacy[key])}" for _, key, _ in COLUMNS) + f" | misses {efficacy['misses']}", flush=True)
    print(f"\n| policy | {' | '.join(f'{name} ({target})' for name, _, target in COLUMNS)} | targets met |")
    print("|---|" + "---:|" * len(COLUMNS) + "---|")
    for policy, rows in by_policy.items():
        met = sum(1 for r in rows if not r["misses"])
        print(f"| `{policy}` | " + " | ".join(spread([r[key] for r in rows]) for _, key, _ in COLUMNS)
              + f" | {met}/{len(rows)} seeds |")
    if args.live:
        for seed in args.seeds:
            live = simulate(args.live, seed, args.conversations, args.workers, OUT / f"quality-live-seed{seed}")
            done = live["reproducible"]
            monitor = done["monitor"]
            print(f"live {args.live} seed {seed}: {done['turns']['stored']} of {done['turns']['planned']} turns, "
                  f"{done['conversations']['completed']}/{done['conversations']['launched']} conversations completed "
                  f"({done['stop_reason']}), stalled: {done['stalled'] or 'never'}; " + ", ".join(
                      f"{name} {pct(monitor[key] if key in monitor else done['money'].get(key))}"
                      for name, key, _ in COLUMNS) + f"; misses {monitor['misses']}; {load()}", flush=True)


if __name__ == "__main__":
    main()
