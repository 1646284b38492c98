"""A Frames domain as the requester writes it: one YAML (or JSON) file naming the database file (in the same
folder), its declared column types and search fields, the results' default sort, how often a search that
finds nothing shows suggestions, and the goal templates. Everything a batch needs to draw goals and answer
searches."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols.files import inside, read_data, shown
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
    database_file: Optional[Path] = None  # resolved, inside the domain file's folder


DATABASE_KEYS = ("file", "types", "searchable", "sort", "descending")


def load_domain(path: Path = SAMPLE) -> Domain:
    """Read the file and the database it names (inside the file's folder); one ``InvalidDocument`` naming
    the file and the field on error. Both are read as every requester's file is
    (``turkflow.protocols.files``): regular files of bounded size, YAML without aliases or duplicate keys."""
    path = Path(path)
    raw = read_data(path)
    if not isinstance(raw, Mapping) or set(raw) - {"database", "templates", "suggestion_probability"}:
        raise InvalidDocument(f"{path}: expected database, templates and optionally suggestion_probability")
    database = raw.get("database")
    if not isinstance(database, Mapping):
        raise InvalidDocument(f"{path}: database: expected a mapping with file (and types, searchable, sort)")
    unknown = sorted(str(key) for key in database if key not in DATABASE_KEYS)
    if unknown:
        raise InvalidDocument(f"{path}: database: unknown key {shown(unknown[0])}; known: "
                              f"{', '.join(DATABASE_KEYS)}")
    file = inside(path.parent, database.get("file"), "database.file", path)
    types = database.get("types") or {}
    if not isinstance(types, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in types.items()):
        raise InvalidDocument(f"{path}: database.types: expected a mapping of column name to type")
    searchable = database.get("searchable")
    if searchable is not None and not (isinstance(searchable, list) and all(isinstance(n, str)
                                                                            for n in searchable)):
        raise InvalidDocument(f"{path}: database.searchable: expected a list of column names")
    db = load_database(file, types, searchable)
    try:
        sort = parse_sort(db, database.get("sort"), database.get("descending", False))
    except InvalidInput as exc:
        raise InvalidDocument(f"{path}: database.{exc.field or 'sort'}: {exc.reason}") from None
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
        raise InvalidDocument(f"{path}: template name {shown(twice[0])} is used twice")
    return Domain(db, templates, sort, float(chance), file)
