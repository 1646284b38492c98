"""The wizard's search: Frames' search interface over the requester's database (section 3.3 and 3.4).

A search holds conditions on searchable fields and a sort; it shows up to 10 items. When it finds nothing,
sometimes (a set probability, drawn from the caller's ``random.Random``) it also shows suggestions, each
made by relaxing one condition. Frames made suggestions random on purpose: the point was to learn *when*
a wizard recommends, not a recommender. Every result here is deterministic given the database, the search
and the rng, so a logged search can be replayed.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from turkflow.errors import InvalidInput
from turkflow.protocols.frames.database import Constraint, Database, to_json

LIMIT = 10  # Frames showed up to 10 results per search
MAX_FLEXIBLE = 7  # days a date condition may be widened by, at most
DEFAULT_SUGGESTION_PROBABILITY = 0.5


@dataclass(frozen=True)
class Sort:
    field: str
    descending: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "descending": self.descending}


@dataclass(frozen=True)
class Search:
    """What the wizard asked: every condition must hold; results come sorted by ``sort``. ``flexible``
    widens every date condition by that many days each way (Frames' ARE_DATES_FLEXIBLE, 2 days): "leaving
    on or after 10 August, flexible by 2" finds packages leaving from 8 August."""

    constraints: tuple[Constraint, ...]
    sort: Sort
    flexible: int = 0

    @property
    def conditions(self) -> tuple[Constraint, ...]:
        """The conditions as run: the dates widened by ``flexible`` days."""
        if not self.flexible:
            return self.constraints
        days = dt.timedelta(days=self.flexible)
        run: list[Constraint] = []
        for c in self.constraints:
            if not isinstance(c.value, dt.date):
                run.append(c)
            elif c.op == "is":
                run += [Constraint(c.field, "at_least", _moved(c.value, -days)),
                        Constraint(c.field, "at_most", _moved(c.value, days))]
            else:
                run.append(Constraint(c.field, c.op, _moved(c.value, -days if c.op == "at_least" else days)))
        return tuple(run)


def _moved(day: dt.date, by: dt.timedelta) -> dt.date:
    """``day`` moved ``by``, stopping at the calendar's ends (a search on 9999-12-31 asks nothing later)."""
    try:
        return day + by
    except OverflowError:
        return dt.date.max if by > dt.timedelta(0) else dt.date.min


@dataclass(frozen=True)
class Suggestion:
    """What relaxing one condition finds. ``relaxed`` is the wizard's condition; ``instead`` is the nearest
    condition that finds something (a budget raised to the cheapest such item), or ``None`` when the
    condition is dropped (any destination)."""

    relaxed: Constraint
    instead: Optional[Constraint]
    ids: tuple[Any, ...]
    total: int


@dataclass(frozen=True)
class SearchResult:
    ids: tuple[Any, ...]  # at most LIMIT, in the search's order
    total: int  # how many items meet every condition
    suggestions: tuple[Suggestion, ...] = ()
    offered: bool = False  # whether the draw allowed suggestions (only drawn when nothing is found)


def parse_search(db: Database, raw: Mapping[str, Any], sort: Any = None, descending: Any = False,
                 flexible: Any = 0, most_flexible: int = MAX_FLEXIBLE) -> Search:
    """Read the wizard's form: ``{field: value}`` means "is"; ``{field: {"at_least": v, "at_most": w}}``
    a range; ``flexible`` days (0 to ``most_flexible``) widen the dates. Only searchable fields; values
    are converted to the column's type. The default sort is the first ordered column named ``price`` or,
    failing that, the item id. Errors name the field."""
    if isinstance(flexible, str) and flexible.strip().isdecimal():
        flexible = int(flexible)
    if flexible in (None, ""):
        flexible = 0
    if isinstance(flexible, bool) or not isinstance(flexible, int) or not 0 <= flexible <= most_flexible:
        raise InvalidInput(f"expected a whole number of days from 0 to {most_flexible}", "flexible")
    if not isinstance(raw, Mapping):
        raise InvalidInput("expected the search's fields as an object", "constraints")
    constraints = []
    for name, given in raw.items():
        column = db.column(name)
        if not column.searchable:
            raise InvalidInput("not a search field", column.name)
        if isinstance(given, Mapping):
            if not given:
                raise InvalidInput("give at_least, at_most or is", column.name)
            for op, value in given.items():
                constraints.append(db.constraint(column.name, op, value))
        else:
            constraints.append(db.constraint(column.name, "is", given))
    return Search(tuple(constraints), parse_sort(db, sort, descending), flexible)


def parse_sort(db: Database, name: Any = None, descending: Any = False) -> Sort:
    if name in (None, ""):
        name = "price" if "price" in db.columns and db.columns["price"].ordered else "id"
    column = db.column(name)
    if not (column.ordered or column.type == "text" or column.name == "id"):
        raise InvalidInput("results sort by a number, a date or text", "sort")
    if not isinstance(descending, bool):
        raise InvalidInput("expected true or false", "descending")
    return Sort(column.name, descending)


def _ordered(items: Iterable[Mapping[str, Any]], sort: Sort) -> list[Mapping[str, Any]]:
    """Sorted by the field (missing values last either way), ties by id so the order never depends on the
    file's order of equal items."""
    present = [i for i in items if i.get(sort.field) is not None]
    missing = [i for i in items if i.get(sort.field) is None]
    present.sort(key=lambda i: _key(i["id"]))
    present.sort(key=lambda i: _key(i[sort.field]), reverse=sort.descending)
    missing.sort(key=lambda i: _key(i["id"]))
    return present + missing


def _key(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


def _nearest(condition: Constraint, items: Sequence[Mapping[str, Any]]) -> Optional[Constraint]:
    """The least relaxation of ``condition`` that admits one of ``items`` (each fails only it)."""
    if condition.op == "is":
        return None
    values = [i[condition.field] for i in items if i.get(condition.field) is not None]
    if not values:
        return None
    bound = min(values) if condition.op == "at_most" else max(values)
    return Constraint(condition.field, condition.op, bound)


def run_search(db: Database, search: Search, rng: Optional[random.Random] = None,
               suggestion_probability: float = DEFAULT_SUGGESTION_PROBABILITY,
               limit: int = LIMIT) -> SearchResult:
    """Up to ``limit`` matching items; when none, with ``suggestion_probability`` (drawn from ``rng``),
    one suggestion per condition whose relaxation finds something, in the search's order of conditions.

    One pass over the items counts each item's failed conditions: an item failing exactly one condition
    is what relaxing that condition would find, so suggestions cost no second search.
    """
    if not 0.0 <= suggestion_probability <= 1.0:
        raise InvalidInput("a probability is between 0 and 1", "suggestion_probability")
    conditions = search.conditions
    found: list[dict[str, Any]] = []
    near: list[list[dict[str, Any]]] = [[] for _ in conditions]
    for item in db.items:
        failed = -1
        for index, condition in enumerate(conditions):
            if not condition.holds(item):
                if failed >= 0:
                    failed = -2
                    break
                failed = index
        if failed == -1:
            found.append(item)
        elif failed >= 0:
            near[failed].append(item)
    if found:
        return SearchResult(tuple(i["id"] for i in _ordered(found, search.sort)[:limit]), len(found))
    draw = rng if rng is not None else random.Random(0)
    if draw.random() >= suggestion_probability:
        return SearchResult((), 0)
    suggestions = []
    for condition, failing_only_it in zip(conditions, near):
        if not failing_only_it:
            continue
        instead = _nearest(condition, failing_only_it)
        admitted = failing_only_it if instead is None else [i for i in failing_only_it if instead.holds(i)]
        ordered = _ordered(admitted, search.sort)
        ids = tuple(i["id"] for i in ordered[:limit])
        suggestions.append(Suggestion(condition, instead, ids, len(admitted)))
    return SearchResult((), 0, tuple(suggestions), True)


def describe(suggestion: Suggestion, labels: Optional[Mapping[str, str]] = None) -> str:
    """The line a wizard's page shows, e.g. "price at most 1730 instead of 1500: 2 items", each field
    under its label (``labels``) if it has one."""
    old = suggestion.relaxed
    name = (labels or {}).get(old.field, old.field)
    if suggestion.instead is None:
        change = f"any {name} instead of {to_json(old.value)}"
    else:
        change = f"{name} {old.op.replace('_', ' ')} {to_json(suggestion.instead.value)} " \
                 f"instead of {to_json(old.value)}"
    count = f"{suggestion.total} item" + ("" if suggestion.total == 1 else "s")
    return f"{change}: {count}"
