"""The not_typed flag against the simulator's truth: how many pasted turns it catches (recall) and how many of
the turns it flags were pasted (precision).

A seeded crowd works a batch through the real stack (SQLite): 20% of each role are pasters (good text from a
language model, arriving without keystrokes), 10% spammers, the rest type; 10% of the typists use a phone
keyboard whose word completion needs fewer keys than characters. Every turn posts the report the turn page
would send (``turkflow.simulator.crowd.writing_report``); the Celery pipeline flags turns with the default
thresholds, and the flags are read back from the database. The numbers measure the rule against the
simulator's model of typing, not against real workers: the typing speeds and the phone share are
assumptions (see ``crowd.py``).

    python -m bench.typing_flag
    python -m bench.typing_flag --conversations 120 --workers 60 --pasters 0.3
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from bench._cpu import load

OUT = Path(__file__).resolve().parent / "out"


def measure(conversations: int, workers: int, pasters: float, seed: int) -> dict[str, Any]:
    """Simulate, then count every submitted turn by (writer's behaviour, judged?, flagged?)."""
    from sqlmodel import select

    from turkflow.config import Settings
    from turkflow.db import session_scope
    from turkflow.models import Turn, TurnStatus, Worker
    from turkflow.quality.checks import NOT_TYPED, CheckPolicy
    from turkflow.simulator.crowd import Behaviour
    from turkflow.simulator.run import SimulationConfig, plan, run_with_stack

    config = SimulationConfig(students=workers // 2, teachers=workers - workers // 2, conversations=conversations,
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
    pasted = lambda key: key[0] == Behaviour.paster  # noqa: E731
    flagged_pasted = sum(n for key, n in counts.items() if pasted(key) and key[2])
    flagged_typed = sum(n for key, n in counts.items() if not pasted(key) and key[2])
    all_pasted = sum(n for key, n in counts.items() if pasted(key))
    judged_pasted = sum(n for key, n in counts.items() if pasted(key) and key[1])
    return {
        "turns": len(rows),
        "pasted_turns": all_pasted,
        "judged_pasted_turns": judged_pasted,
        "flagged": flagged_pasted + flagged_typed,
        "precision": flagged_pasted / max(flagged_pasted + flagged_typed, 1),
        "recall": flagged_pasted / max(all_pasted, 1),
        "recall_of_judged": flagged_pasted / max(judged_pasted, 1),
        "typed_turns_flagged_share": flagged_typed / max(len(rows) - all_pasted, 1),
        "by_behaviour": {f"{b} judged={j} flagged={f}": n for (b, j, f), n in sorted(counts.items())},
        "wall_seconds": report["measured"]["wall_seconds"],
        "stop_reason": report["reproducible"]["stop_reason"],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.typing_flag", description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=150)
    parser.add_argument("--workers", type=int, default=100, help="simulated workers, half of each role")
    parser.add_argument("--pasters", type=float, default=0.2, help="share of each role that pastes")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    print(f"typing_flag: {args.conversations} conversations (mean 12 turns), {args.workers} workers, "
          f"{100 * args.pasters:.0f}% pasters and 10% spammers per role, seed {args.seed}; {load()}", flush=True)
    result = measure(args.conversations, args.workers, args.pasters, args.seed)
    (OUT / "typing_flag.json").write_text(json.dumps(result, indent=2))
    print(f"  {result['turns']} turns, {result['pasted_turns']} pasted ({result['judged_pasted_turns']} long "
          f"enough to judge), {result['flagged']} flagged not_typed")
    print(f"  precision {100 * result['precision']:.1f}%, recall {100 * result['recall']:.1f}% "
          f"({100 * result['recall_of_judged']:.1f}% of the judged pasted turns); typed turns flagged "
          f"{100 * result['typed_turns_flagged_share']:.1f}%")
    for key, n in result["by_behaviour"].items():
        print(f"    {key}: {n}")
    print(f"  {load()}")


if __name__ == "__main__":
    main()
