"""The dataset as it leaves the database: one JSON document per conversation, plus a JSONL of all of them.

Conversations are read in pages by id (keyset pagination), so memory stays flat however large the
collection: a page's conversations, turns and ratings are read, written out and dropped before the next
page. Raw crowd worker ids never leave: every worker appears as a keyed hash (HMAC-SHA256 with
``Settings.worker_hash_key``), and a worker's raw id typed into a text field is replaced by that hash
too. Documents follow ``export_schema.json`` (a sample is validated as they are written, see
``write_export``), and the export is assembled in a staging directory that only takes the target's name
when complete.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, Sequence

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from sqlalchemy import func
from sqlmodel import Session, col, select

from turkflow.errors import TurkflowError
from turkflow.models import (
    Agent,
    Batch,
    Conversation,
    ConversationAgent,
    ConversationStatus,
    Rating,
    Task,
    Turn,
    TurnStatus,
    Worker,
    WorkerStatus,
)
from turkflow.protocols.questions import document_items

if TYPE_CHECKING:
    from spacy.language import Language

FORMAT = "turkflow.conversation/1"
CHECK_EVERY = 200  # validate one document in this many against the schema while writing
BLOCKED = (WorkerStatus.blocked, WorkerStatus.temporarily_blocked)


class ExportError(TurkflowError):
    """An export that cannot be written as asked; the message says why in the user's words."""


def anonymize(hash_key: str, external_id: str) -> str:
    """A worker's exported id: stable for one key, useless for finding the worker without it."""
    digest = hmac.new(hash_key.encode(), external_id.encode(), hashlib.sha256).hexdigest()
    return "w" + digest[:32]


def load_schema() -> dict[str, Any]:
    return json.loads((files("turkflow.dataset") / "export_schema.json").read_text(encoding="utf-8"))


def schema_validator() -> Draft202012Validator:
    return Draft202012Validator(load_schema(), format_checker=Draft202012Validator.FORMAT_CHECKER)


@dataclass(frozen=True)
class ExportFilters:
    batch_id: Optional[int] = None
    domain: Optional[str] = None
    completed_only: bool = False
    exclude_blocked: bool = False  # drop every turn (and so every rating) written by a blocked worker
    protocol: Optional[str] = None  # only conversations of batches following this protocol

    def conditions(self) -> list[Any]:
        conditions: list[Any] = []
        if self.protocol is not None:
            conditions.append(Batch.protocol == self.protocol)
        if self.batch_id is not None:
            conditions.append(Conversation.batch_id == self.batch_id)
        if self.domain is not None:
            conditions.append(func.lower(Task.domain) == self.domain.lower())
        if self.completed_only:
            conditions.append(Conversation.status == ConversationStatus.completed)
        return conditions


# ---- personal data -----------------------------------------------------------------------------------

_STREET = r"(?i:street|st|avenue|ave|road|rd|boulevard|blvd|lane|ln|drive|dr|court|ct|way|place|pl|terrace|" \
          r"circle|highway|hwy|parkway|pkwy|square|sq)"
PII_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("EMAIL", re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")),
    ("ADDRESS", re.compile(
        rf"\b\d{{1,6}}[A-Za-z]?\s+(?:[A-Z][\w'-]*\.?\s+){{1,4}}{_STREET}\b\.?"  # 221B Baker Street
        r"(?:,?\s+(?:Apt|Apartment|Suite|Unit|#)\.?\s*\w+)?"  # , Apt 4
        r"(?:,\s*[A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,2})?"  # , Springfield
        r"(?:,\s*[A-Z]{2}\b)?(?:\s+\d{5}(?:-\d{4})?)?"  # , IL 62704
    )),
    ("PHONE", re.compile(
        r"(?<![\w.])(?:"
        r"\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)|\d{1,4})(?:[\s.-]?\d{2,4}){2,3}"  # +44 20 7946 0958
        r"|(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}"  # (555) 123-4567, 555-123-4567
        r"|\d{10}"
        r")(?!\w)"
    )),
    ("WORKER_ID", re.compile(r"\bA(?=[A-Z0-9]*\d)[A-Z0-9]{11,20}\b")),  # MTurk worker ids
)
NER_LABELS = {"PERSON": "NAME"}
PROPER_NOUN_TAGS = {"NNP", "NNPS"}


class PiiScrubber:
    """Replaces personal data in free text with typed placeholders ([NAME], [EMAIL], [PHONE], [ADDRESS],
    [WORKER_ID]).

    Names come from spaCy's entity recognizer, kept only when the tagger calls a word of them a proper
    noun: the small model takes sentence-initial imperatives ("Cook it the Italian way") for names, and
    instructions are most of what teachers write. Emails, phone numbers, street addresses and MTurk worker
    ids come from patterns, because these strings have a fixed shape the model tags as plain numbers.
    Place names alone (GPE) are kept: in recipes and how-tos they are cuisines and origins, not addresses.
    """

    def __init__(self, nlp: Language, batch_size: int = 256):
        self.nlp = nlp
        self.batch_size = batch_size

    def scrub(self, texts: Sequence[str]) -> list[str]:
        clean = []
        for text, doc in zip(texts, self.nlp.pipe(texts, batch_size=self.batch_size)):
            spans = [(m.start(), m.end(), label) for label, pattern in PII_PATTERNS for m in pattern.finditer(text)]
            spans += [(e.start_char, e.end_char, NER_LABELS[e.label_]) for e in doc.ents
                      if e.label_ in NER_LABELS and any(t.tag_ in PROPER_NOUN_TAGS for t in e)]
            clean.append(_replace_spans(text, spans))
        return clean


def _replace_spans(text: str, spans: list[tuple[int, int, str]]) -> str:
    """Overlapping finds merge into one placeholder, labelled by the one that starts first."""
    merged: list[list[Any]] = []
    for start, end, label in sorted(spans, key=lambda s: (s[0], -s[1])):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, label])
    out, position = [], 0
    for start, end, label in merged:
        out.append(text[position:start])
        out.append(f"[{label}]")
        position = end
    out.append(text[position:])
    return "".join(out)


# ---- reading conversations ---------------------------------------------------------------------------


def count_conversations(session: Session, filters: ExportFilters) -> int:
    return session.exec(
        select(func.count()).select_from(Conversation).join(Task, Task.id == Conversation.task_id)
        .join(Batch, Batch.id == Conversation.batch_id).where(*filters.conditions())
    ).one()


def protocols_matching(session: Session, filters: ExportFilters) -> list[str]:
    """The protocols of the conversations ``filters`` select, whatever protocol they ask for: what an
    export that found nothing of its own protocol could have written with another format."""
    return sorted(session.exec(
        select(Batch.protocol).select_from(Conversation).join(Task, Task.id == Conversation.task_id)
        .join(Batch, Batch.id == Conversation.batch_id)
        .where(*replace(filters, protocol=None).conditions()).distinct()))


def iter_conversations(
    session: Session,
    hash_key: str,
    filters: ExportFilters = ExportFilters(),
    scrubber: Optional[PiiScrubber] = None,
    page_size: int = 200,
) -> Iterator[dict[str, Any]]:
    """Export documents in conversation id order, reading ``page_size`` conversations at a time."""
    after = 0
    while True:
        page = session.execute(
            select(Conversation.id, Conversation.status, Conversation.end_reason, Conversation.created_at,
                   Conversation.completed_at, Conversation.task_id, Batch.id.label("batch_id"),
                   Batch.name.label("batch_name"), Batch.protocol)
            .join(Batch, Batch.id == Conversation.batch_id)
            .join(Task, Task.id == Conversation.task_id)
            .where(Conversation.id > after, *filters.conditions())
            .order_by(Conversation.id)
            .limit(page_size)
        ).all()
        if not page:
            return
        after = page[-1].id
        yield from _page_documents(session, page, hash_key, filters, scrubber)


def _page_documents(session: Session, page: list[Any], hash_key: str, filters: ExportFilters,
                    scrubber: Optional[PiiScrubber]) -> list[dict[str, Any]]:
    ids = [c.id for c in page]
    tasks = {t.id: t for t in session.exec(select(Task).where(col(Task.id).in_({c.task_id for c in page})))}
    turns = session.execute(
        select(Turn.id, Turn.conversation_id, Turn.index, Turn.role, Turn.text, Turn.label, Turn.answers,
               Turn.flags, Turn.signals, Turn.submitted_at, Worker.external_id,
               Worker.status.label("worker_status"), Agent.name.label("agent"))
        .join(Worker, Worker.id == Turn.worker_id).outerjoin(Agent, Agent.worker_id == Worker.id)
        .where(col(Turn.conversation_id).in_(ids), Turn.status == TurnStatus.submitted)
        .order_by(Turn.conversation_id, Turn.index)
    ).all()
    ratings = session.execute(
        select(Rating.rated_turn_id, Rating.relevant, Rating.useful, Worker.external_id,
               Worker.status.label("worker_status"))
        .join(Worker, Worker.id == Rating.rater_id)
        .join(Turn, Turn.id == Rating.rated_turn_id)
        .where(col(Turn.conversation_id).in_(ids))
    ).all()
    if filters.exclude_blocked:
        turns = [t for t in turns if t.worker_status not in BLOCKED]
        ratings = [r for r in ratings if r.worker_status not in BLOCKED]

    hashes = {i: anonymize(hash_key, i) for i in {r.external_id for r in [*turns, *ratings]}}
    texts = [t.text or "" for t in turns]
    real_life = [t.answers["real_life"] if "real_life" in t.answers else None for t in turns]
    if scrubber is not None:
        texts = scrubber.scrub(texts)
        asked = [i for i, value in enumerate(real_life) if value is not None]
        for i, value in zip(asked, scrubber.scrub([real_life[i] for i in asked])):
            real_life[i] = value

    received = {r.rated_turn_id: {"relevant": r.relevant, "useful": r.useful, "rater": hashes[r.external_id]}
                for r in ratings}
    items = {task_id: {item["id"]: item for item in document_items(task)} for task_id, task in tasks.items()}
    by_conversation: dict[int, list[dict[str, Any]]] = {i: [] for i in ids}
    conversation_task = {c.id: c.task_id for c in page}
    for n, t in enumerate(turns):
        known = items[conversation_task[t.conversation_id]]
        by_conversation[t.conversation_id].append({
            "index": t.index,
            "role": t.role,
            "worker": hashes[t.external_id],
            "text": texts[n],
            "label": t.label,
            "ratings_received": received.get(t.id),
            "shared": [known[i] for i in t.answers.get("shared", []) if i in known],
            "urls": list(t.answers.get("urls", [])),
            "danger": [known[i] for i in t.answers.get("danger", []) if i in known],
            "real_life": real_life[n],
            "flags": list(t.flags),
            "signals": t.signals or {"unknown": "absent"},  # {}: written before the page reported any
            "submitted_at": _iso(t.submitted_at),
            "agent": t.agent,
        })
    played: dict[int, dict[str, str]] = {i: {} for i in ids}
    for conversation_id, role, name in session.execute(
            select(ConversationAgent.conversation_id, ConversationAgent.role, Agent.name)
            .join(Agent, Agent.id == ConversationAgent.agent_id)
            .where(col(ConversationAgent.conversation_id).in_(ids))):
        played[conversation_id][role] = name
    return [_conversation_document(c, tasks[c.task_id], by_conversation[c.id], played[c.id]) for c in page]


def _conversation_document(c: Any, task: Task, turns: list[dict[str, Any]],
                           agents: dict[str, str]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "conversation_id": c.id,
        "batch": {"id": c.batch_id, "name": c.batch_name, "protocol": c.protocol},
        "status": c.status,
        "end_reason": c.end_reason,
        "created_at": _iso(c.created_at),
        "completed_at": _iso(c.completed_at) if c.completed_at else None,
        "task": {
            "key": task.key,
            "title": task.title,
            "domain": task.domain,
            "image_url": task.image_url,
            "document": {
                "summary": task.summary,
                "items_label": task.items_label,
                "items": list(task.items),
                "steps": [{"text": s["text"], "image_url": s.get("image_url")} for s in task.steps],
            },
        },
        "turns": turns,
        **({"agents": agents} if agents else {}),
    }


_WORDS = re.compile(r"[\w-]+")  # a run of word characters and hyphens: an id is one, or a part of one between hyphens
MAX_ID_PARTS = 6  # of an id split at its hyphens (local-3f2a9c1b0d4e: 2)


def id_replacer(hashes: dict[str, str]) -> Callable[[str], str]:
    """Replace every raw worker id typed into free text, in any case (``A1B2``, ``a1b2``), by that worker's
    hash: each run of word characters and hyphens is looked up whole, and, where it holds hyphens, each run of
    its parts (``see-local-3f2a``), so the cost is one dictionary look-up a word however many ids there are."""
    lowered = {raw.lower(): hashed for raw, hashed in hashes.items()}
    if not lowered:
        return lambda text: text

    def replaced(match: re.Match[str]) -> str:
        word = match.group(0)
        found = lowered.get(word.lower())
        if found is not None or "-" not in word:
            return found or word
        parts, kept, at = word.split("-"), [], 0
        while at < len(parts):
            end = next((end for end in range(min(len(parts), at + MAX_ID_PARTS), at, -1)
                        if "-".join(parts[at:end]).lower() in lowered), None)
            if end is None:
                kept.append(parts[at])
                at += 1
            else:
                kept.append(lowered["-".join(parts[at:end]).lower()])
                at = end
        return "-".join(kept)

    return lambda text: _WORDS.sub(replaced, text)


def worker_id_hider(session: Session, hash_key: str) -> Callable[[Any], Any]:
    """What every export format passes each document through before writing it: every string in it, at any
    depth, with each raw worker id the database knows (typed by anyone, in any case) replaced by its hash.
    One way for every format, so no format can leak what another hides."""
    replace = id_replacer({raw: anonymize(hash_key, raw) for raw in session.exec(select(Worker.external_id))})

    def hide(value: Any) -> Any:
        if isinstance(value, str):
            return replace(value)
        if isinstance(value, dict):
            return {hide(key) if isinstance(key, str) else key: hide(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [hide(item) for item in value]
        return value

    return hide


def _iso(value: datetime) -> str:
    """SQLite hands back naive datetimes; every stored time is UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.isoformat()


# ---- writing -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportSummary:
    out_dir: Path
    conversations: int
    turns: int


def write_export(documents: Iterable[dict[str, Any]], out_dir: Path,
                 on_document: Optional[Callable[[dict[str, Any]], None]] = None,
                 check_every: int = CHECK_EVERY) -> ExportSummary:
    """Write ``conversations/<id>.json``, ``conversations.jsonl`` and ``schema.json`` into ``out_dir``.

    The files are assembled in a hidden sibling directory that is renamed to ``out_dir`` at the end, so an
    interrupted export leaves nothing that looks like a dataset. The first document and every
    ``check_every``-th after it are validated against the schema: documents are built by one function, so
    drift between it and the schema shows on the first one, and validating all of them made the export
    four times slower (bench/RESULTS.md). The tests validate every document of their exports.
    """
    out_dir = Path(out_dir)
    validator = schema_validator()
    conversations = turns = 0
    with staged(out_dir) as staging:
        (staging / "conversations").mkdir()
        with open(staging / "conversations.jsonl", "w", encoding="utf-8") as jsonl:
            for doc in documents:
                if conversations % check_every == 0:
                    _check(validator, doc)
                line = json.dumps(doc, ensure_ascii=False) + "\n"
                jsonl.write(line)
                (staging / "conversations" / f"{doc['conversation_id']}.json").write_text(line, encoding="utf-8")
                conversations += 1
                turns += len(doc["turns"])
                if on_document is not None:
                    on_document(doc)
        (staging / "schema.json").write_text(json.dumps(load_schema(), indent=2) + "\n", encoding="utf-8")
    return ExportSummary(out_dir=out_dir, conversations=conversations, turns=turns)


@contextmanager
def staged(out_dir: Path) -> Iterator[Path]:
    """A hidden sibling directory to assemble an export in, renamed to ``out_dir`` only when the block ends
    without error (and removed when it does not): an interrupted export leaves nothing that looks like a
    dataset. ``out_dir`` must not exist or be empty, nor be the folder the command runs in (or one holding it);
    a link to an empty folder is written into that folder. All of it is checked before anything is written."""
    shown = out_dir
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ExportError(f"{out_dir} already exists and is not an empty directory; choose a new one")
    out_dir = out_dir.resolve()  # a link's folder; "." a name of its own, whose staging is a sibling, not inside
    here = Path.cwd().resolve()
    if out_dir == here or out_dir in here.parents:
        raise ExportError(f"{shown} is the folder you are in, or holds it; give the name of a new folder")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
        if out_dir.exists():
            out_dir.rmdir()
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _check(validator: Draft202012Validator, doc: dict[str, Any]) -> None:
    error = best_match(validator.iter_errors(doc))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "document"
        raise ExportError(f"conversation {doc.get('conversation_id')} breaks the export schema at {where}: "
                          f"{error.message}")


def export_dataset(session: Session, out_dir: Path, *, hash_key: str, filters: ExportFilters = ExportFilters(),
                   scrubber: Optional[PiiScrubber] = None,
                   on_document: Optional[Callable[[dict[str, Any]], None]] = None) -> ExportSummary:
    if not hash_key:
        raise ExportError("no worker hash key configured; set TURKFLOW_WORKER_HASH_KEY")
    hide = worker_id_hider(session, hash_key)
    return write_export((hide(doc) for doc in iter_conversations(session, hash_key, filters, scrubber)), out_dir,
                        on_document)
