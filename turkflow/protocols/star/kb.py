"""STAR's knowledge base: the API definitions a wizard's query form is built from, and their databases.

STAR does not ship rows: ``apis/dbs/<db>.json`` lists each column's type and domain, and STAR's server drew
random rows at start-up (its api.py says 100, 1,000 for planes; the logged items carry ids up to 999 in every
database, so the server that collected the data drew 1,000 everywhere, and so do we). We draw them the
same way from a seeded random generator, so a database is the same on every machine and every run.
``query`` applies STAR's constraint semantics (a plain value means equality; ``api.is_one_of([...])`` and
friends are predicates; several constraints on one field must all hold) and returns every match in id
order, where STAR returned one match at random. Constraints arrive in STAR's logged form
(``{"Day": "\\"Monday\\""}``, a Python expression) and are parsed, never evaluated: ``!`` expressions in
the database files go through a small whitelist evaluator.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols import files

SEARCH_FUNCTIONS = ("generic_sample", "plane_search")
CHOICES = ("Categorical", "RequestType")  # a form's drop-down: every logged value is one of its choices
FREE_TEXT = ("ShortString", "LongString")  # STAR's form logged digits typed here as a number: 639431
ROWS = 1000
MAX_VALUES = 100_000  # a "!" expression's list (a form's choices) is never millions long

# op name -> (how many values it takes: "one" or "list", predicate on (row value, constraint value))
OPS: dict[str, tuple[str, Callable[[Any, Any], bool]]] = {
    "equals": ("one", lambda row, v: row == v),
    "is_equal_to": ("one", lambda row, v: row == v),
    "is_unequal_to": ("one", lambda row, v: row != v),
    "contains": ("one", lambda row, v: row is not None and v in row),
    "contains_substring": ("one", lambda row, v: row is not None and v in row),
    "contains_not": ("one", lambda row, v: row is not None and v not in row),
    "is_one_of": ("list", lambda row, v: row in v),
    "contains_none_of": ("list", lambda row, v: row is not None and not any(e in row for e in v)),
    "contain_all_of": ("list", lambda row, v: row is not None and all(e in row for e in v)),
    "contain_at_least_one_of": ("list", lambda row, v: row is not None and any(e in row for e in v)),
    "is_greater_than": ("one", lambda row, v: row is not None and row > v),
    "is_at_least": ("one", lambda row, v: row is not None and row >= v),
    "is_less_than": ("one", lambda row, v: row is not None and row < v),
    "is_at_most": ("one", lambda row, v: row is not None and row <= v),
}
ORDERING = ("is_greater_than", "is_at_least", "is_less_than", "is_at_most")
# A field may hold one condition of each of these kinds in a query (a range has one bound of each side);
# any other condition may appear once with a given value (near a park and near a school).
ONE_PER_FIELD = {"equals": "equality", "is_equal_to": "equality", "is_one_of": "equality",
                 "is_at_least": "lower bound", "is_greater_than": "lower bound",
                 "is_at_most": "upper bound", "is_less_than": "upper bound"}

# What the wizard's form may ask of a field, by the field's kind, in the order the form offers them: every
# condition STAR's logged queries use ("equals" is a plain value, ``"Monday"``; "between" writes two).
FORM_OPS: dict[str, tuple[str, ...]] = {
    "choice": ("equals", "is_one_of", "is_not", "is_equal_to"),
    "number": ("equals", "is_at_least", "is_at_most", "is_greater_than", "is_less_than", "between", "is_not",
               "is_equal_to"),
    "multi": ("contains", "contains_not"),
    "text": ("equals", "contains", "is_not", "is_equal_to"),
    "boolean": ("equals",),
    "request": ("equals",),
}
MULTI = ("CategoricalMultiple",)  # a list of choices per row: the form asks what it contains


@dataclass(frozen=True)
class Constraint:
    """One condition on one field; ``negated`` is STAR's ``api.is_not(...)`` around another condition."""

    field: str
    op: str
    value: Any
    negated: bool = False

    def holds(self, row: Mapping[str, Any]) -> bool:
        try:
            result = OPS[self.op][1](row.get(self.field), self.value)
        except TypeError:  # e.g. a number compared with text: STAR would crash; we call it no match
            result = False
        return not result if self.negated else result


@dataclass(frozen=True)
class Column:
    """A field of an API's form or a database column: STAR's Name, Type and domain."""

    name: str
    type: str
    categories: Optional[tuple] = None
    minimum: Any = None
    maximum: Any = None
    enabled: Any = None
    readable: str = ""


@dataclass(frozen=True)
class Api:
    """One knowledge-base API: its form (``inputs``), what it returns, required fields, its database."""

    name: str
    inputs: Mapping[str, Column]
    outputs: Mapping[str, Column]
    required: tuple[str, ...]
    db: str
    function: str
    returns_count: bool

    @property
    def searchable(self) -> bool:
        """Search APIs return database rows; the others (bookings, checks) drew a random outcome in STAR."""
        return self.function in SEARCH_FUNCTIONS


@dataclass
class Database:
    """Rows drawn once per database; ``id`` is the row's position, as in STAR."""

    name: str
    columns: tuple[Column, ...]
    rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class QueryResult:
    """Every matching row in id order; STAR showed the wizard one of them (``items[0]`` here) and a count."""

    api: str
    items: tuple[Mapping[str, Any], ...]

    @property
    def total(self) -> int:
        return len(self.items)

    @property
    def first(self) -> Optional[Mapping[str, Any]]:
        return self.items[0] if self.items else None


# --- the whitelist evaluator for "!" expressions in database files ---------------------------------------

_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b}
_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Gt: lambda a, b: a > b,
            ast.GtE: lambda a, b: a >= b, ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


def _evaluate(node: ast.AST, env: Mapping[str, Any]) -> Any:
    """Evaluate the small part of Python STAR's database files use; anything else is refused."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_evaluate(e, env) for e in node.elts]
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.Subscript):
        return _evaluate(node.value, env)[_evaluate(node.slice, env)]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _evaluate(node.left, env), _evaluate(node.right, env)
        if isinstance(node.op, ast.Mult) and any(isinstance(v, (str, list, tuple)) for v in (left, right)):
            times, sequence = (left, right) if isinstance(right, (str, list, tuple)) else (right, left)
            if isinstance(times, int) and len(sequence) * times > MAX_VALUES:
                raise ValueError(f"a value of more than {MAX_VALUES} items")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.BoolOp):
        values = (_evaluate(v, env) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _evaluate(node.operand, env)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        return _COMPARE[type(node.ops[0])](_evaluate(node.left, env), _evaluate(node.comparators[0], env))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        args = [_evaluate(a, env) for a in node.args]
        if node.func.id == "list":
            return list(*args)
        if node.func.id == "combinations":
            if (len(args) == 2 and isinstance(args[0], (list, tuple)) and isinstance(args[1], int)
                    and 0 <= args[1] and math.comb(len(args[0]), args[1]) > MAX_VALUES):
                raise ValueError(f"more than {MAX_VALUES} combinations")
            return itertools.combinations(*args)
    raise ValueError(f"unsupported expression {files.shown(ast.unparse(node))}")


def _expression(text: str) -> Any:
    """``!lambda p: ...`` becomes a function of the row so far; ``!list(...)`` becomes its value."""
    tree = ast.parse(text, mode="eval").body
    if isinstance(tree, ast.Lambda):
        arg = tree.args.args[0].arg
        body = tree.body
        return lambda row: _evaluate(body, {arg: row})
    return _evaluate(tree, {})


def _column(path: Path, raw: object) -> Column:
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) for k in ("Name", "Type")):
        raise InvalidDocument(f"{path}: every field needs a Name and a Type, found {files.shown(raw)}")
    values = {}
    for key in ("Categories", "Min", "Max", "Enabled"):
        value = raw.get(key)
        if isinstance(value, str) and value.startswith("!"):
            try:
                value = _expression(value[1:])
            except (SyntaxError, ValueError, TypeError, KeyError, IndexError, RecursionError) as exc:
                raise InvalidDocument(f"{path}: field {files.shown(raw['Name'])} {key}: "
                                      f"{files.cut(str(exc) or type(exc).__name__)}") from None
        values[key] = value
    categories = values["Categories"]
    if categories is not None and not isinstance(categories, (list, tuple, itertools.combinations)):
        raise InvalidDocument(f"{path}: field {files.shown(raw['Name'])} Categories: expected a list of "
                              f"choices, got {files.shown(categories)}")
    return Column(raw["Name"], raw["Type"], tuple(categories) if categories is not None else None,
                  values["Min"], values["Max"], values["Enabled"], raw.get("ReadableName", raw["Name"]))


def load_api(path: Path) -> Api:
    raw = files.read_json(path)
    if not isinstance(raw, dict):
        raise InvalidDocument(f"{path}: expected a JSON object")
    for key, kind in (("input", list), ("output", list), ("required", list), ("db", str), ("function", str)):
        if not isinstance(raw.get(key), kind):
            raise InvalidDocument(f"{path}: {key!r} is missing or not a {kind.__name__}")
    inputs = {c.name: c for c in (_column(path, r) for r in raw["input"])}
    outputs = {c.name: c for c in (_column(path, r) for r in raw["output"])}
    missing = [name for name in raw["required"] if not isinstance(name, str) or name not in inputs]
    if missing:
        raise InvalidDocument(f"{path}: required field {files.shown(missing[0])} is not an input")
    return Api(path.stem, inputs, outputs, tuple(raw["required"]), raw["db"], raw["function"],
               bool(raw.get("returns_count")))


def _bound(value: Any, row: Mapping[str, Any], default: int) -> int:
    """STAR's Min/Max: a number, a function of the row drawn so far, or absent (0 and 100)."""
    if callable(value):
        return value(row)
    return default if value is None else value


def _draw(column: Column, row: dict[str, Any], rng: random.Random) -> None:
    """Add a random value for ``column`` to ``row`` as STAR's generator did (types, Enabled, Min/Max)."""
    if callable(column.enabled) and not column.enabled(row):
        return
    if column.type == "Integer":
        low = _bound(column.minimum, row, 0)
        high = _bound(column.maximum, row, 100)
        row[column.name] = rng.randint(low, high)
    elif column.type == "Categorical":
        value = rng.choice(column.categories)
        row[column.name] = list(value) if isinstance(value, tuple) else value
    elif column.type == "Boolean":
        row[column.name] = rng.choice([False, True])
    else:
        raise ValueError(f"unknown type {column.type!r} for field {column.name!r}")


def load_database(path: Path, rows: Optional[int] = None, seed: Optional[int] = None) -> Database:
    """Read a database definition and draw its rows; the seed defaults to one derived from the file name."""
    raw = files.read_json(path)
    if not isinstance(raw, list):
        raise InvalidDocument(f"{path}: expected a JSON list of fields")
    columns = tuple(_column(path, r) for r in raw)
    count = rows if rows is not None else ROWS
    rng = random.Random(seed if seed is not None else zlib.crc32(path.stem.encode()))
    database = Database(path.stem, columns)
    for number in range(count):
        row: dict[str, Any] = {"id": number}
        for column in columns:
            try:
                _draw(column, row, rng)
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                raise InvalidDocument(f"{path}: field {files.shown(column.name)}: "
                                      f"{files.cut(str(exc))}") from None
        database.rows.append(row)
    return database


# --- constraints -----------------------------------------------------------------------------------------

ConstraintInput = Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]


def _literal(node: ast.AST, name: str, expression: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, RecursionError):
        raise InvalidInput(f"not a plain value: {_short(expression)}", name) from None


def _short(text: str) -> str:
    """Enough of a bad value to recognise it; an error message never echoes a page of input."""
    return text if len(text) <= 60 else text[:57] + "..."


def parse_constraint(name: str, expression: str) -> Constraint:
    """Parse STAR's logged form: a Python literal, or ``api.<op>(<literal>)``, or ``api.is_not(<that>)``."""
    if not isinstance(expression, str):
        raise InvalidInput("expected a constraint expression (text)", name)
    try:
        node = ast.parse(expression.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise InvalidInput(f"cannot read constraint {_short(expression)!r}", name) from None
    negated = False
    if _api_call(node) == "is_not":
        negated, node = True, node.args[0]
    op = _api_call(node)
    if op is None:
        if negated:  # STAR's is_not wanted a condition; wizards also gave a value, meaning "not equal"
            return Constraint(name, "equals", _literal(node, name, expression), True)
        return Constraint(name, "equals", _literal(node, name, expression))
    if op not in OPS:
        raise InvalidInput(f"unknown condition api.{op}", name)
    return Constraint(name, op, _literal(node.args[0], name, expression), negated)


def _api_call(node: ast.AST) -> Optional[str]:
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "api"
            and len(node.args) == 1 and not node.keywords):
        return node.func.attr
    return None


def _check_value(api: Api, constraint: Constraint) -> None:
    """A value must fit the field's type: this is what will become a 400 naming the field."""
    column = api.inputs.get(constraint.field)
    if column is None:
        raise InvalidInput(f"no such field in API {api.name!r}", constraint.field)
    if constraint.op not in OPS:
        raise InvalidInput(f"unknown condition {constraint.op!r}", constraint.field)
    arity = OPS[constraint.op][0]
    values = constraint.value if arity == "list" else [constraint.value]
    if arity == "list" and not isinstance(constraint.value, (list, tuple)):
        raise InvalidInput(f"api.{constraint.op} needs a list of values", constraint.field)
    for value in values:
        if column.type == "Integer":
            ok = isinstance(value, int) and not isinstance(value, bool)
            expected = "a whole number"
        elif column.type == "Boolean":
            ok, expected = isinstance(value, bool), "true or false"
        else:
            ok, expected = isinstance(value, str), "text"
        if not ok and column.type in FREE_TEXT and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            raise InvalidInput(f"expected {expected}, got {value!r}", constraint.field)
        if column.type in CHOICES and column.categories and value not in column.categories:
            shown = ", ".join(str(c) for c in column.categories[:8])
            more = ", ..." if len(column.categories) > 8 else ""
            raise InvalidInput(f"{value!r} is not one of the choices ({shown}{more})", constraint.field)
    if constraint.op in ORDERING and column.type != "Integer":
        raise InvalidInput(f"api.{constraint.op} compares numbers; this field is {column.type}",
                           constraint.field)


def constraints_from(raw: ConstraintInput) -> list[Constraint]:
    """Accept STAR's logged list of one-entry dicts or one dict; several entries for a field all apply."""
    entries = [raw] if isinstance(raw, Mapping) else list(raw)
    found = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise InvalidInput(f"each constraint must map a field to a condition, got {entry!r}")
        for name, expression in entry.items():
            parsed = expression if isinstance(expression, Constraint) else parse_constraint(name, expression)
            found.append(parsed)
    return found


def form_kind(column: Column) -> str:
    """How the wizard's form shows a field: drop-down choices, a number, a list's members, yes/no or text."""
    strings = [c for c in column.categories or () if isinstance(c, str)]
    if column.type == "RequestType":
        return "request"
    if column.type in CHOICES and strings:
        return "choice"
    if column.type in MULTI and strings:
        return "multi"
    return {"Integer": "number", "Boolean": "boolean"}.get(column.type, "text")


def literal(value: Any) -> str:
    """A value as STAR's logged constraints write it: ``"Monday"``, ``21``, ``True``, ``["Uber","Lyft"]``."""
    if isinstance(value, bool) or isinstance(value, int):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(literal(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def expression(op: str, value: Any) -> str:
    """One condition in STAR's logged form: a plain value for ``equals``, else ``api.<op>(<value>)``."""
    return literal(value) if op == "equals" else f"api.{op}({literal(value)})"


def check_repeats(constraints: Sequence[Constraint]) -> None:
    """A query asks each thing once: a field with two equalities, two lower or two upper bounds, or the
    same condition twice, is an ``InvalidInput`` naming the field (STAR's form sent such queries: "Old Town
    Inn" and "Hyatt Hotel" as one hotel's name)."""
    seen: dict[tuple, Constraint] = {}
    for constraint in constraints:
        kind = None if constraint.negated else ONE_PER_FIELD.get(constraint.op)
        key = ((constraint.field, kind) if kind is not None else
               (constraint.field, constraint.op, constraint.negated, repr(constraint.value)))
        if key in seen:
            what = f"two conditions of one kind ({kind})" if kind else "the same condition twice"
            raise InvalidInput(f"{what} in one query: keep one", constraint.field)
        seen[key] = constraint


class KnowledgeBase:
    """Every API and database under STAR's ``apis/`` folder (``apis/*.json`` and ``dbs/*.json``)."""

    def __init__(self, apis: Mapping[str, Api], databases: Mapping[str, Database]):
        self.apis = dict(apis)
        self.databases = dict(databases)

    @classmethod
    def load(cls, root: Path) -> "KnowledgeBase":
        if not (root / "apis").is_dir() or not (root / "dbs").is_dir():
            raise InvalidDocument(f"{root}: expected apis/ and dbs/ folders")
        apis = {p.stem: load_api(p) for p in sorted((root / "apis").glob("*.json"))}
        databases = {p.stem: load_database(p) for p in sorted((root / "dbs").glob("*.json"))}
        for api in apis.values():
            if api.db != "null" and api.db not in databases:
                raise InvalidDocument(f"{root / 'apis' / (api.name + '.json')}: no database {api.db!r}")
        return cls(apis, databases)

    def api(self, name: str) -> Api:
        if name not in self.apis:
            raise InvalidInput(f"no such API {name!r}", "api")
        return self.apis[name]

    def validate(self, api_name: str, raw: ConstraintInput) -> list[Constraint]:
        """Parse and check constraints against the API's form; required fields must be there."""
        api = self.api(api_name)
        constraints = constraints_from(raw)
        for constraint in constraints:
            _check_value(api, constraint)
        given = {c.field for c in constraints}
        for name in api.required:
            if name not in given:
                raise InvalidInput("required but not provided", name)
        return constraints

    def query(self, api_name: str, raw: ConstraintInput,
              rows: Iterable[Mapping[str, Any]] = ()) -> QueryResult:
        """Every row of the API's database (plus ``rows``, e.g. ones a log shows) meeting all constraints."""
        api = self.api(api_name)
        constraints = self.validate(api_name, raw)
        if not api.searchable:
            # pages call turkflow.protocols.star.outcomes.call, which answers these APIs
            raise InvalidInput(f"API {api_name!r} books or checks something; it has no rows to search", "api")
        candidates = list(self.databases[api.db].rows) + list(rows)
        found = [row for row in candidates if all(c.holds(row) for c in constraints)]
        found.sort(key=lambda row: (row.get("id") is None, row.get("id", 0)))
        return QueryResult(api_name, tuple(found))


def matches(constraints: Iterable[Constraint], row: Mapping[str, Any]) -> bool:
    """Whether one row meets every constraint: the test a logged result must pass."""
    return all(c.holds(row) for c in constraints)
