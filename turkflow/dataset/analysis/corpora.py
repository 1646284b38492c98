"""Importers: any dialog corpus as a stream of ``Dialogue`` values the statistics understand.

A corpus maps its speakers onto the two sides of a task-oriented dialog: the side that needs the task
done (turkflow's student, SGD's USER, STAR's User) and the side that knows how (teacher, SYSTEM, Wizard).
Each importer reads one file at a time and yields dialogues as it goes, so a corpus never has to fit in
memory; ``.json.gz`` files are read directly.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from turkflow.errors import InvalidInput
from turkflow.models import Role


class CorpusError(InvalidInput):
    """Input that is not the corpus it claims to be; the message names the file."""


@dataclass(frozen=True)
class Utterance:
    role: str  # Role.student or Role.teacher
    text: str  # "" for a turn without words (a STAR knowledge-base query)
    label: Optional[str] = None  # intent, action or dialogue act, when the corpus has one
    relevant: Optional[bool] = None  # the rating this turn received, when the corpus has ratings
    useful: Optional[bool] = None
    worker: Optional[str] = None
    used_urls: Optional[bool] = None  # teacher turns of turkflow exports only
    shared_content: Optional[bool] = None


@dataclass(frozen=True)
class Dialogue:
    id: str
    turns: list[Utterance]
    domain: Optional[str] = None
    task: Optional[str] = None
    tasks: tuple[str, ...] = ()  # STAR: the wizard's tasks
    multi_task: bool = False  # STAR: a scenario that moves from one task to another
    happy: Optional[bool] = None  # STAR: the scenario's happy path, or one where the user's goal fails


@dataclass
class Source:
    """What an importer read, for the record in stats.json."""

    corpus: str
    inputs: list[str]
    files: int
    skipped: dict[str, int] = field(default_factory=dict)


# ---- files -------------------------------------------------------------------------------------------


def read_json(path: Path) -> Any:
    opener: Callable[..., Any] = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError, EOFError) as exc:
        raise CorpusError(f"{path}: not valid JSON ({exc})") from None


def _natural_key(path: Path) -> list[Any]:
    """STAR's 2.json sorts before 10.json."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def expand(paths: Sequence[Path], pattern: str) -> list[Path]:
    """Files named on the command line, and files matching ``pattern`` under directories named there."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            matches = sorted((p for p in path.rglob(pattern) if p.is_file()), key=_natural_key)
            if not matches:
                raise CorpusError(f"{path}: no {pattern} files in this directory")
            found.extend(matches)
        elif path.is_file():
            found.append(path)
        else:
            raise CorpusError(f"{path}: no such file or directory")
    return found


# ---- Schema-Guided Dialogue (Rastogi et al. 2020) ----------------------------------------------------

SGD_ROLES = {"USER": Role.student, "SYSTEM": Role.teacher}


def sgd_files(paths: Sequence[Path]) -> list[Path]:
    return expand(paths, "dialogues_*.json*")


def read_sgd(files: Sequence[Path], source: Source) -> Iterator[Dialogue]:
    """SGD ``dialogues_NNN.json[.gz]``: a list of ``{dialogue_id, services, turns: [{speaker, utterance,
    frames}]}``. A turn's label is its dialogue acts (``INFORM+REQUEST``); the task is its services."""
    for path in files:
        data = read_json(path)
        if not isinstance(data, list):
            raise CorpusError(f"{path}: not an SGD dialogues file (expected a list of dialogues)")
        for n, raw in enumerate(data):
            try:
                services = list(raw["services"])
                turns = [
                    Utterance(role=SGD_ROLES[t["speaker"]], text=t["utterance"], label=_sgd_acts(t))
                    for t in raw["turns"]
                ]
                yield Dialogue(id=str(raw["dialogue_id"]), turns=turns, task="+".join(services),
                               domain="+".join(sorted({s.split("_")[0] for s in services})))
            except (KeyError, TypeError) as exc:
                raise CorpusError(f"{path}: dialogue {n + 1} is not SGD-shaped (missing or bad {exc})") from None


def _sgd_acts(turn: dict[str, Any]) -> Optional[str]:
    acts = sorted({a["act"] for frame in turn.get("frames", []) for a in frame.get("actions", [])})
    return "+".join(acts) or None


# ---- STAR (Mosig et al. 2020) ------------------------------------------------------------------------

STAR_TURNS = {("User", "utter"), ("Wizard", "utter"), ("Wizard", "pick_suggestion"), ("Wizard", "query")}


def star_files(paths: Sequence[Path]) -> list[Path]:
    """A STAR root directory is read through its ``dialogues/`` folder."""
    return expand([p / "dialogues" if (p / "dialogues").is_dir() else p for p in paths], "*.json")


def read_star(files: Sequence[Path], source: Source) -> Iterator[Dialogue]:
    """STAR ``dialogues/N.json`` event logs, counted the way STAR's Table 1 counts: a turn is a User utter,
    a Wizard utter, a Wizard pick_suggestion or a Wizard query, in dialogues whose CompletionLevel is
    Complete."""
    for path in files:
        raw = read_json(path)
        if not isinstance(raw, dict) or "Events" not in raw:
            raise CorpusError(f"{path}: not a STAR dialogue (no Events)")
        if raw.get("CompletionLevel") != "Complete":
            source.skipped["incomplete"] = source.skipped.get("incomplete", 0) + 1
            continue
        scenario = raw.get("Scenario") or {}
        workers = {"User": raw.get("AnonymizedUserWorkerID"), "Wizard": raw.get("AnonymizedWizardWorkerID")}
        turns = [
            Utterance(
                role=Role.student if e["Agent"] == "User" else Role.teacher,
                text=e.get("Text", ""),
                label=e.get("ActionLabel") if e["Action"] == "pick_suggestion" else (
                    "query" if e["Action"] == "query" else None),
                worker=workers[e["Agent"]],
            )
            for e in raw["Events"] if (e.get("Agent"), e.get("Action")) in STAR_TURNS
        ]
        tasks = [c.get("Task") for c in scenario.get("WizardCapabilities", []) if c.get("Task")]
        domains = [d for d in scenario.get("Domains") or [] if d]  # some scenarios list null
        yield Dialogue(id=str(raw.get("DialogueID", path.stem)), turns=turns,
                       domain="+".join(domains) or None, task="+".join(tasks) or None,
                       tasks=tuple(tasks), multi_task=bool(scenario.get("MultiTask")) or len(tasks) > 1,
                       happy=scenario.get("Happy"))


# ---- turkflow exports --------------------------------------------------------------------------------


def turkflow_files(paths: Sequence[Path]) -> list[Path]:
    """An export's ``conversations.jsonl``, or the export directory holding it."""
    files = [p / "conversations.jsonl" if p.is_dir() else p for p in paths]
    for path in files:
        if not path.is_file():
            raise CorpusError(f"{path}: no such export file (expected conversations.jsonl of `turkflow export`)")
    return files


def read_turkflow(files: Sequence[Path], source: Source) -> Iterator[Dialogue]:
    """A ``turkflow export``, one conversation per line."""
    for path in files:
        opener: Callable[..., Any] = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as lines:
            for line_no, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    yield _turkflow_dialogue(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise CorpusError(f"{path}:{line_no}: not valid JSON ({exc.msg})") from None
                except (KeyError, TypeError) as exc:
                    raise CorpusError(f"{path}:{line_no}: not a turkflow conversation (missing or bad {exc})") from None


def _turkflow_dialogue(doc: dict[str, Any]) -> Dialogue:
    turns = []
    for t in doc["turns"]:
        rating = t["ratings_received"] or {}
        teacher = t["role"] == Role.teacher
        turns.append(Utterance(
            role=t["role"], text=t["text"], label=t["label"], worker=t["worker"],
            relevant=rating.get("relevant"), useful=rating.get("useful"),
            used_urls=bool(t["urls"]) if teacher else None,
            shared_content=bool(t["shared"]) if teacher else None,
        ))
    return Dialogue(id=str(doc["conversation_id"]), turns=turns, domain=doc["task"]["domain"],
                    task=doc["task"]["key"])


Locate = Callable[[Sequence[Path]], list[Path]]
Reader = Callable[[Sequence[Path], Source], Iterable[Dialogue]]
CORPORA: dict[str, tuple[Locate, Reader]] = {
    "turkflow": (turkflow_files, read_turkflow),
    "sgd": (sgd_files, read_sgd),
    "star": (star_files, read_star),
}


def read_corpus(corpus: str, paths: Sequence[Path]) -> tuple[Iterable[Dialogue], Source]:
    """The corpus's dialogues, read lazily, and the record of what was read (``skipped`` fills in as the
    dialogues go by). Missing inputs are reported at once, before anything slow starts."""
    try:
        locate, reader = CORPORA[corpus]
    except KeyError:
        raise CorpusError(f"unknown corpus {corpus!r}; known: {', '.join(CORPORA)}") from None
    if not paths:
        raise CorpusError(f"no {corpus} files given")
    files = locate([Path(p) for p in paths])
    source = Source(corpus=corpus, inputs=[str(p) for p in paths], files=len(files))
    return reader(files, source), source
