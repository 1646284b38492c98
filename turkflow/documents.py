"""Task documents: the recipes and how-to articles conversations are about.

File format (JSONL, one document per line, or YAML, a list of documents or ``{tasks: [...]}``)::

    id: pancakes                # unique key; loading the same id again updates the document
    title: Fluffy pancakes      # the only text students see (with the image)
    domain: cooking             # free text; cooking and diy are the paper's domains
    image_url: https://...      # optional
    summary: Light pancakes...  # optional
    ingredients: [...]          # or ``tools:`` (DIY); the list teachers can share
    steps:                      # ordered; a step is a string or {text, image_url}
      - Whisk the flour...
      - {text: Fry..., image_url: https://...}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import yaml
from sqlmodel import Session, select

from turkflow.models import Task


class DocumentError(ValueError):
    """A task file that cannot be loaded; the message names the file, the document and the field."""


@dataclass(frozen=True)
class LoadResult:
    created: int
    updated: int


def read_documents(path: Path) -> list[dict[str, Any]]:
    """Parse a task file and check every document, before anything is written."""
    try:
        raw_text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DocumentError(f"{path}: cannot read ({exc.strerror})") from None
    if path.suffix in (".jsonl", ".ndjson"):
        docs = []
        for line_no, line in enumerate(raw_text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DocumentError(f"{path}:{line_no}: not valid JSON ({exc.msg})") from None
    elif path.suffix in (".yaml", ".yml", ".json"):
        try:
            loaded = yaml.safe_load(raw_text)
        except yaml.YAMLError as exc:
            raise DocumentError(f"{path}: not valid YAML/JSON ({str(exc).splitlines()[0]})") from None
        docs = loaded.get("tasks") if isinstance(loaded, dict) else loaded
    else:
        raise DocumentError(f"{path}: unknown format; use .jsonl, .yaml, .yml or .json")
    if not isinstance(docs, list) or not docs:
        raise DocumentError(f"{path}: no task documents found")
    clean = [normalise_document(doc, f"{path} document {i + 1}") for i, doc in enumerate(docs)]
    keys = [d["key"] for d in clean]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise DocumentError(f"{path}: duplicate id(s): {', '.join(duplicates)}")
    return clean


def normalise_document(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise DocumentError(f"{where}: expected a mapping with id, title, domain, steps")

    def text(field: str, required: bool = True) -> str:
        value = doc.get(field)
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                raise DocumentError(f"{where}: field '{field}' is required")
            return ""
        if not isinstance(value, (str, int, float)):
            raise DocumentError(f"{where}: field '{field}' must be text")
        return str(value).strip()

    key = text("id")
    where = f"{where} ({key})"
    items_label = "Tools" if "tools" in doc else "Ingredients"
    items = doc.get("tools", doc.get("ingredients", doc.get("items", [])))
    if not isinstance(items, list) or not all(isinstance(i, str) and i.strip() for i in items):
        raise DocumentError(f"{where}: field '{items_label.lower()}' must be a list of non-empty strings")
    steps_raw = doc.get("steps")
    if not isinstance(steps_raw, list) or not steps_raw:
        raise DocumentError(f"{where}: field 'steps' must be a non-empty list")
    steps = []
    for n, step in enumerate(steps_raw, 1):
        if isinstance(step, str):
            step = {"text": step}
        if not isinstance(step, dict) or not str(step.get("text", "")).strip():
            raise DocumentError(f"{where}: step {n} needs a 'text'")
        steps.append({"text": str(step["text"]).strip(), "image_url": step.get("image_url") or None})
    return {
        "key": key,
        "title": text("title"),
        "domain": text("domain"),
        "image_url": text("image_url", required=False) or None,
        "summary": text("summary", required=False),
        "items_label": items_label,
        "items": [i.strip() for i in items],
        "steps": steps,
    }


def load_documents(session: Session, docs: Iterable[dict[str, Any]]) -> LoadResult:
    """Insert new documents and update existing ones (matched by id) in one transaction."""
    created = updated = 0
    for doc in docs:
        task = session.exec(select(Task).where(Task.key == doc["key"])).first()
        if task is None:
            session.add(Task(**doc))
            created += 1
        else:
            for name, value in doc.items():
                setattr(task, name, value)
            session.add(task)
            updated += 1
    session.flush()
    return LoadResult(created=created, updated=updated)


def sample_tasks_path() -> Path:
    """The sample tasks shipped with turkflow (written by the turkflow authors)."""
    return Path(__file__).parent / "samples" / "tasks.yaml"
