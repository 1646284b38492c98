"""The not_typed flag against the simulator's truth: how many pasted turns it catches (recall) and how many of
the turns it flags were pasted (precision).

A seeded crowd works a batch through the real stack (SQLite): 20% of each role are pasters (good text from a
language model, arriving without keystrokes), 10% spammers, the rest type; 10% of the typists use a phone
keyboard whose word completion needs fewer keys than characters. Every turn posts the report the turn page
would send (``turkflow.simulator.crowd.writing_report``); the Celery pipeline flags turns with the default
thresholds, and the flags are read back from the database. The stored reports are then judged again with
other thresholds (the rule is a pure function of the text and the report), and the replay with the
defaults must agree with the live flags. The numbers measure the rule against the simulator's model of
typing, not against real workers: the typing speeds and the phone share are assumptions (see
``crowd.py``).

    python -m bench.typing_flag
    python -m bench.typing_flag --conversations 120 --workers 60 --pasters 0.3
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench._cpu import load
from bench._data import SGD_DEV

OUT = Path(__file__).resolve().parent / "out"


VARIANTS = (("keys_per_char", 0.3), ("keys_per_char", 0.7), ("typed_min_chars", 10),
            ("max_chars_per_second", 8.0))


def precision_recall(turns: list[tuple[bool, bool]]) -> dict[str, Any]:
    """``turns`` as (pasted?, flagged?) pairs."""
    hits = sum(1 for pasted, flagged in turns if pasted and flagged)
    flagged = sum(1 for _, f in turns if f)
    pasted = sum(1 for p, _ in turns if p)
    typed = len(turns) - pasted
    return {"flagged": flagged, "precision": hits / flagged if flagged else None,
            "recall": hits / pasted if pasted else None,
            "typed_turns_flagged_share": (flagged - hits) / typed if typed else None}


def measure(conversations: int, workers: int, pasters: float, seed: int) -> dict[str, Any]:
    """Simulate, then count every submitted turn by (writer's behaviour, judged?, flagged?) and replay the
    stored reports under other thresholds."""
    from sqlmodel import select

    from turkflow.config import Settings
    from turkflow.db import session_scope
    from turkflow.models import Turn, TurnStatus, Worker
    from turkflow.quality.checks import NOT_TYPED, CheckPolicy, typing_flags
    from turkflow.simulator.crowd import Behaviour
    from turkflow.simulator.run import SimulationConfig, plan, run_with_stack

    config = SimulationConfig(dialogs=SGD_DEV, students=workers // 2, teachers=workers - workers // 2,
                              conversations=conversations,
                              max_turns=20, mean_turns=12, seed=seed, policy="none",
                              mix={"paster": pasters, "spammer": 0.10}, settle_timeout=120)
    behaviour = {w.name: w.behaviour for w in plan(config).crowd}
    with tempfile.TemporaryDirectory(prefix="turkflow-bench-typing-") as scratch:
        work = Path(scratch)
        settings = Settings(data_dir=work, database_url=f"sqlite:///{work / 'turkflow.db'}")
        report = run_with_stack(settings, work, config)
        policy = CheckPolicy.of(settings)
        with session_scope(settings.database_url) as session:
            rows = session.exec(select(Turn.text, Turn.flags, Turn.signals, Worker.name)
                                .join(Worker, Worker.id == Turn.worker_id)
                                .where(Turn.status == TurnStatus.submitted)).all()
    counts: Counter[tuple[str, bool, bool]] = Counter()
    for text, flags, signals, name in rows:
        judged = "unknown" not in signals and len(text or "") >= policy.typed_min_chars
        counts[(behaviour[name].value, judged, NOT_TYPED in flags)] += 1
    live = [(behaviour[name] == Behaviour.paster, NOT_TYPED in flags) for _, flags, _, name in rows]

    def replay(variant: CheckPolicy) -> list[tuple[bool, bool]]:
        return [(behaviour[name] == Behaviour.paster, bool(typing_flags(variant, text or "", signals)))
                for text, _, signals, name in rows]

    judged_pasted = sum(n for (b, judged, _), n in counts.items() if b == Behaviour.paster and judged)
    return {
        "turns": len(rows),
        "pasted_turns": sum(1 for pasted, _ in live if pasted),
        "judged_pasted_turns": judged_pasted,
        "live": precision_recall(live),
        "replay_agrees_with_live": replay(policy) == live,
        "variants": {f"{field}={value}": precision_recall(replay(replace(policy, **{field: value})))
                     for field, value in VARIANTS},
        "by_behaviour": {f"{b} judged={j} flagged={f}": n for (b, j, f), n in sorted(counts.items())},
        "wall_seconds": report["measured"]["wall_seconds"],
        "stop_reason": report["reproducible"]["stop_reason"],
    }


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _line(name: str, r: dict[str, Any]) -> str:
    return (f"    {name:28} | {r['flagged']:7} | {_pct(r['precision']):>9} | {_pct(r['recall']):>6} | "
            f"{_pct(r['typed_turns_flagged_share']):>12}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.typing_flag", description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=150)
    parser.add_argument("--workers", type=int, default=100, help="simulated workers, half of each role")
    parser.add_argument("--pasters", type=float, default=0.2, help="share of each role that pastes")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    print(f"typing_flag: {args.conversations} conversations (mean 12 turns), {args.workers} workers, "
          f"{100 * args.pasters:.0f}% pasters and 10% spammers per role, seed {args.seed}; {load()}",
          flush=True)
    result = measure(args.conversations, args.workers, args.pasters, args.seed)
    (OUT / "typing_flag.json").write_text(json.dumps(result, indent=2))
    print(f"  {result['turns']} turns, {result['pasted_turns']} pasted ({result['judged_pasted_turns']} long "
          f"enough to judge); replay with the defaults agrees with the live flags: "
          f"{result['replay_agrees_with_live']}")
    print("    thresholds                   | flagged | precision | recall | typed flagged")
    print(_line("defaults (live)", result["live"]))
    for name, r in result["variants"].items():
        print(_line(name, r))
    for key, n in result["by_behaviour"].items():
        print(f"    {key}: {n}")
    print(f"  {load()}")


if __name__ == "__main__":
    main()
