"""STAR reply suggestions against what the wizards actually picked, on the 330 sample dialogues.

For every Wizard ``pick_suggestion`` in ``../shared/data/star/dialogues``, the state before it is rebuilt
from the log (``turkflow.protocols.star.log.states_before_picks``), the task's templates are ranked, and the picked
action counts as found at rank k when a template in the first k has its label, or its text equals the
picked text (the logs come from an older schema version where e.g. ``weather_bye`` was ``goodbye_1``).
Ranked twice: with what the wizard had typed before asking for suggestions (STAR's own input) and without
it (graph position, user utterance and item only). Latency is per ranking, measured in this process.
For reference, ``star_first_option_picked`` is how often the first of the (one or two) options STAR's own
trained model showed was the one picked; wizards could only pick among those shown, so it flatters STAR.

    python -m bench star_suggestions
    python -m bench star_suggestions --data ../shared/data/star
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from turkflow.protocols.star.log import load_dialogues, states_before_picks
from turkflow.protocols.star.schemas import load_schemas
from turkflow.protocols.star.suggestions import Ranker

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "star"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(data: Path) -> dict[str, Any]:
    schemas = load_schemas(data / "tasks")
    rankers = {name: Ranker.for_schema(schema) for name, schema in schemas.items()}
    dialogues = load_dialogues(data / "dialogues")
    counts: Counter = Counter()
    timings: list[float] = []
    for dialogue in dialogues:
        task = dialogue["Scenario"]["WizardCapabilities"][0]["Task"]
        ranker = rankers[task]
        texts = {t.label: t.text for t in schemas[task].replies()}
        for state, pick in states_before_picks(dialogue):
            counts["picks"] += 1
            picked, picked_text = pick.get("ActionLabel"), (pick.get("Text") or "").strip()
            known = picked in texts or picked_text in texts.values()
            if not known:
                counts["not_in_schema"] += 1
                continue
            for variant, ranked_state in (("draft", state), ("no_draft", replace(state, draft=""))):
                started = time.perf_counter()
                ranked = ranker.rank(ranked_state)
                timings.append(time.perf_counter() - started)
                hits = [i for i, s in enumerate(ranked) if s.label == picked or texts[s.label] == picked_text]
                rank = hits[0] + 1 if hits else None
                counts[f"{variant}_top1"] += rank == 1
                counts[f"{variant}_top3"] += rank is not None and rank <= 3
            counts["rankable"] += 1
            counts["star_first_option_picked"] += (pick.get("ActionLabelOptions") or [None])[0] == picked
    rankable = counts["rankable"]
    return {
        "dialogues": len(dialogues), "picks": counts["picks"], "rankable": rankable,
        "not_in_schema": counts["not_in_schema"],
        **{f"{v}_top{k}": counts[f"{v}_top{k}"] / rankable for v in ("draft", "no_draft") for k in (1, 3)},
        "star_first_option_picked": counts["star_first_option_picked"] / rankable,
        "rankings": len(timings), "latency_p50_ms": percentile(timings, 0.5) * 1000,
        "latency_p99_ms": percentile(timings, 0.99) * 1000, "latency_max_ms": max(timings) * 1000,
        "latency_mean_ms": statistics.fmean(timings) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="STAR data folder (tasks/, dialogues/)")
    args = parser.parse_args()
    result = measure(args.data)
    print(json.dumps(result, indent=2))
    print(f"top-1 {result['draft_top1']:.1%} / top-3 {result['draft_top3']:.1%} with the wizard's draft, "
          f"top-1 {result['no_draft_top1']:.1%} / top-3 {result['no_draft_top3']:.1%} without, over "
          f"{result['rankable']} picks; p50 {result['latency_p50_ms']:.3f} ms, "
          f"p99 {result['latency_p99_ms']:.3f} ms per ranking")


if __name__ == "__main__":
    main()
