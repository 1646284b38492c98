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

Every document is checked against ``Document`` before anything is written: text fields are strings (cleaned
as answers are), image URLs are http(s), and each text, each list and the whole document have a size limit,
because the teacher's page shows all of it. The file is read as every requester's file is
(``turkflow.protocols.files``): a regular file of at most 20 MB, JSON as JSON, YAML without anchors, aliases
or duplicate keys. Errors are one line naming the file, the document and the field.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Iterable, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, HttpUrl, ValidationError, field_validator
from pydantic import model_validator
from sqlmodel import Session, select

from turkflow import samples
from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.models import Task
from turkflow.protocols.files import json_lines, read_data
from turkflow.protocols.questions import clean_text

# The teacher's page shows the whole document, so every part of it is bounded, and so is the whole.
MAX_FILE_BYTES = 20 * 1024 * 1024
MAX_DOCUMENT_CHARS = 50_000
MAX_ID_CHARS = 100
MAX_TITLE_CHARS = 200
MAX_DOMAIN_CHARS = 60
MAX_SUMMARY_CHARS = 2000
MAX_ITEMS = 100
MAX_ITEM_CHARS = 300
MAX_STEPS = 100
MAX_STEP_CHARS = 2000
MAX_URL_CHARS = 2000


def _clean(value: str) -> str:
    try:
        return clean_text(value)
    except InvalidInput as error:
        raise ValueError(error.reason) from None


def _not_empty(value: str) -> str:
    if not value:
        raise ValueError("must not be empty")
    return value


def _text(max_chars: int, required: bool = True) -> Any:
    """Text as the answers get it (``protocol.clean_text``): a string, never a number or a list turned into
    one, of at most ``max_chars`` characters."""
    checks = [AfterValidator(_clean), *([AfterValidator(_not_empty)] if required else [])]
    return Annotated[str, Field(strict=True, max_length=max_chars), *checks]


WebUrl = Annotated[HttpUrl, Field(max_length=MAX_URL_CHARS)]


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: _text(MAX_STEP_CHARS)
    image_url: Optional[WebUrl] = None


class Document(BaseModel):
    """One task document as the file gives it; unknown fields are refused (a misspelt one would vanish)."""

    model_config = ConfigDict(extra="forbid")

    id: _text(MAX_ID_CHARS)
    title: _text(MAX_TITLE_CHARS)
    domain: _text(MAX_DOMAIN_CHARS)
    image_url: Optional[WebUrl] = None
    summary: _text(MAX_SUMMARY_CHARS, required=False) = ""
    ingredients: Optional[list[_text(MAX_ITEM_CHARS)]] = Field(None, max_length=MAX_ITEMS)
    tools: Optional[list[_text(MAX_ITEM_CHARS)]] = Field(None, max_length=MAX_ITEMS)
    items: Optional[list[_text(MAX_ITEM_CHARS)]] = Field(None, max_length=MAX_ITEMS)
    steps: list[Step] = Field(min_length=1, max_length=MAX_STEPS)

    @field_validator("steps", mode="before")
    @classmethod
    def _plain_steps(cls, steps: Any) -> Any:
        """A step may be written as its text alone."""
        if isinstance(steps, list):
            return [{"text": step} if isinstance(step, str) else step for step in steps]
        return steps

    @model_validator(mode="after")
    def _one_list(self) -> "Document":
        if sum(v is not None for v in (self.ingredients, self.tools, self.items)) > 1:
            raise ValueError("give one list: ingredients (cooking) or tools (DIY)")
        return self


@dataclass(frozen=True)
class LoadResult:
    created: int
    updated: int


def read_documents(path: Path) -> list[dict[str, Any]]:
    """Parse a task file and check every document, before anything is written."""
    if path.suffix in (".jsonl", ".ndjson"):
        docs = [doc for _, doc in json_lines(path, MAX_FILE_BYTES)]
    elif path.suffix in (".yaml", ".yml", ".json"):
        loaded = read_data(path, MAX_FILE_BYTES)
        docs = loaded.get("tasks") if isinstance(loaded, dict) else loaded
    else:
        raise InvalidDocument(f"{path}: unknown format; use .jsonl, .yaml, .yml or .json")
    if not isinstance(docs, list) or not docs:
        raise InvalidDocument(f"{path}: no task documents found")
    clean = [normalise_document(doc, f"{path} document {i + 1}") for i, doc in enumerate(docs)]
    duplicates = sorted(k for k, n in Counter(d["key"] for d in clean).items() if n > 1)
    if duplicates:
        raise InvalidDocument(f"{path}: duplicate id(s): {', '.join(duplicates)}")
    return clean


def normalise_document(doc: Any, where: str) -> dict[str, Any]:
    """One document checked against ``Document`` and shaped as a ``Task`` row; ``where`` starts the error."""
    if not isinstance(doc, dict):
        raise InvalidDocument(f"{where}: expected a mapping with id, title, domain, steps")
    if isinstance(doc.get("id"), str) and doc["id"].strip():
        where = f"{where} ({doc['id'].strip()[:MAX_ID_CHARS]})"
    try:
        valid = Document.model_validate(doc)
    except ValidationError as exc:
        raise InvalidDocument(f"{where}: {_problem(exc.errors()[0])}") from None
    items = valid.tools if valid.tools is not None else valid.ingredients or valid.items or []
    row = {
        "key": valid.id,
        "title": valid.title,
        "domain": valid.domain,
        "image_url": str(valid.image_url) if valid.image_url else None,
        "summary": valid.summary,
        "items_label": "Tools" if valid.tools is not None else "Ingredients",
        "items": items,
        "steps": [{"text": step.text, "image_url": str(step.image_url) if step.image_url else None}
                  for step in valid.steps],
    }
    size = len(json.dumps(row, ensure_ascii=False))
    if size > MAX_DOCUMENT_CHARS:
        raise InvalidDocument(f"{where}: {size} characters; a document may have at most {MAX_DOCUMENT_CHARS}")
    return row


def _problem(error: Any) -> str:
    """A pydantic error in the file's terms: ``field 'steps[2].image_url': <what is wrong>``."""
    parts = (f"[{part + 1}]" if isinstance(part, int) else f".{part}" for part in error["loc"])
    loc = "".join(parts).lstrip(".")
    message = str(error["ctx"]["error"]) if error["type"] == "value_error" else error["msg"]
    if error["type"] == "string_type":
        message = "must be text (quote it in YAML)"
    elif error["type"] == "model_type":
        message = "must be text or a mapping with text and image_url"
    elif error["type"] == "extra_forbidden":
        message = "unknown field (known: id, title, domain, image_url, summary, ingredients or tools, steps)"
    return f"field '{loc}': {message}" if loc else message


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
    return samples.TASKS["wizard_of_tasks"]
