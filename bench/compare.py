"""Side by side (issue 38): how many votes rank systems of known strength, adaptive pairs against uniform ones,
and how well the known-answer pairs catch careless and one-sided judges.

Targets, with 4 systems (each beats the next weaker one 60% of the time) and 20% of the judges careless or
one-sided: Kendall's tau >= 0.9 against the true order from at most 400 votes on at least 9 of 10 seeds; the
adaptive draw needs fewer votes than uniform pairs for the same tau; careless and one-sided judges blocked
within their first 10 votes >= 90%; honest judges blocked <= 1%.

Each seed runs ``turkflow simulate --protocol compare`` in this process once per pair strategy, on its own
SQLite database (``bench/out/compare-<strategy>-seed<N>/``), the same seed giving both strategies the same
crowd and truth. Tau is read every 25 counted votes from the ranking the counted votes give (votes of judges
blocked by then left out), so one run per seed gives the whole curve.

    python -m bench compare                        # seeds 1-10, 400 votes, adaptive and uniform
    python -m bench compare --seeds 1 2 --votes 200
    python -m bench compare --reuse                # the summary again from the last run's reports
    python -m bench compare --votes-only --seeds $(seq 1 100)   # the pair draw alone, many seeds, no database

``--votes-only`` measures the pair strategies alone, on many more seeds than the simulation can afford: the same
simulated judges (``turkflow.simulator.compare.choose``) vote on the pairs of systems ``pairs.pair_weights``
draws, each vote from a judge drawn at random, with no dialogs, no known-answer pairs and no monitor (the careless
and one-sided judges' votes all count, a harder case than the simulation's).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench._cpu import load

OUT = Path(__file__).resolve().parent / "out"
TARGET_TAU, TARGET_SEEDS = 0.9, 0.9  # tau >= 0.9 on at least 9 of 10 seeds


def simulate(strategy: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    from turkflow.config import Settings
    from turkflow.simulator.compare import CompareConfig, run

    directory = OUT / f"compare-{strategy}-seed{seed}"
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("turkflow.db*"):
        old.unlink()
    settings = Settings(data_dir=directory, database_url=f"sqlite:///{directory / 'turkflow.db'}")
    report = run(settings, CompareConfig(systems=args.systems, votes=args.votes, judges=args.judges,
                                         careless=args.careless, strategy=strategy, seed=seed))
    (directory / "report.json").write_text(json.dumps(report, indent=2))
    return report


def load_report(strategy: str, seed: int) -> dict[str, Any]:
    return json.loads((OUT / f"compare-{strategy}-seed{seed}" / "report.json").read_text())


def stays_right(report: dict[str, Any], checkpoints: list[int]) -> int | None:
    """The fewest counted votes from which this seed's ranking has tau >= the target at every later checkpoint."""
    found = report["reproducible"]["tau_by_votes"]
    return next((n for n in checkpoints if all(found.get(str(m), -1) >= TARGET_TAU for m in checkpoints if m >= n)),
                None)


def votes_only(strategy: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """A report with the simulation's ``tau_by_votes`` from votes alone (see ``--votes-only``)."""
    from turkflow.protocols.compare import pairs, ranking
    from turkflow.simulator.compare import CARELESS, HONEST, ONE_SIDED, CompareConfig, Judge, Run, choose

    config = CompareConfig(systems=args.systems, votes=args.votes, judges=args.judges, careless=args.careless,
                           strategy=strategy, seed=seed)
    rng = random.Random(seed)
    systems = [f"system {n + 1}" for n in range(config.systems)]
    gap = math.log(config.win_rate / (1 - config.win_rate))
    truth = {s: n * gap for n, s in enumerate(rng.sample(systems, len(systems)))}
    bad = round(config.careless * config.judges)
    crowd = [Judge(n, HONEST if n >= bad else CARELESS if n % 2 == 0 else ONE_SIDED, rng.uniform(*config.accuracy),
                   rng.gauss(0, config.bias), rng.choice(["left", "right"])) for n in range(config.judges)]
    crowd = [j if j.behaviour == HONEST else Judge(j.worker_id, j.behaviour, 0.0, 0.0, j.side) for j in crowd]
    state = Run(truth, crowd)
    options = [(a, b) for n, a in enumerate(systems) for b in systems[n + 1:]]
    given: list[ranking.Vote] = []
    found: dict[str, float] = {}
    while len(given) < config.votes:
        weights = pairs.pair_weights(systems, options, given, strategy)
        a, b = rng.choices(options, weights=[weights[p] for p in options])[0]
        left, right = (a, b) if rng.random() < 0.5 else (b, a)
        judge = rng.choice(crowd)
        choice = choose(judge, {"left": {"system": left}, "right": {"system": right}}, state, config, rng)
        given.append(ranking.Vote(left, right, choice, judge.worker_id))
        if len(given) % config.checkpoint == 0:
            fitted = ranking.fit(ranking.count(systems, given))
            found[str(len(given))] = ranking.kendall_tau(fitted.strength, [truth[s] for s in systems])
    return {"reproducible": {"tau_by_votes": found, "kendall_tau": found[str(len(given))], "votes": len(given)}}


def seeds_at(reports: list[dict[str, Any]], votes: int) -> int:
    """Seeds whose ranking from the first ``votes`` counted votes has tau >= the target."""
    return sum(1 for r in reports if r["reproducible"]["tau_by_votes"].get(str(votes), -1) >= TARGET_TAU)


def votes_needed(reports: list[dict[str, Any]], checkpoints: list[int]) -> int | None:
    """The fewest counted votes from which the target share of seeds rank with tau >= 0.9 at every later
    checkpoint too."""
    enough = [n for n in checkpoints if seeds_at(reports, n) >= TARGET_SEEDS * len(reports)]
    for n in enough:
        if all(m in enough for m in checkpoints if m >= n):
            return n
    return None


def pooled(reports: list[dict[str, Any]], behaviours: tuple[str, ...], caught: Any) -> tuple[int, int]:
    judges = [j for r in reports for j in r["reproducible"]["judges"] if j["behaviour"] in behaviours]
    return sum(1 for j in judges if caught(j)), len(judges)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 11)))
    parser.add_argument("--votes", type=int, default=400)
    parser.add_argument("--systems", type=int, default=4)
    parser.add_argument("--judges", type=int, default=20)
    parser.add_argument("--careless", type=float, default=0.2)
    parser.add_argument("--strategies", nargs="+", default=["adaptive", "uniform"])
    parser.add_argument("--reuse", action="store_true", help="summarise the reports of the last run, simulate nothing")
    parser.add_argument("--votes-only", action="store_true", help="the pair strategies alone, no database (see above)")
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    print(f"compare: {args.systems} systems (each beats the next 60% of the time), {args.judges} judges of which "
          f"{args.careless:.0%} careless or one-sided, {args.votes} votes; seeds {args.seeds}; {load()}", flush=True)
    by_strategy: dict[str, list[dict[str, Any]]] = {}
    for seed in args.seeds:
        for strategy in args.strategies:
            started = time.monotonic()
            if args.votes_only:
                by_strategy.setdefault(strategy, []).append(votes_only(strategy, seed, args))
                continue
            report = load_report(strategy, seed) if args.reuse else simulate(strategy, seed, args)
            done = report["reproducible"]
            by_strategy.setdefault(strategy, []).append(report)
            print(f"  seed {seed} {strategy}: tau {done['kendall_tau']:.2f} from {done['votes']} votes "
                  f"({done['votes_left_out']} left out, {done['known_answer_pairs']} known-answer pairs); "
                  f"careless caught {done['careless_caught_share']}, honest blocked {done['honest_blocked_share']}; "
                  f"{time.monotonic() - started:.0f} s", flush=True)
    checkpoints = list(range(25, args.votes + 1, 25))
    summary: dict[str, Any] = {}
    print(f"\nseeds (of {len(args.seeds)}) whose ranking has tau >= {TARGET_TAU} after n counted votes:")
    print("  n      " + "".join(f"{n:>5}" for n in checkpoints))
    for strategy, reports in by_strategy.items():
        print(f"  {strategy:<8}" + "".join(f"{seeds_at(reports, n):>5}" for n in checkpoints))
    if args.votes_only:
        summary = {}
        print(f"\nthe counted votes from which a seed's ranking stays at tau >= {TARGET_TAU} ({args.votes + 1}: not "
              f"within {args.votes}), over {len(args.seeds)} seeds:")
        for strategy, reports in by_strategy.items():
            stays = [stays_right(r, checkpoints) or args.votes + 1 for r in reports]
            summary[strategy] = {"median": statistics.median(stays), "p90": float(np.percentile(stays, 90)),
                                 "right_at_end": sum(1 for r in reports if r["reproducible"]["kendall_tau"] >= TARGET_TAU),
                                 "share_votes_needed": votes_needed(reports, checkpoints)}
            print(f"  {strategy}: median {summary[strategy]['median']}, 90th percentile {summary[strategy]['p90']}; "
                  f"right at {args.votes} votes on {summary[strategy]['right_at_end']} of {len(reports)} seeds; "
                  f"9 in 10 seeds right from {summary[strategy]['share_votes_needed']} votes on", flush=True)
        (OUT / "compare-votes-only.json").write_text(json.dumps({"args": vars(args), "summary": summary}, indent=2))
        return
    print(f"\neach seed's ranking stays at tau >= {TARGET_TAU} from n counted votes on (- never within {args.votes}):")
    print("  seed    " + "".join(f"{seed:>5}" for seed in args.seeds))
    for strategy, reports in by_strategy.items():
        print(f"  {strategy:<8}" + "".join(f"{stays_right(r, checkpoints) or '-':>5}" for r in reports))
    print()
    for strategy, reports in by_strategy.items():
        final = [r["reproducible"]["kendall_tau"] for r in reports]
        bad = pooled(reports, ("careless", "one_sided"),
                     lambda j: j["blocked_after_votes"] is not None and j["blocked_after_votes"] <= 10)
        careless = pooled(reports, ("careless",),
                          lambda j: j["blocked_after_votes"] is not None and j["blocked_after_votes"] <= 10)
        honest = pooled(reports, ("honest",), lambda j: j["blocked_after_votes"] is not None)
        known = sum(r["reproducible"]["known_answer_pairs"] for r in reports)
        counted = sum(r["reproducible"]["votes"] for r in reports)
        summary[strategy] = {
            "seeds_tau_at_least_0.9": sum(1 for t in final if t >= TARGET_TAU), "seeds": len(reports),
            "mean_tau": round(statistics.mean(final), 3), "votes_needed": votes_needed(reports, checkpoints),
            "careless_and_one_sided_caught_within_10": f"{bad[0]}/{bad[1]}",
            "careless_caught_within_10": f"{careless[0]}/{careless[1]}",
            "honest_blocked": f"{honest[0]}/{honest[1]}",
            "known_answer_pairs_per_vote": round(known / counted, 3),
            "seeds_at": {n: seeds_at(reports, n) for n in checkpoints},
            "stays_right_from": [stays_right(r, checkpoints) for r in reports]}
        print(f"{strategy}: tau >= {TARGET_TAU} on {summary[strategy]['seeds_tau_at_least_0.9']} of {len(reports)} "
              f"seeds at {args.votes} votes (mean tau {summary[strategy]['mean_tau']}); 9 of 10 seeds from "
              f"{summary[strategy]['votes_needed']} votes on; careless and one-sided judges caught within 10 votes "
              f"{bad[0]}/{bad[1]} ({bad[0] / max(bad[1], 1):.0%}; careless alone {careless[0]}/{careless[1]}); "
              f"honest blocked {honest[0]}/{honest[1]} ({honest[0] / max(honest[1], 1):.1%}); "
              f"{known / counted:.2f} known-answer pairs per counted vote", flush=True)
    (OUT / "compare.json").write_text(json.dumps({"args": vars(args), "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
