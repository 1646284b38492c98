"""One analysis from corpus to ``stats.json``, PNG figures and ``report.html``."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional

from spacy.language import Language

from turkflow.dataset.analysis.corpora import Dialogue, Source
from turkflow.dataset.analysis.figures import write_figures
from turkflow.dataset.analysis.nlp import model_label
from turkflow.dataset.analysis.report import render_report
from turkflow.dataset.analysis.star import StarStats
from turkflow.dataset.analysis.stats import CorpusStats
from turkflow.protocols.star.schemas import TaskSchema


def analyse(
    dialogues: Iterable[Dialogue],
    nlp: Language,
    source: Source,
    *,
    batch_size: int = 256,
    n_process: int = 1,
    top_patterns: int = 10,
    on_utterance: Optional[Callable[[], None]] = None,
    star_schemas: Optional[Mapping[str, TaskSchema]] = None,
) -> dict[str, Any]:
    """Every statistic of the corpus in one pass: utterances stream through ``nlp.pipe`` in batches while
    the dialogue-level counts are taken as the dialogues go by. A STAR corpus also gets STAR's measures of
    the wizard (the order of its first questions only with ``star_schemas``)."""
    stats = CorpusStats(top_patterns=top_patterns)
    star = StarStats(star_schemas) if source.corpus == "star" else None

    def utterances() -> Iterable[tuple[str, str]]:
        for dialogue in dialogues:
            stats.add_dialogue(dialogue)
            if star is not None:
                star.add_dialogue(dialogue)
            for turn in dialogue.turns:
                if turn.text.strip():
                    yield turn.text, turn.role

    for doc, role in nlp.pipe(utterances(), as_tuples=True, batch_size=batch_size, n_process=n_process):
        stats.add_utterance(role, doc)
        if on_utterance is not None:
            on_utterance()
    return {
        "source": {"corpus": source.corpus, "inputs": source.inputs, "files": source.files,
                   "skipped": source.skipped},
        "model": model_label(nlp),
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **stats.result(),
        **({"star": star.result()} if star is not None else {}),
    }


def write_outputs(stats: dict[str, Any], out_dir: Path, title: str) -> list[Path]:
    """``stats.json``, ``figures/*.png`` and ``report.html`` in ``out_dir``; each file appears whole or not
    at all."""
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = write_figures(stats, out_dir / "figures")
    written = [_write_atomically(out_dir / "stats.json", json.dumps(stats, indent=2, ensure_ascii=False) + "\n"),
               _write_atomically(out_dir / "report.html", render_report(stats, figures, title))]
    return [*written, *figures.values()]


def _write_atomically(path: Path, text: str) -> Path:
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
    return path
