"""Scenarios and nudges for STAR dialogs, drawn from the task's own knowledge base (issue 24, item 1).

A user told only "You want help with this: doctor schedule." invents a doctor the knowledge base does not
hold, and the wizard can do nothing with it. STAR's scenarios named the entities and values to use, and
its user guide nudged the user during the dialog ("change your mind about ...", "your hotel texts you:
..."). Here every scenario is made from the task's API and database:

- a *search* task names values of one database row (so a query finds it), or, unhappy, a combination no
  row has (so the user hears "nothing found" and must loosen a wish);
- a task whose API *books or checks* names entities from the form's choices (a doctor, a venue, a hotel)
  and ids of the database's rows; unhappy, the scenario forces the API's "no" answer
  (``outcomes.possible``) for the request it names, so the user must react (``forced_answer``);
- the templates (``scenarios.yaml``, ours: only their shapes follow STAR's training split) give the
  user's task, the wizard's per-dialog facts and the nudges, whose placeholders take the scenario's values
  and a reason drawn per conversation. A nudge is given when the dialog's state calls for it (after the
  wizard reported an answer, after an unwelcome one, after the user said N things; ``due_nudges``), never
  at a fixed turn number.

Everything is drawn from a ``random.Random`` the caller seeds per conversation. This module takes plain
values (a task's ``star`` mapping, a ``KnowledgeBase``) and returns plain values; it imports no framework.
"""

from __future__ import annotations

import json
import random
import re
import string
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols import files
from turkflow.protocols.star import outcomes
from turkflow.protocols.star.kb import CHOICES, FREE_TEXT, Api, Column, KnowledgeBase, QueryResult

TEMPLATES = Path(__file__).with_name("scenarios.yaml")
NUDGE_WHEN = ("start", "result", "unhappy_result", "turns")
NUDGE_KINDS = ("any", "detail", "compare", "change", "conflict", "unhappy", "multi", "close")
# STAR's training split: 335 of its 5,388 dialogues say IntroducesConflicts, drawn apart from Happy (161 of
# the happy ones, 174 of the unhappy); a batch takes this share unless it asks for another
CONFLICTS = round(335 / 5388, 3)
UNHAPPY_TRIES = 80  # random value combinations tried for a search nobody's row meets


@lru_cache(maxsize=1)
def templates() -> dict[str, Any]:
    """The template file, read once through the safe reader, with its shape checked."""
    data = files.read_yaml(TEMPLATES)
    for key in ("people", "values", "user_tasks", "unhappy", "wizard_facts", "wizard_task", "days", "hours",
                "reasons", "nudges", "chains", "unhappy_answer", "task_questions"):
        if key not in data:
            raise InvalidDocument(f"{TEMPLATES}: {key!r} is missing")
    for nudge in data["nudges"]:
        texts = nudge.get("texts")
        if nudge.get("when") not in NUDGE_WHEN or not texts or not all(isinstance(t, str) for t in texts) \
                or nudge.get("kind", "any") not in NUDGE_KINDS:
            raise InvalidDocument(f"{TEMPLATES}: nudge {files.shown(nudge)}: needs `texts`, `when` one of "
                                  f"{', '.join(NUDGE_WHEN)} and `kind` one of {', '.join(NUDGE_KINDS)}")
    return data


# ---- values --------------------------------------------------------------------------------------------


def readable(column: Column) -> str:
    """A field as a person says it: its ReadableName, else its name split ("StartTimeHour" -> "start time
    hour")."""
    if column.readable and column.readable != column.name:
        return column.readable.lower()
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", column.name).lower()


def shown(value: Any) -> str:
    """A value as a scenario says it: yes/no for booleans, lists joined."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def constraint_of(column: Column, value: Any) -> str:
    """A value as STAR's logged constraint (what the wizard's form sends for it)."""
    if column.type == "Integer":
        return str(int(value))
    if column.type == "Boolean":
        return "True" if value else "False"
    return json.dumps(str(value), ensure_ascii=False)


def _choices(column: Column) -> list[str]:
    return [c for c in column.categories or () if isinstance(c, str)] if column.type in CHOICES else []


def _rows(kb: KnowledgeBase, api: Api) -> list[Mapping[str, Any]]:
    database = kb.databases.get(api.db)
    return database.rows if database is not None else []


def _drawn(column: Column, api: Api, kb: KnowledgeBase, rng: random.Random, person: str) -> Any:
    """A value for one form field of a book/check API: the templates' words for free text, one of the
    form's choices, an id of one of the database's rows, a number within the field's bounds."""
    words = templates()["values"].get(column.name)
    if column.type == "RequestType":
        return None
    if words:
        return rng.choice(words)
    choices = _choices(column)
    if choices:
        return rng.choice(choices)
    if column.type == "Integer":
        rows = [r for r in _rows(kb, api) if isinstance(r.get(column.name), int)]
        if column.name == "id" and rows:
            return rng.choice(rows)[column.name]
        low = column.minimum if isinstance(column.minimum, int) else 1
        high = column.maximum if isinstance(column.maximum, int) else max(low, 10)
        return rng.randint(low, high)
    if column.type == "Boolean":
        return rng.choice([True, False])
    if column.type in FREE_TEXT and column.name.endswith("Name"):
        return person
    return None


_START = re.compile(r"^End(?=[A-Z])")


def _distinct(row: Mapping[str, Any], api: Api) -> bool:
    """No two fields with the same choices hold the same value (a flight from a city to itself)."""
    seen: dict[tuple, Any] = {}
    for column in api.inputs.values():
        key = tuple(_choices(column))
        if key and column.name in row:
            if seen.get(key) == row[column.name]:
                return False
            seen[key] = row[column.name]
    return True


def _searchable_fields(api: Api, row: Mapping[str, Any]) -> list[Column]:
    return [c for c in api.inputs.values() if c.name in row and c.name != "id"
            and (c.type == "Boolean" or (_choices(c) and isinstance(row[c.name], str)))]


def _search_constraints(api: Api, values: Mapping[str, Any]) -> list[dict[str, str]]:
    return [{name: constraint_of(api.inputs[name], value)} for name, value in values.items()]


def _plan_search(api: Api, kb: KnowledgeBase, rng: random.Random, happy: bool) -> dict[str, Any]:
    """Values of one row (a query finds it); unhappy, a combination no row has, where one exists."""
    rows = _rows(kb, api)
    row = rng.choice([r for r in rows if _distinct(r, api)] or rows)
    optional = [c for c in _searchable_fields(api, row) if c.name not in api.required]
    picked = [api.inputs[n] for n in api.required if n in row] + rng.sample(optional, min(2, len(optional)))
    values = {c.name: row[c.name] for c in picked}
    plan: dict[str, Any] = {"values": values, "unhappy": None}
    if happy:
        return plan
    candidates = [c for c in api.inputs.values() if _choices(c)]
    for _ in range(UNHAPPY_TRIES if len(candidates) >= 2 else 0):
        fields = rng.sample(candidates, min(len(candidates), rng.choice((3, 4))))
        tried = {**{n: v for n, v in values.items() if n in api.required},
                 **{c.name: rng.choice(_choices(c)) for c in fields}}
        try:
            if kb.query(api.name, _search_constraints(api, tried)).total == 0:
                plan.update(values=tried, unhappy="nothing_found")
                return plan
        except InvalidInput:
            continue
    return plan


def _outcome_constraints(api: Api, values: Mapping[str, Any], request: str) -> list[dict[str, str]]:
    found = [{n: constraint_of(api.inputs[n], v)} for n, v in values.items() if n in api.inputs]
    if any(c.type == "RequestType" for c in api.inputs.values()):
        found.append({next(c.name for c in api.inputs.values() if c.type == "RequestType"):
                      json.dumps(request)})
    return found


def says_no(answer: Mapping[str, Any]) -> bool:
    """Whether a knowledge-base answer is an unwelcome one ("Unavailable", a conflict, a failure)."""
    pattern = re.compile(templates()["unhappy_answer"])
    return any(isinstance(v, str) and pattern.search(v) for k, v in answer.items() if k != "APIName")


def _plan_outcome(api: Api, kb: KnowledgeBase, rng: random.Random, happy: bool,
                  person: str) -> dict[str, Any]:
    """Entities from the form's choices and the database's ids; unhappy, the API's "no" is forced for the
    request the scenario names (the fields that pick what is asked for: choices and ids)."""
    values: dict[str, Any] = {}
    for column in api.inputs.values():
        value = _drawn(column, api, kb, rng, person)
        start = values.get(_START.sub("Start", column.name)) if _START.match(column.name) else None
        if start is not None and start in _choices(column):  # an end after its start
            later = _choices(column)[_choices(column).index(start) + 1:]
            value = rng.choice(later[:4]) if later else start
        if value is not None:
            values[column.name] = value
    plan: dict[str, Any] = {"values": values, "unhappy": None}
    if happy or api.name not in outcomes.RULES:
        return plan
    try:
        answers = outcomes.possible(kb, api.name, _outcome_constraints(api, values, "Check"))
    except InvalidInput:
        return plan
    if any(says_no(answer) for answer, _ in answers):
        keys = {n: v for n, v in values.items() if _choices(api.inputs[n]) or n == "id"}
        plan.update(unhappy="unavailable", force={"api": api.name, "when": keys})
    return plan


def _fill(template: str, mapping: Mapping[str, Any]) -> Optional[str]:
    """The template with its placeholders filled, or None when one has no value here."""
    names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    if any(mapping.get(name) in (None, "") for name in names):
        return None
    return " ".join(template.format_map({n: shown(mapping[n]) for n in names}).split())


def _reason(slot: str, rng: random.Random) -> str:
    reasons = templates()["reasons"]
    group = ("Day" if slot == "Day" else "time" if "Time" in slot or "Hour" in slot or slot.endswith("Date")
             else "people" if slot in ("NumberGuests", "PartySize") or "Guests" in slot
             else "place" if slot in ("Name", "Location", "City") or "Location" in slot else "any")
    text = rng.choice(reasons.get(group) or reasons["any"])
    return text[0].upper() + text[1:]


def plan_task(star: Mapping[str, Any], kb: KnowledgeBase, rng: random.Random, *, happy: bool, person: str,
              today: str, now: str) -> dict[str, Any]:
    """One task's part of a scenario: the values the user wants, the user's task text, what makes it
    unhappy (``unhappy``: nothing_found, unavailable, or change), a value to change, the answer to force."""
    api = kb.api(star["api"])
    rows = _rows(kb, api)
    plan = (_plan_search(api, kb, rng, happy) if api.searchable and rows
            else _plan_outcome(api, kb, rng, happy, person))
    values = plan["values"]
    change = _change(api, kb, values, rng, star["task"]) if not happy else None
    if not happy and plan["unhappy"] is None and change is not None:
        plan["unhappy"] = "change"  # nothing to force: the user changes their mind instead
    task_readable = star["task"].replace("_", " ")
    wanted = "; ".join(f"{readable(api.inputs[n])}: {shown(v)}" for n, v in values.items()
                       if n in api.inputs and api.inputs[n].type != "RequestType") or "anything you like"
    mapping = {**values, "person": person, "today": today, "now": now, "task": task_readable,
               "wanted": wanted, "lead": star.get("user_task", f"You want help with this: {task_readable}.")}
    user_tasks = templates()["user_tasks"]
    text = _fill(user_tasks.get(star["task"], ""), mapping) if star["task"] in user_tasks else None
    if text is None:
        text = _fill(user_tasks["generic"], mapping)
    entity = next((shown(values[n]) for n in ("Name", "id", "City") if n in values), task_readable)
    if plan["unhappy"] == "change" and star["task"] not in user_tasks and star.get("unhappy_user_task"):
        text += " " + star["unhappy_user_task"]
    elif plan["unhappy"]:
        line = templates()["unhappy"][plan["unhappy"]]
        if "{wanted}" in user_tasks.get(star["task"], user_tasks["generic"]):  # said already
            line = line.replace("Ask for exactly this: {wanted}. ", "")
        text += " " + (_fill(line, {**mapping, "entity": entity}) or "")
    return {"task": star["task"], "api": api.name, "values": values, "entity": entity,
            "user_task": text.strip(), "unhappy": plan["unhappy"], "force": plan.get("force"),
            "change": change}


def _change(api: Api, kb: KnowledgeBase, values: Mapping[str, Any], rng: random.Random,
            task: str = "") -> Optional[dict]:
    """A value the user will change their mind about (one the templates allow for the task), and its new
    value (one a query still finds, for a search)."""
    allowed = templates().get("changeable", {}).get(task)
    slots = [n for n in values if n in api.inputs and len(_choices(api.inputs[n])) > 1
             and (allowed is None or n in allowed)]
    rng.shuffle(slots)
    slots.sort(key=lambda n: len(_choices(api.inputs[n])) <= 2)  # a day or a place before a yes/no
    for slot in slots:
        others = [c for c in _choices(api.inputs[slot]) if c != values[slot]]
        rng.shuffle(others)
        for new in others[:8]:
            changed = {**values, slot: new}
            if api.searchable and _rows(kb, api) and \
                    kb.query(api.name, _search_constraints(api, changed)).total == 0:
                continue
            return {"slot": slot, "readable": readable(api.inputs[slot]), "old": shown(values[slot]),
                    "new": new}
    return None


# ---- a whole scenario ------------------------------------------------------------------------------------


def chain(names: Sequence[str], count: int, n: int, rng: random.Random) -> list[str]:
    """``count`` tasks for conversation ``n``: a chain of tasks that go together (the templates' chains,
    STAR's Figure 7) whose first ``count`` are all loaded, else the loaded tasks round-robin."""
    if count == 1:
        return [names[n % len(names)]]
    loaded = set(names)
    fitting = [c for c in templates()["chains"] if len(c) >= count and all(t in loaded for t in c[:count])]
    if fitting:
        return list(rng.choice(fitting)[:count])
    return [names[(n + k) % len(names)] for k in range(count)]


def make_scenario(stars: Sequence[Mapping[str, Any]], kb_of: Callable[[Mapping[str, Any]], KnowledgeBase],
                  rng: random.Random, *, happy: bool, conflicts: bool = False) -> dict[str, Any]:
    """The scenario of one conversation over these tasks (their ``star`` mappings), drawn from ``rng``.

    Holds what ``make_scenarios`` always held (tasks, happy, multi_task, user_task, wizard_task, nudges)
    plus the values per task (``plans``), the user's details, the wizard's facts and the answers to force.
    ``conflicts`` (STAR's IntroducesConflicts, drawn apart from ``happy``): a nudge contradicts what the
    scenario first asked for (a value the user then wants changed), in a happy dialog too.
    """
    data = templates()
    person = rng.choice(data["people"])
    today, now = rng.choice(data["days"]), rng.choice(data["hours"])
    unhappy_at = rng.randrange(len(stars)) if not happy else -1
    plans = [plan_task(star, kb_of(star), rng, happy=k != unhappy_at, person=person, today=today, now=now)
             for k, star in enumerate(stars)]
    conflict = _conflict(plans, stars, kb_of, rng) if conflicts else None
    readable_tasks = [star["task"].replace("_", " ") for star in stars]
    if len(plans) == 1:
        user_task = plans[0]["user_task"]
        wizard = _fill(data["wizard_task"]["single"], {"task": readable_tasks[0]}) or ""
    else:
        user_task = " ".join(f"({k + 1}) {p['user_task']}" for k, p in enumerate(plans))
        user_task = f"You have {len(plans)} things to do in this dialog, in any order: {user_task}"
        wizard = _fill(data["wizard_task"]["multi"], {"tasks": ", ".join(readable_tasks)}) or ""
    facts = [f for f in (_fill(t, {"today": today, "now": now}) for t in data["wizard_facts"]) if f]
    return {
        "happy": all(p["unhappy"] is None for p in plans),
        "conflicts": conflict is not None,
        "conflict": conflict,
        "multi_task": len(plans) > 1,
        "user_task": user_task,
        "wizard_task": " ".join([wizard, "Assume:", *facts]) if facts else wizard,
        "wizard_facts": facts,
        "user_details": {"name": person, "today": f"{today}, {now}"},
        "plans": plans,
        "force": [p["force"] for p in plans if p.get("force")],
        "task_question": task_question(stars),
        "nudges": nudges_for(plans, stars, rng, person=person, today=today, conflict=conflict,
                             kbs=[kb_of(star) for star in stars]),
    }


def task_question(stars: Sequence[Mapping[str, Any]]) -> str:
    """The user's end-of-dialog question about the task, as STAR worded it per task."""
    questions = templates()["task_questions"]
    if len(stars) > 1:
        return questions["multi"]
    return stars[0].get("user_question") or questions.get(stars[0]["task"]) or questions["generic"]


def about_you(details: Mapping[str, Any]) -> str:
    """STAR's "About you" block of a user task (its Stage IV scenarios end with one): the user's name and the
    dialog's day and hour, as the user's page lists them beside the task."""
    lines = [f"- Your name: {details['name']}" if details.get("name") else "",
             f"- Today is {details['today']}" if details.get("today") else ""]
    return "\n".join(["About you:", *(line for line in lines if line)]) if any(lines) else ""


def _conflict(plans: Sequence[Mapping[str, Any]], stars: Sequence[Mapping[str, Any]],
              kb_of: Callable[[Mapping[str, Any]], KnowledgeBase], rng: random.Random) -> Optional[dict]:
    """The value a conflicting instruction changes: the unhappy task's own change where it has one, else a
    value of the first task that allows one (None when no task's values can change: no conflict then)."""
    for plan, star in zip(plans, stars):
        if plan.get("change"):
            return {**plan["change"], "task": plan["task"]}
    for plan, star in zip(plans, stars):
        kb = kb_of(star)
        api = kb.api(plan["api"])
        change = _change(api, kb, plan["values"], rng, star["task"])
        if change is None and "id" in plan["values"]:  # a flight, a ride: another row of the database
            others = [r["id"] for r in _rows(kb, api) if r.get("id") not in (None, plan["values"]["id"])]
            if others:
                change = {"slot": "id", "readable": "number", "old": shown(plan["values"]["id"]),
                          "new": shown(rng.choice(others))}
        words = templates()["values"]
        typed = [n for n in plan["values"] if n in api.inputs and len(words.get(n) or ()) > 1]
        if change is None and typed:  # a PIN, an account, a code: the user corrects what they first gave
            name = rng.choice(typed)
            change = {"slot": name, "readable": readable(api.inputs[name]), "old": shown(plan["values"][name]),
                      "new": shown(rng.choice([w for w in words[name] if w != plan["values"][name]]))}
        if change is not None:
            return {**change, "task": plan["task"]}
    return None


def _nudge_values(plan: Mapping[str, Any], kb: KnowledgeBase, rng: random.Random) -> dict[str, Any]:
    """What a nudge may name, drawn from the task and its knowledge base: the entity asked about, another
    field of the API's answers with a value of it from the database (or its choices), another entity."""
    api = kb.api(plan["api"])
    rows = _rows(kb, api)
    said = set(plan["values"])
    fields = [c for c in api.inputs.values() if c.name not in said and c.name != "id" and c.type != "RequestType"
              and (c.type == "Boolean" or len(_choices(c)) > 1)]
    found: dict[str, Any] = {"task": plan["task"].replace("_", " "), "entity": plan["entity"]}
    if fields:
        column = rng.choice(fields)
        values = [r[column.name] for r in rows if r.get(column.name) not in (None, "")] or _choices(column) \
            or [True, False]
        found["field"], found["value"] = readable(column), rng.choice(values)
    names = [r["Name"] for r in rows if isinstance(r.get("Name"), str) and r["Name"] != plan["values"].get("Name")]
    if names:
        found["other"] = rng.choice(names)
    return found


def _lower_first(text: str) -> str:
    return text[0].lower() + text[1:] if text else text


def nudges_for(plans: Sequence[Mapping[str, Any]], stars: Sequence[Mapping[str, Any]], rng: random.Random,
               *, person: str, today: str = "", conflict: Optional[Mapping[str, Any]] = None,
               kbs: Sequence[KnowledgeBase] = ()) -> list[dict[str, Any]]:
    """The nudges of one conversation: each template's wording drawn per dialog (and whether the dialog gets
    it at all, its ``share``), filled from the plan, the task's knowledge base and a drawn reason, with when
    it is due.

    A task file's own ``turkflow.nudges`` (``{turn, text}``) keep their turn numbers."""
    unhappy = next((p for p in plans if p["unhappy"]), None)
    about = _nudge_values(plans[0], kbs[0], rng) if kbs else {"task": plans[0]["task"].replace("_", " ")}
    made: list[dict[str, Any]] = []
    for template in templates()["nudges"]:
        kind = template.get("kind", "any")
        if rng.random() >= float(template.get("share", 1)):
            continue
        mapping: dict[str, Any] = {"person": person, "today": today, **about}
        if kind in ("change", "unhappy"):
            if unhappy is None or unhappy["change"] is None:
                continue
            if kind == "change" and unhappy["unhappy"] != "change":
                continue
            if kind == "unhappy" and unhappy["unhappy"] == "change":
                continue
            mapping.update(_change_words(unhappy["change"], rng))
        if kind == "conflict":
            if conflict is None or (unhappy is not None and unhappy.get("change") == {
                    k: v for k, v in conflict.items() if k != "task"}):
                continue  # no value to change, or the unhappy change already says it
            mapping.update(_change_words(conflict, rng))
        if kind == "multi":
            if len(plans) < 2:
                continue
            mapping["next"] = plans[1]["task"].replace("_", " ")
        wordings = list(template["texts"])
        rng.shuffle(wordings)
        text = next((t for t in (_fill(w, mapping) for w in wordings) if t is not None), None)
        if text is None:
            continue
        nudge = {"text": text, "when": template["when"], "after": int(template.get("after", 0))}
        if "by" in template:
            nudge["by"] = int(template["by"])
        if kind == "close":
            nudge["last"] = True
        made.append(nudge)
    for star in stars:
        made += [{"turn": n["turn"], "text": n["text"]} for n in star.get("nudges", [])]
    for number, nudge in enumerate(made):
        nudge["id"] = number + 1
    return made


def _change_words(change: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    reason = _reason(change["slot"], rng).rstrip(".")
    return {"slot": change["readable"], "old": change["old"], "new": change["new"], "reason": reason,
            "reason_lower": _lower_first(reason)}


# ---- at run time ---------------------------------------------------------------------------------------


def due_nudges(nudges: Sequence[Mapping[str, Any]], given: Iterable[int], *, turn_index: int,
               user_turns: int, result: bool, unwelcome: bool) -> list[Mapping[str, Any]]:
    """The nudges due when a user turn opens, from the dialog's state: ``user_turns`` things said so far,
    ``result``/``unwelcome``: whether the wizard got a knowledge-base answer (an unwelcome one) since the
    user last spoke. A nudge with ``turn`` (a task file's own) is due at that turn index; the ``last`` one
    only when every other state-driven one is given."""
    done = set(given)
    due = []
    for nudge in nudges:
        if nudge.get("id") in done:
            continue
        if "turn" in nudge:
            if nudge["turn"] == turn_index:
                due.append(nudge)
            continue
        if user_turns < nudge.get("after", 0):
            continue
        late = "by" in nudge and user_turns >= nudge["by"]
        when = nudge.get("when", "turns")
        ready = (when in ("start", "turns") or (when == "result" and result)
                 or (when == "unhappy_result" and unwelcome) or late)
        if not ready:
            continue
        if nudge.get("last") and any(n.get("id") not in done and n is not nudge and "turn" not in n
                                     for n in nudges):
            continue
        due.append(nudge)
    return due


def forced_answer(scenario: Mapping[str, Any], kb: KnowledgeBase, api: str,
                  raw: Any) -> Optional[QueryResult]:
    """The "no" an unhappy scenario forces: a request to the API that asks for exactly what the scenario
    names (the same entity, day, time...) gets the API's unwelcome answer, with its echoes; else None."""
    for force in scenario.get("force") or ():
        if force.get("api") != api:
            continue
        try:
            constraints = kb.validate(api, raw)
        except InvalidInput:
            return None
        plain = {c.field: c.value for c in constraints if c.op in ("equals", "is_equal_to") and not c.negated}
        if not all(plain.get(name) == value for name, value in force["when"].items()):
            continue
        answers = [a for a, _ in outcomes.possible(kb, api, raw) if says_no(a)]
        if answers:
            return QueryResult(api, (dict(answers[0]),))
    return None


def unwelcome(item: Optional[Mapping[str, Any]]) -> bool:
    """A returned item that says no, or nothing found."""
    return item is None or says_no(item)
