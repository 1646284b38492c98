"""STAR reply suggestions against what the wizards actually picked, cross-validated on STAR's training split.

The dialogues (``DIR/train.tar.gz``, read in place; else ``DIR/dialogues/``) are split by dialogue id into
``--folds`` folds (ids shuffled by ``--seed``). For each fold the next-action model is trained on the other
folds (``turkflow.protocols.star.model.fit``, the code ``turkflow star train`` runs) and every Wizard
``pick_suggestion`` of the held-out fold is ranked with the task the wizard had selected at that moment
(``log.picks`` follows ``select_task``), from the state the page had before it: with the wizard's draft
(what it typed before asking for suggestions, STAR's own input) and without (the page before typing). A
pick counts as found at rank k when one of the first k suggestions is its reply: its label, or the reply
its text follows (the logs come from older schemas). Picks that cannot be ranked: custom replies and texts no
template of the selected task says, and picks of tasks missing from ``DIR/tasks``.

STAR's weighted F1 (its Table 2) is the support-weighted F1 of the first suggestion against the picked
reply. ``schema_only`` ranks with the schema prior alone, as a requester's task STAR never had is ranked
(its weights are still learned on the same tasks, so it flatters a truly new task). ``star_first_option``
is how often STAR's own first option was the one picked; wizards could only pick among the options it
showed, which flatters it. Latency is per full ranking of a task's replies, in this process.

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

import numpy as np

from turkflow.protocols.star.log import read_corpus
from turkflow.protocols.star.model import gather, fit
from turkflow.protocols.star.schemas import load_schemas
from turkflow.protocols.star.suggestions import Ranker

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "star"
# STAR's paper, Table 2: next-action prediction, weighted F1 (BERT; BERT + schema)
STAR_TABLE_2 = {"happy": (73.30, 71.09), "unhappy": (73.93, 72.28), "multi_task": (73.61, 73.13)}
VARIANTS = ("draft", "no_draft", "schema_only_draft", "schema_only_no_draft")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def weighted_f1(pairs: list[tuple[str, str]]) -> float:
    """Support-weighted F1 over the gold labels (scikit-learn's ``average='weighted'``)."""
    gold, guessed = Counter(g for g, _ in pairs), Counter(p for _, p in pairs)
    right = Counter(g for g, p in pairs if g == p)
    total = 0.0
    for label, support in gold.items():
        precision = right[label] / guessed[label] if guessed[label] else 0.0
        recall = right[label] / support
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        total += support * f1
    return total / len(pairs) if pairs else 0.0


def folds_of(ids: list[Any], folds: int, seed: int) -> dict[Any, int]:
    order = sorted(ids, key=str)
    np.random.default_rng(seed).shuffle(order)
    return {dialogue: n % folds for n, dialogue in enumerate(order)}


def evaluate(picks, schemas, model, timings: list[float]) -> dict[str, Any]:
    rankers = {name: Ranker.for_schema(schema, model) for name, schema in schemas.items()}
    prior_only = {name: Ranker.for_schema(schema, model, learned=False) for name, schema in schemas.items()}
    counts: Counter = Counter()
    pairs: dict[str, list[tuple[str, str]]] = {v: [] for v in VARIANTS}
    for pick in picks:
        counts["picks"] += 1
        if pick.label is None:
            counts["cannot_rank_custom_or_unknown_text"] += 1
            continue
        counts["ranked"] += 1
        counts["star_first_option"] += (pick.event.get("ActionLabelOptions") or [None])[0] == pick.event.get(
            "ActionLabel")
        for variant in VARIANTS:
            drafted = variant in ("draft", "schema_only_draft")
            state = pick.state if drafted else replace(pick.state, draft="")
            ranker = (prior_only if variant.startswith("schema_only") else rankers)[pick.task]
            started = time.perf_counter()
            ranked = ranker.rank(state)
            if variant in ("draft", "no_draft"):
                timings.append(time.perf_counter() - started)
            names = [s.label for s in ranked]
            rank = names.index(pick.label) + 1 if pick.label in names else None
            counts[f"{variant}_top1"] += rank == 1
            counts[f"{variant}_top3"] += rank is not None and rank <= 3
            if variant == "no_draft" and rank is None:
                counts["picked_reply_not_suggested"] += 1
            pairs[variant].append((f"{pick.task}:{pick.label}", f"{pick.task}:{names[0]}" if names else "-"))
    ranked_n = counts["ranked"]
    out: dict[str, Any] = {"picks": counts["picks"], "ranked": ranked_n,
                           "ranked_share": ranked_n / counts["picks"],
                           "cannot_rank": counts["picks"] - ranked_n,
                           "picked_reply_not_suggested": counts["picked_reply_not_suggested"]}
    for variant in VARIANTS:
        out[f"{variant}_top1"] = counts[f"{variant}_top1"] / ranked_n
        out[f"{variant}_top3"] = counts[f"{variant}_top3"] / ranked_n
        out[f"{variant}_weighted_f1"] = weighted_f1(pairs[variant])
    out["star_first_option"] = counts["star_first_option"] / ranked_n
    return out


def measure(data: Path, folds: int, seed: int, limit: int | None) -> dict[str, Any]:
    schemas = load_schemas(data / "tasks")
    source = data / "train.tar.gz" if (data / "train.tar.gz").exists() else data
    started = time.perf_counter()
    kept: list = []
    dialogues = read_corpus(source)
    if limit:
        dialogues = (d for n, d in enumerate(dialogues) if n < limit)
    corpus = gather(dialogues, schemas, keep=kept)
    gathered = time.perf_counter() - started
    fold_of = folds_of(sorted({p.dialogue for p in kept}, key=str), folds, seed)
    per_fold, timings, train_seconds = [], [], []
    for fold in range(folds):
        training = {d for d, f in fold_of.items() if f != fold}
        started = time.perf_counter()
        model = fit(corpus, schemas, seed=seed, dialogues=training)
        train_seconds.append(time.perf_counter() - started)
        result = evaluate([p for p in kept if fold_of[p.dialogue] == fold], schemas, model, timings)
        per_fold.append(result)
        print(f"fold {fold}: " + ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                                           for k, v in result.items()), flush=True)
    keys = [k for k, v in per_fold[0].items() if isinstance(v, float)]
    summary = {k: {"mean": statistics.fmean(f[k] for f in per_fold),
                   "stdev": statistics.stdev(f[k] for f in per_fold) if folds > 1 else 0.0,
                   "min": min(f[k] for f in per_fold), "max": max(f[k] for f in per_fold)} for k in keys}
    return {
        "dialogues": len(fold_of), "folds": folds, "seed": seed, "picks": sum(f["picks"] for f in per_fold),
        "ranked": sum(f["ranked"] for f in per_fold), "cannot_rank": sum(f["cannot_rank"] for f in per_fold),
        "per_fold": per_fold, "summary": summary, "star_table_2_weighted_f1": STAR_TABLE_2,
        "gather_seconds": gathered, "train_seconds_per_fold": train_seconds,
        "rankings": len(timings), "latency_p50_ms": percentile(timings, 0.5) * 1000,
        "latency_p99_ms": percentile(timings, 0.99) * 1000, "latency_max_ms": max(timings) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA,
                        help="STAR data folder: tasks/ and train.tar.gz (or dialogues/)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0, help="shuffles dialogue ids into folds and training")
    parser.add_argument("--limit", type=int, help="only the first N dialogues (a quick look)")
    parser.add_argument("--json", type=Path, help="also write the whole report here")
    args = parser.parse_args()
    result = measure(args.data, args.folds, args.seed, args.limit)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    s = result["summary"]
    print(json.dumps({k: v for k, v in result.items() if k != "per_fold"}, indent=2))

    def shown(key: str) -> str:
        return f"{s[key]['mean']:.1%} ± {s[key]['stdev']:.1%}"

    print(f"{result['folds']}-fold CV over {result['dialogues']} dialogues, {result['picks']} picks, "
          f"{result['ranked']} ranked ({s['ranked_share']['mean']:.1%}):")
    print(f"  no draft: top-1 {shown('no_draft_top1')}, top-3 {shown('no_draft_top3')}, "
          f"weighted F1 {shown('no_draft_weighted_f1')}")
    print(f"  draft:    top-1 {shown('draft_top1')}, top-3 {shown('draft_top3')}, "
          f"weighted F1 {shown('draft_weighted_f1')}")
    print(f"  schema prior only: no draft top-1 {shown('schema_only_no_draft_top1')}, top-3 "
          f"{shown('schema_only_no_draft_top3')}; draft top-1 {shown('schema_only_draft_top1')}")
    print(f"  STAR's first option picked {shown('star_first_option')}; STAR Table 2 weighted F1 (BERT): "
          "happy 73.3, unhappy 73.9, multi-task 73.6")
    print(f"  latency per ranking p50 {result['latency_p50_ms']:.2f} ms, "
          f"p99 {result['latency_p99_ms']:.2f} ms")


if __name__ == "__main__":
    main()
