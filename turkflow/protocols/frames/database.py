"""The requester's database for a Frames batch: the items a wizard searches (trip packages, flats...).

The requester brings it as a CSV or JSONL file. Each column has a type, declared by the requester or
inferred from the values, because a search compares numbers and dates as numbers and dates ("a budget of
at most 1,700" must not compare as text). A bad file is one ``InvalidDocument`` naming the file, the line
and the field, so the requester can fix it without reading a stack trace.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols.files import parse_json, read_text, shown

TYPES = ("text", "integer", "number", "date", "boolean")
OPS = ("is", "at_least", "at_most")  # text and true/false columns only take "is"
ORDERED = ("integer", "number", "date")
TRUE, FALSE = ("true", "yes"), ("false", "no")
INTEGER = re.compile(r"[-+]?\d+")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
MAX_BYTES = 200 * 1024 * 1024


@dataclass(frozen=True)
class Column:
    """One field of the items; only ``searchable`` ones appear in the wizard's search form."""

    name: str
    type: str
    searchable: bool = True

    @property
    def ordered(self) -> bool:
        """Numbers and dates take ranges (at least, at most) and can sort a search's results."""
        return self.type in ORDERED


@dataclass(frozen=True)
class Constraint:
    """One condition on one column: what a goal asks and what the wizard's search form sends."""

    field: str
    op: str
    value: Any

    def holds(self, item: Mapping[str, Any]) -> bool:
        found = item.get(self.field)
        if found is None:
            return False  # an item that does not say cannot be promised to the user
        if self.op == "is":
            if isinstance(found, str) and isinstance(self.value, str):
                return found.casefold() == self.value.casefold()
            return found == self.value
        if self.op == "at_least":
            return found >= self.value
        return found <= self.value

    def as_dict(self) -> dict[str, Any]:
        """The JSON form events and goals are stored in (dates as ISO text)."""
        return {"field": self.field, "op": self.op, "value": to_json(self.value)}


@dataclass
class Database:
    """The items, each a dict with an ``id`` (the file's, or its position from 1), and typed columns."""

    name: str
    columns: dict[str, Column]
    items: list[dict[str, Any]] = field(default_factory=list)

    def column(self, name: Any) -> Column:
        if not isinstance(name, str) or name not in self.columns:
            raise InvalidInput("not a column of the database", str(name)[:60])
        return self.columns[name]

    @property
    def searchable(self) -> list[Column]:
        return [c for c in self.columns.values() if c.searchable]

    def values(self, name: str) -> list[Any]:
        """The column's distinct values, sorted: a form's drop-down, a goal's pool of values."""
        return sorted({item[name] for item in self.items if item.get(name) is not None})

    def matching(self, constraints: Iterable[Constraint]) -> list[dict[str, Any]]:
        wanted = list(constraints)
        return [item for item in self.items if all(c.holds(item) for c in wanted)]

    def constraint(self, field_name: str, op: str, value: Any) -> Constraint:
        """A constraint checked against the column: a known field, an op its type takes, a value of its
        type (text from a form is converted). Wrong ones are an ``InvalidInput`` naming the field."""
        column = self.column(field_name)
        if op not in OPS:
            raise InvalidInput(f"unknown condition {str(op)[:30]!r}; use one of {', '.join(OPS)}",
                               column.name)
        if op != "is" and not column.ordered:
            raise InvalidInput(f"a {column.type} field takes only 'is'", column.name)
        try:
            typed = convert(column.type, value)
        except ValueError as exc:
            raise InvalidInput(str(exc), column.name) from None
        if typed is None:
            raise InvalidInput("a value is required", column.name)
        return Constraint(column.name, op, typed)


def to_json(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.date) else value


def convert(kind: str, raw: Any) -> Any:
    """``raw`` (text from a CSV cell or a form, or a JSON value) as a value of type ``kind``; ``None`` for
    an empty cell. A value that does not fit raises ``ValueError`` with the reason a person reads."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    text = raw.strip() if isinstance(raw, str) else raw
    if kind == "text":
        if isinstance(text, (dict, list)):
            raise ValueError(f"expected text, got {str(raw)[:40]!r}")
        return text if isinstance(text, str) else json.dumps(text)
    if kind == "boolean":
        if isinstance(text, bool):
            return text
        if isinstance(text, str) and text.lower() in TRUE + FALSE:
            return text.lower() in TRUE
        raise ValueError(f"expected true or false, got {str(raw)[:40]!r}")
    if kind == "integer":
        if isinstance(text, int) and not isinstance(text, bool):
            return text
        if isinstance(text, float) and text.is_integer():
            return int(text)
        if isinstance(text, str) and INTEGER.fullmatch(text):
            return int(text)
        raise ValueError(f"expected a whole number, got {str(raw)[:40]!r}")
    if kind == "number":
        if isinstance(text, int) and not isinstance(text, bool):
            return text
        if isinstance(text, float) and math.isfinite(text):
            return text
        if isinstance(text, str):
            try:
                number = float(text)
            except ValueError:
                pass
            else:
                if math.isfinite(number):
                    return int(number) if INTEGER.fullmatch(text) else number
        raise ValueError(f"expected a number, got {str(raw)[:40]!r}")
    if kind == "date":
        if isinstance(text, dt.date):
            return text
        if isinstance(text, str) and DATE.fullmatch(text):
            try:
                return dt.date.fromisoformat(text)
            except ValueError:
                pass
        raise ValueError(f"expected a date as YYYY-MM-DD, got {str(raw)[:40]!r}")
    raise ValueError(f"unknown type {kind!r}; use one of {', '.join(TYPES)}")


def _typed(kind: str, values: Sequence[Any]) -> list[Any]:
    return [convert(kind, value) for value in values]


def infer(values: Sequence[Any]) -> tuple[str, list[Any]]:
    """The narrowest type every non-empty value fits, and the values in it: a column of "2025-07-01" is a
    date column, a column of "12" and "12.5" a number column; anything mixed is text."""
    if any(v is not None and not (isinstance(v, str) and not v.strip()) for v in values):
        for kind in ("boolean", "integer", "number", "date"):
            try:
                return kind, _typed(kind, values)
            except ValueError:
                continue
    return "text", _typed("text", values)


def _bad(path: Path, line: int, name: Optional[str], reason: str) -> InvalidDocument:
    where = f"{path}:{line}: field {shown(name)}: " if name else f"{path}:{line}: "
    error = InvalidDocument(where + reason)
    error.field = name  # a page can point at the column as well as show the line
    return error


def _rows(path: Path) -> tuple[list[str], list[tuple[int, dict[str, Any]]]]:
    """The file's column names in order and its rows with their line numbers."""
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".ndjson"):
        raise InvalidDocument(f"{path}: unknown format; use .csv or .jsonl")
    text = read_text(path, MAX_BYTES)
    rows: list[tuple[int, dict[str, Any]]] = []
    if suffix == ".csv":
        reader = csv.reader(text.splitlines(keepends=True))
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise InvalidDocument(f"{path}: empty; the first line names the columns") from None
        for number, name in enumerate(header, 1):
            if not name:
                raise _bad(path, 1, None, f"column {number} has no name")
            if header.index(name) != number - 1:
                raise _bad(path, 1, name, "named twice")
        try:
            for cells in reader:
                if not any(c.strip() for c in cells):
                    continue
                if len(cells) != len(header):
                    raise _bad(path, reader.line_num, None, f"{len(cells)} values for {len(header)} columns")
                rows.append((reader.line_num, dict(zip(header, cells))))
        except csv.Error as exc:
            raise _bad(path, reader.line_num, None, f"not valid CSV ({exc})") from None
        return header, rows
    names: dict[str, None] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        item = parse_json(line, f"{path}:{number}")
        if not isinstance(item, dict):
            raise _bad(path, number, None, "expected one JSON object per line")
        for key, value in item.items():
            if isinstance(value, (dict, list)):
                raise _bad(path, number, key, "expected a single value, not a list or an object")
            names.setdefault(key)
        rows.append((number, item))
    return list(names), rows


def load_database(path: Path, types: Optional[Mapping[str, str]] = None,
                  searchable: Optional[Iterable[str]] = None) -> Database:
    """Read the items. ``types`` declares some columns' types (the others are inferred); ``searchable``
    names the wizard's search fields (default: every column but ``id``)."""
    path = Path(path)
    names, rows = _rows(path)
    if not rows:
        raise InvalidDocument(f"{path}: no items")
    declared = dict(types or {})
    for name, kind in declared.items():
        if name not in names:
            raise _bad(path, 1, name, "declared but not a column of the file")
        if kind not in TYPES:
            raise _bad(path, 1, name, f"unknown type {str(kind)[:30]!r}; use one of {', '.join(TYPES)}")
    kinds: dict[str, str] = {}
    typed: dict[str, list[Any]] = {}
    for name in names:  # column by column: inferring a type converts the values once
        raw = [row.get(name) for _, row in rows]
        if name in declared:
            kinds[name] = declared[name]
            try:
                typed[name] = _typed(declared[name], raw)
            except ValueError:
                for line, row in rows:
                    try:
                        convert(declared[name], row.get(name))
                    except ValueError as exc:
                        raise _bad(path, line, name, str(exc)) from None
        else:
            kinds[name], typed[name] = infer(raw)
    if "id" in kinds and "id" not in declared and kinds["id"] not in ("integer", "text"):
        kinds["id"], typed["id"] = "text", _typed("text", [row.get("id") for _, row in rows])
    search = set(searchable) if searchable is not None else {n for n in names if n != "id"}
    unknown = sorted(search - set(names))
    if unknown:
        raise _bad(path, 1, unknown[0], "named searchable but not a column of the file")
    columns = {name: Column(name, kinds[name], name in search and name != "id") for name in names}
    items = [dict(zip(names, values)) for values in zip(*(typed[name] for name in names))]
    seen: dict[Any, int] = {}
    for position, ((line, _), item) in enumerate(zip(rows, items), 1):
        if "id" not in columns:
            item["id"] = position
        elif item["id"] is None:
            raise _bad(path, line, "id", "every item needs an id")
        if item["id"] in seen:
            earlier = seen[item["id"]]
            raise _bad(path, line, "id",
                       f"{shown(item['id'])} is already the id of the item on line {earlier}")
        seen[item["id"]] = line
    if "id" not in columns:
        columns = {"id": Column("id", "integer", False), **columns}
    return Database(path.stem, columns, items)
