"""User goals from templates, each with a probability of success, as Frames built its tasks (section 3.2).

A template's slots are drawn from the database, so every goal reads like something the database could
hold. With probability ``p`` a goal is drawn from one item (so its first constraints match at least that
item); otherwise one slot is changed until the constraints match nothing: a budget just under the
cheapest package the other slots allow, a destination none of them goes to. Frames did this so users must
compromise or give up; an unsuccessful user either ends the dialog or follows the template's alternate
goal ("try increasing your budget by $200").
"""

from __future__ import annotations

import datetime as dt
import math
import random
import string
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols.files import cut, shown
from turkflow.protocols.frames.database import Constraint, Database, to_json

GENERIC, ROLE_PLAY = "generic", "role_play"
END = "If nothing matches what you want, you may end the conversation."
ATTEMPTS = 50  # fresh items to start a failing goal from before the template is declared unable to fail


@dataclass(frozen=True)
class Slot:
    """A placeholder of the template's text and the constraint it becomes. ``step`` rounds drawn values
    (budgets to 100; for dates, days) and ``slack`` gives a successful goal up to that many steps of room
    beyond the item it was drawn from, so a budget is not always exactly a package's price."""

    name: str
    field: str
    op: str
    step: float = 1
    slack: int = 0


@dataclass(frozen=True)
class Alternate:
    """What an unsuccessful user tries next: ``change`` adds an amount to a slot's value (a budget +200, a
    date + days); ``drop`` forgets slots (any destination)."""

    text: str
    change: Mapping[str, float] = field(default_factory=dict)
    drop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Template:
    name: str
    text: str
    slots: tuple[Slot, ...]
    probability: float
    character: str = ""  # a role-play template's character; generic ones let users make their own
    personalities: tuple[str, ...] = ()
    alternate: Optional[Alternate] = None

    @property
    def kind(self) -> str:
        return ROLE_PLAY if self.character else GENERIC


@dataclass(frozen=True)
class AlternateGoal:
    text: str
    constraints: tuple[Constraint, ...]
    matches: int


@dataclass(frozen=True)
class Goal:
    """One user's task. ``feasible`` is the draw (the first constraints match ``matches`` > 0 items);
    ``probability`` is the one it was drawn at, for the analysis."""

    template: str
    kind: str
    text: str
    values: Mapping[str, Any]
    constraints: tuple[Constraint, ...]
    feasible: bool
    matches: int
    probability: float
    character: str = ""
    personality: str = ""
    alternate: Optional[AlternateGoal] = None

    @property
    def on_failure(self) -> str:
        return "alternate" if self.alternate else "end"

    @property
    def instructions(self) -> str:
        """What the user's page shows: the goal, then what to do if nothing matches."""
        parts = [self.character, self.text]
        if self.personality:
            parts.append(f"Your personality: {self.personality}.")
        parts.append(self.alternate.text if self.alternate else END)
        return "\n".join(p for p in parts if p)

    def as_dict(self) -> dict[str, Any]:
        """The JSON a task or conversation stores; ``goal_from_dict`` reads it back."""
        alternate = None
        if self.alternate:
            alternate = {"text": self.alternate.text, "matches": self.alternate.matches,
                         "constraints": [c.as_dict() for c in self.alternate.constraints]}
        return {"template": self.template, "kind": self.kind, "text": self.text,
                "values": {k: to_json(v) for k, v in self.values.items()},
                "constraints": [c.as_dict() for c in self.constraints], "feasible": self.feasible,
                "matches": self.matches, "probability": self.probability, "character": self.character,
                "personality": self.personality, "alternate": alternate, "on_failure": self.on_failure,
                "instructions": self.instructions}


MEETS_GOAL, MEETS_ALTERNATE, BREAKS_GOAL = "meets_goal", "meets_alternate", "breaks_goal"


@dataclass(frozen=True)
class Booking:
    """A booked item judged against the user's goal: the goal's conditions it breaks and, when the goal
    has an alternate, the alternate's (None without one). A goal drawn to fail breaks on every item, so
    booking anything for it is a compromise the analysis counts."""

    broken: tuple[Constraint, ...]
    broken_alternate: Optional[tuple[Constraint, ...]]

    @property
    def outcome(self) -> str:
        if not self.broken:
            return MEETS_GOAL
        return MEETS_ALTERNATE if self.broken_alternate == () else BREAKS_GOAL


def judge_booking(goal: Goal, item: Mapping[str, Any]) -> Booking:
    alternate = goal.alternate
    broken = None if alternate is None else tuple(c for c in alternate.constraints if not c.holds(item))
    return Booking(tuple(c for c in goal.constraints if not c.holds(item)), broken)


# ---- reading templates ---------------------------------------------------------------------------------


def _placeholders(text: str, where: str) -> set[str]:
    """Names in ``{...}``; attribute access, indexing and format specs are refused (text, not code)."""
    names = set()
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise InvalidDocument(f"{where}: text: {exc}") from None
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise InvalidDocument(f"{where}: text: write a slot as {{name}}, found {{{cut(name)}}}")
        names.add(name)
    return names


def _number(raw: Any, where: str, name: str, low: float = 0, whole: bool = False) -> Any:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or (whole and not isinstance(raw, int)):
        raise InvalidDocument(f"{where}: {name}: expected a {'whole ' if whole else ''}number, "
                              f"got {shown(raw)}")
    if raw < low:
        raise InvalidDocument(f"{where}: {name}: must be at least {low}")
    return raw


def parse_template(raw: Any, db: Database, where: str) -> Template:
    """One template from its JSON/YAML mapping, checked against the database's columns."""
    if not isinstance(raw, Mapping):
        raise InvalidDocument(f"{where}: expected a mapping with name, text, slots, probability")
    known = {"name", "text", "slots", "probability", "character", "personalities", "alternate"}
    extra = sorted(set(raw) - known)
    if extra:
        raise InvalidDocument(f"{where}: unknown key {shown(str(extra[0]))}")
    name, text = raw.get("name"), raw.get("text")
    if not isinstance(name, str) or not name.strip():
        raise InvalidDocument(f"{where}: name: required text")
    where = f"{where} ({cut(name)})"
    if not isinstance(text, str) or not text.strip():
        raise InvalidDocument(f"{where}: text: required")
    probability = _number(raw.get("probability"), where, "probability")
    if probability > 1:
        raise InvalidDocument(f"{where}: probability: must be between 0 and 1")
    slots_raw = raw.get("slots")
    if not isinstance(slots_raw, Mapping) or not slots_raw:
        raise InvalidDocument(f"{where}: slots: expected a mapping of slot name to field and op")
    slots = []
    for slot_name, spec in slots_raw.items():
        at = f"{where}: slot {shown(slot_name)}"
        if not isinstance(spec, Mapping) or set(spec) - {"field", "op", "step", "slack"}:
            raise InvalidDocument(f"{at}: expected field, op and optionally step and slack")
        field_name = spec.get("field")
        if not isinstance(field_name, str):
            raise InvalidDocument(f"{at}: field: expected the name of a column, got {shown(field_name)}")
        column = db.columns.get(field_name)
        if column is None:
            raise InvalidDocument(f"{at}: field {shown(field_name)} is not a column of the database")
        op = spec.get("op", "is")
        if op not in ("is", "at_least", "at_most") or (op != "is" and not column.ordered):
            raise InvalidDocument(f"{at}: op {shown(op)} does not fit a {column.type} field")
        step = _number(spec.get("step", 1), at, "step", low=1e-9)
        slack = _number(spec.get("slack", 0), at, "slack", whole=True)
        slots.append(Slot(str(slot_name), column.name, op, step, slack))
    names = {s.name for s in slots}
    used = _placeholders(text, where)
    if used - names:
        raise InvalidDocument(f"{where}: text: {{{sorted(used - names)[0]}}} is not a slot")
    if names - used:
        raise InvalidDocument(f"{where}: slot {shown(sorted(names - used)[0])} does not appear in the text")
    character = raw.get("character") or ""
    personalities = raw.get("personalities") or []
    if not isinstance(character, str):
        raise InvalidDocument(f"{where}: character: expected text")
    if not isinstance(personalities, list) or not all(isinstance(p, str) for p in personalities):
        raise InvalidDocument(f"{where}: personalities: expected a list of texts")
    return Template(name, text.strip(), tuple(slots), float(probability), character.strip(),
                    tuple(personalities), _alternate(raw.get("alternate"), slots, where))


def _alternate(raw: Any, slots: Sequence[Slot], where: str) -> Optional[Alternate]:
    if raw is None:
        return None
    where = f"{where}: alternate"
    if not isinstance(raw, Mapping) or not isinstance(raw.get("text"), str) or set(raw) - {"text", "change",
                                                                                           "drop"}:
        raise InvalidDocument(f"{where}: expected text and optionally change and drop")
    by_name = {s.name: s for s in slots}
    change = raw.get("change") or {}
    drop = raw.get("drop") or []
    if not isinstance(change, Mapping) or not isinstance(drop, list):
        raise InvalidDocument(f"{where}: change is a mapping of slot to amount, drop a list of slots")
    for name, amount in change.items():
        if not isinstance(name, str) or name not in by_name or by_name[name].op == "is":
            raise InvalidDocument(f"{where}: change: {shown(name)} is not a slot with a range (at_least, "
                                  "at_most)")
        _number(amount, where, f"change {shown(name)}", low=-math.inf)
    for name in drop:
        if not isinstance(name, str) or name not in by_name:
            raise InvalidDocument(f"{where}: drop: {shown(name)} is not a slot")
    used = _placeholders(raw["text"], where)
    bad = sorted(used - (set(by_name) - set(drop)))
    if bad:
        raise InvalidDocument(f"{where}: text: {{{bad[0]}}} is not a slot the alternate keeps")
    return Alternate(raw["text"].strip(), dict(change), tuple(drop))


# ---- drawing goals -------------------------------------------------------------------------------------


def _shift(value: Any, amount: float) -> Any:
    if isinstance(value, dt.date):
        return value + dt.timedelta(days=int(amount))
    return value + amount


def _tidy(value: Any, kind: str) -> Any:
    """Arithmetic on steps can leave 1500.0000001 or 1500.0 in a whole-number column."""
    if kind == "integer":
        return int(round(value))
    if isinstance(value, float):
        rounded = round(value, 6)
        return int(rounded) if rounded.is_integer() else rounded
    return value


def _room(slot: Slot, value: Any, kind: str, rng: random.Random) -> Any:
    """A successful goal's value for ``slot``, drawn from an item's ``value``: the item still qualifies."""
    if slot.op == "is":
        return value
    extra = rng.randint(0, slot.slack) * slot.step
    if isinstance(value, dt.date):
        return _shift(value, extra if slot.op == "at_most" else -extra)
    if slot.op == "at_most":
        return _tidy(math.ceil(value / slot.step - 1e-9) * slot.step + extra, kind)
    return _tidy(math.floor(value / slot.step + 1e-9) * slot.step - extra, kind)


def _fold(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


class Facts:
    """What drawing goals asks of the database again and again, computed once per column or template:
    each column's distinct values and range, each template's items holding every slot's field."""

    def __init__(self, db: Database):
        self.db = db
        self._values: dict[str, list[Any]] = {}
        self._complete: dict[str, list[dict[str, Any]]] = {}
        self._indexes: dict[str, dict[Any, list[dict[str, Any]]]] = {}

    def values(self, name: str) -> list[Any]:
        if name not in self._values:
            self._values[name] = self.db.values(name)
        return self._values[name]

    def span(self, name: str) -> tuple[Any, Any]:
        values = self.values(name)
        return values[0], values[-1]

    def matching(self, constraints: Sequence[Constraint]) -> list[dict[str, Any]]:
        """``db.matching``, starting from the fewest items one "is" condition allows (an index per field):
        on 100,000 packages a goal's origin and destination leave a few hundred to check."""
        equal = [c for c in constraints if c.op == "is"]
        if not equal:
            return self.db.matching(constraints)
        pools = [self._index(c.field).get(_fold(c.value), []) for c in equal]
        smallest = min(pools, key=len)
        return [item for item in smallest if all(c.holds(item) for c in constraints)]

    def _index(self, name: str) -> dict[Any, list[dict[str, Any]]]:
        if name not in self._indexes:
            index: dict[Any, list[dict[str, Any]]] = {}
            for item in self.db.items:
                if item.get(name) is not None:
                    index.setdefault(_fold(item[name]), []).append(item)
            self._indexes[name] = index
        return self._indexes[name]

    def complete(self, template: Template) -> list[dict[str, Any]]:
        if template.name not in self._complete:
            fields = [s.field for s in template.slots]
            self._complete[template.name] = [i for i in self.db.items if all(i.get(f) is not None
                                                                               for f in fields)]
        return self._complete[template.name]


def _beyond(slot: Slot, others: Sequence[Mapping[str, Any]], facts: Facts, rng: random.Random) -> Any:
    """A value for ``slot`` that no item in ``others`` (those meeting the other slots) meets, or None.
    Drawn close to what the database holds and within the range its items span, so the goal stays
    believable: a budget just under the cheapest package, never a 5.5-star hotel."""
    column = facts.db.columns[slot.field]
    held = [item[slot.field] for item in others if item.get(slot.field) is not None]
    if slot.op == "is":
        taken = {_fold(v) for v in held}
        pool = [v for v in facts.values(slot.field) if _fold(v) not in taken]
        return rng.choice(pool) if pool else None
    if not held:
        return None
    low, high = facts.span(slot.field)
    extra = rng.randint(0, slot.slack) * slot.step
    if slot.op == "at_most":
        edge = min(held)
        if isinstance(edge, dt.date):
            tries = [_shift(edge, -1 - extra), _shift(edge, -1)]
        else:
            below = math.ceil(edge / slot.step - 1) * slot.step
            tries = [_tidy(below - extra, column.type), _tidy(below, column.type)]
        fits = [v for v in tries + [low] if low <= v < edge]  # the cheapest of all, if nothing rounder
    else:
        edge = max(held)
        if isinstance(edge, dt.date):
            tries = [_shift(edge, 1 + extra), _shift(edge, 1)]
        else:
            above = math.floor(edge / slot.step + 1) * slot.step
            tries = [_tidy(above + extra, column.type), _tidy(above, column.type)]
        fits = [v for v in tries + [high] if edge < v <= high]
    return fits[0] if fits else None


def _constraints(template: Template, values: Mapping[str, Any], skip: Sequence[str] = ()) -> tuple:
    return tuple(Constraint(s.field, s.op, values[s.name]) for s in template.slots if s.name not in skip)


def show(value: Any) -> str:
    """A slot value as the user reads it: 13 August 2025, 1,700, yes."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dt.date):
        return f"{value:%A} {value.day} {value:%B %Y}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return str(value)


def _goal(template: Template, facts: Facts, values: dict[str, Any], feasible: bool, probability: float,
          rng: random.Random) -> Goal:
    db = facts.db
    constraints = _constraints(template, values)
    matches = len(facts.matching(constraints))
    alternate = None
    if template.alternate:
        changed = dict(values)
        for name, amount in template.alternate.change.items():
            kind = db.columns[next(s.field for s in template.slots if s.name == name)].type
            changed[name] = _tidy(_shift(changed[name], amount), kind)
        kept = _constraints(template, changed, template.alternate.drop)
        text = template.alternate.text.format_map({k: show(v) for k, v in changed.items()})
        alternate = AlternateGoal(text, kept, len(facts.matching(kept)))
    personality = rng.choice(template.personalities) if template.personalities else ""
    text = template.text.format_map({k: show(v) for k, v in values.items()})
    return Goal(template.name, template.kind, text, values, constraints, feasible, matches, probability,
                template.character, personality, alternate)


def draw_goal(template: Template, db: Database, feasible: bool, rng: random.Random,
              probability: Optional[float] = None, facts: Optional[Facts] = None) -> Goal:
    """One goal whose first constraints match at least one item (``feasible``) or none."""
    facts = facts if facts is not None and facts.db is db else Facts(db)
    items = facts.complete(template)
    if not items:
        raise InvalidInput(f"no item has every field template {template.name!r} asks", "template")
    chance = template.probability if probability is None else probability
    for _ in range(ATTEMPTS if not feasible else 1):
        anchor = rng.choice(items)
        values = {s.name: _room(s, anchor[s.field], db.columns[s.field].type, rng) for s in template.slots}
        if feasible:
            return _goal(template, facts, values, True, chance, rng)
        order = list(template.slots)
        rng.shuffle(order)
        for slot in order:
            others = facts.matching(_constraints(template, values, (slot.name,)))
            value = _beyond(slot, others, facts, rng)
            if value is not None:
                values[slot.name] = value
                goal = _goal(template, facts, values, False, chance, rng)
                if goal.matches == 0:
                    return goal
                break
    raise InvalidInput(f"template {template.name!r} finds something whatever value its slots take; "
                       "it cannot make a goal that fails on this database", "template")


def generate(templates: Sequence[Template], db: Database, n: int, p: Optional[float] = None,
             rng: Optional[random.Random] = None) -> list[Goal]:
    """``n`` goals from templates chosen at random; each is feasible with probability ``p`` (or, when
    ``p`` is None, its template's own), drawn independently, so about pN match and (1-p)N do not."""
    if not templates:
        raise InvalidInput("no templates to draw goals from", "templates")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InvalidInput("expected a whole number of goals, 0 or more", "n")
    if p is not None and not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
        raise InvalidInput("a probability is between 0 and 1", "p")
    rng = rng if rng is not None else random.Random(0)
    facts = Facts(db)
    goals = []
    for _ in range(n):
        template = rng.choice(list(templates))
        chance = template.probability if p is None else float(p)
        goals.append(draw_goal(template, db, rng.random() < chance, rng, chance, facts))
    return goals


def goal_from_dict(raw: Mapping[str, Any], db: Database) -> Goal:
    """A stored goal, its constraints re-checked against the database's columns (dates become dates)."""
    try:
        constraints = tuple(db.constraint(c["field"], c["op"], c["value"]) for c in raw["constraints"])
        alternate = None
        if raw.get("alternate"):
            alt = raw["alternate"]
            alternate = AlternateGoal(alt["text"], tuple(db.constraint(c["field"], c["op"], c["value"])
                                                         for c in alt["constraints"]), int(alt["matches"]))
        if len(raw["values"]) != len(constraints):
            raise ValueError("one value per constraint")
        values = dict(zip(raw["values"], (c.value for c in constraints)))  # both in the template's order
        return Goal(raw["template"], raw["kind"], raw["text"], values, constraints, bool(raw["feasible"]),
                    int(raw["matches"]), float(raw["probability"]), raw.get("character", ""),
                    raw.get("personality", ""), alternate)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"not a stored goal ({exc})", "goal") from None
