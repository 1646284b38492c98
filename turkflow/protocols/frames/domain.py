"""A Frames domain as the requester writes it: one YAML (or JSON) file naming the database file, its
declared column types and search fields, the results' default sort, how often a search that finds nothing
shows suggestions, and the goal templates. Everything a batch needs to draw goals and answer searches."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols.frames.database import Database, load_database
from turkflow.protocols.frames.goals import Template, parse_template
from turkflow.protocols.frames.search import DEFAULT_SUGGESTION_PROBABILITY, Sort, parse_sort

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "frames" / "frames.yaml"


@dataclass(frozen=True)
class Domain:
    db: Database
    templates: tuple[Template, ...]
    sort: Sort
    suggestion_probability: float


def load_domain(path: Path = SAMPLE) -> Domain:
    """Read the file and the database it names (relative to the file); one ``InvalidDocument`` on error."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidDocument(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidDocument(f"{path}: cannot read ({exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise InvalidDocument(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(raw, Mapping) or set(raw) - {"database", "templates", "suggestion_probability"}:
        raise InvalidDocument(f"{path}: expected database, templates and optionally suggestion_probability")
    database = raw.get("database")
    if not isinstance(database, Mapping) or not isinstance(database.get("file"), str):
        raise InvalidDocument(f"{path}: database: expected a mapping with file (and types, searchable, sort)")
    types = database.get("types") or {}
    searchable = database.get("searchable")
    if not isinstance(types, Mapping) or (searchable is not None and not isinstance(searchable, list)):
        raise InvalidDocument(f"{path}: database: types is a mapping of column to type, searchable a list")
    db = load_database(path.parent / database["file"], types, searchable)
    try:
        sort = parse_sort(db, database.get("sort"), bool(database.get("descending", False)))
    except InvalidInput as exc:
        raise InvalidDocument(f"{path}: database: sort: {exc.reason}") from None
    chance: Any = raw.get("suggestion_probability", DEFAULT_SUGGESTION_PROBABILITY)
    if isinstance(chance, bool) or not isinstance(chance, (int, float)) or not 0 <= chance <= 1:
        raise InvalidDocument(f"{path}: suggestion_probability: a probability is between 0 and 1")
    templates_raw = raw.get("templates")
    if not isinstance(templates_raw, list) or not templates_raw:
        raise InvalidDocument(f"{path}: templates: expected a list of templates")
    templates = tuple(parse_template(t, db, f"{path}: template {n}") for n, t in enumerate(templates_raw, 1))
    names = [t.name for t in templates]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InvalidDocument(f"{path}: template name {twice[0]!r} is used twice")
    return Domain(db, templates, sort, float(chance))
