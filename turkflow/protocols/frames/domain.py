"""A Frames domain as the requester writes it: one YAML (or JSON) file naming the database file (in the same
folder), its declared column types and search fields, what the wizard's page calls each column and which
ones its results show, the results' default sort, how often a search that finds nothing shows
suggestions, how many days a search may widen dates by, the wizard's instructions to vary and the goal
templates. Everything a batch needs to draw goals and answer searches."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from turkflow import samples
from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols.files import inside, read_data, shown
from turkflow.protocols.frames.database import Database, load_database
from turkflow.protocols.frames.goals import Template, parse_template
from turkflow.protocols.frames.search import DEFAULT_SUGGESTION_PROBABILITY, MAX_FLEXIBLE, Sort, parse_sort

SAMPLE = samples.TASKS["frames"]


# Frames told its wizards to "vary the way you answer the user, sometimes you can say something that would
# be right at another point in a dialogue" and asked them to act badly at times (section 3.2). Each dialog
# draws one of these (or the requester's own) for all its wizards.
WIZARD_INSTRUCTIONS = (
    "Answer as you normally would: helpful and to the point.",
    "Answer as you normally would: helpful and to the point.",
    "Say little in this dialog: one option at a time, details only when the user asks.",
    "Say a lot in this dialog: compare two or three options in each reply.",
    "Summarise rather than list: how many packages you found, the cheapest, the range of prices.",
    "Once in this dialog, say that nothing is available although your search found something.",
    "Once in this dialog, say something that would be right at another point of a dialog "
    "(ask again for something the user told you, or offer to book too early).",
)
FLEXIBLE_DAYS = 2  # Frames' ARE_DATES_FLEXIBLE widened the dates by 2 days each way
RESULT_COLUMNS = 7  # columns a results table shows when the requester names none


@dataclass(frozen=True)
class Domain:
    db: Database
    templates: tuple[Template, ...]
    sort: Sort
    suggestion_probability: float
    database_file: Optional[Path] = None  # resolved, inside the domain file's folder
    labels: Mapping[str, str] = field(default_factory=dict)  # what the wizard's page calls a column
    ask: Mapping[str, str] = field(default_factory=dict)  # a range field asking one bound
    results: tuple[str, ...] = ()  # the columns a results table shows; the others on demand
    flexible_days: int = FLEXIBLE_DAYS
    wizard_instructions: tuple[str, ...] = WIZARD_INSTRUCTIONS
    frames_names: Mapping[str, str] = field(default_factory=dict)  # a column's name in the Frames corpus

    def frames_name(self, column: str) -> str:
        """The name the Frames corpus gives the column (``dst_city``), where the requester says which."""
        return self.frames_names.get(column, column)

    def label(self, column: str) -> str:
        return self.labels.get(column) or column.replace("_", " ").capitalize()


DATABASE_KEYS = ("file", "types", "searchable", "sort", "descending", "labels", "ask", "results", "frames_names")
TOP_KEYS = {"database", "templates", "suggestion_probability", "flexible_days", "wizard_instructions"}


def _names(raw: Any, db: Database, path: Path, key: str) -> Sequence[str]:
    """Column names a requester lists or maps (``database.<key>``), each a column of the database."""
    names = list(raw) if isinstance(raw, (Mapping, list)) else None
    if names is None or not all(isinstance(n, str) for n in names):
        raise InvalidDocument(f"{path}: database.{key}: expected column names")
    unknown = [n for n in names if n not in db.columns]
    if unknown:
        raise InvalidDocument(f"{path}: database.{key}: {shown(unknown[0])} is not a column of the database")
    return names


def load_domain(path: Path = SAMPLE) -> Domain:
    """Read the file and the database it names (inside the file's folder); one ``InvalidDocument`` naming
    the file and the field on error. Both are read as every requester's file is
    (``turkflow.protocols.files``): regular files of bounded size, YAML without aliases or duplicate keys."""
    path = Path(path)
    raw = read_data(path)
    if not isinstance(raw, Mapping) or set(raw) - TOP_KEYS:
        raise InvalidDocument(f"{path}: expected database, templates and optionally suggestion_probability, "
                              "flexible_days, wizard_instructions")
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
    labels = database.get("labels") or {}
    _names(labels, db, path, "labels")
    if not all(isinstance(v, str) and v.strip() for v in labels.values()):
        raise InvalidDocument(f"{path}: database.labels: expected a mapping of column name to label")
    ask = database.get("ask") or {}
    for name in _names(ask, db, path, "ask"):
        if ask[name] not in ("at_least", "at_most") or not db.columns[name].ordered:
            raise InvalidDocument(f"{path}: database.ask: {shown(name)}: a number or date column asks "
                                  "at_least or at_most")
    results = database.get("results")
    results = tuple(_names(results, db, path, "results")) if results is not None else \
        tuple(list(db.columns)[:RESULT_COLUMNS])
    days: Any = raw.get("flexible_days", FLEXIBLE_DAYS)
    if isinstance(days, bool) or not isinstance(days, int) or not 0 <= days <= MAX_FLEXIBLE:
        raise InvalidDocument(f"{path}: flexible_days: expected a whole number from 0 to {MAX_FLEXIBLE}")
    told = raw.get("wizard_instructions", list(WIZARD_INSTRUCTIONS))
    if not isinstance(told, list) or not told or not all(isinstance(t, str) and t.strip() for t in told):
        raise InvalidDocument(f"{path}: wizard_instructions: expected a list of texts")
    frames_names = database.get("frames_names") or {}
    _names(frames_names, db, path, "frames_names")
    if not all(isinstance(v, str) and v.strip() for v in frames_names.values()) or \
            len(set(frames_names.values())) != len(frames_names):
        raise InvalidDocument(f"{path}: database.frames_names: expected a mapping of column name to a Frames "
                              "slot name, each name once")
    return Domain(db, templates, sort, float(chance), file, dict(labels), dict(ask), results, days,
                  tuple(t.strip() for t in told), dict(frames_names))
