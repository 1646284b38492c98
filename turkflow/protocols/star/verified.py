"""Whether a STAR dialog reached the outcome its scenario allows: its success checked against the goal, as an
agents' report shows it beside the user's claim (``dialog.verified_outcomes``).

A scenario names, per task, what the user asks for (``plans``: the API and the values) and whether it can be had
(happy) or not (nothing matches, or the API's "no" is forced). What the knowledge base last answered the task's
API in the dialog is the task's outcome (``suggestions.outcome_of``):

- a task that can be had is done when that answer is welcome (an item found, a request confirmed; a *booking*,
  where the API books, not a check) and agrees with the values the user asked for (the new one where the user
  changed their mind): an item's field, else the query's condition on it, equals what the scenario names;
- a task that cannot is done when the knowledge base was asked and said its "no" (nothing found, refused): the
  agent found out the truth instead of announcing an outcome;
- a task whose API was never asked is not done.

The dialog succeeded when every task of its scenario was done. Plain functions of the logged events.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from turkflow.errors import InvalidInput
from turkflow.models import DialogEvent
from turkflow.protocols.star import outcomes
from turkflow.protocols.star.kb import constraints_from
from turkflow.protocols.star.suggestions import EMPTY, FAILED, FOUND, SUCCEEDED, DialogState, outcome_of


def last_answer(events: Sequence[DialogEvent], api: str) -> Optional[tuple[DialogEvent, dict[str, Any]]]:
    """The task's last query of ``api`` and what the knowledge base returned to it (its ``return_item``)."""
    found = None
    for n, event in enumerate(events):
        if event.action == "query" and event.data.get("APIName") == api:
            answer = next((e.data for e in events[n + 1:] if e.action == "return_item"), {})
            found = (event, answer)
    return found


def wanted_values(plan: Mapping[str, Any]) -> dict[str, set[str]]:
    """What the user may ask for, per field: the scenario's value, and the new one a change of mind names."""
    wanted = {name: {_plain(value)} for name, value in plan.get("values", {}).items()}
    change = plan.get("change")
    if change and change.get("slot") in wanted:
        wanted[change["slot"]].add(_plain(change.get("new")))
    return wanted


def _plain(value: Any) -> str:
    return str(value).strip().strip('"').casefold()


def task_verdict(plan: Mapping[str, Any], events: Sequence[DialogEvent], books: bool) -> tuple[bool, dict[str, Any]]:
    """Whether one task of the scenario was done (module docstring), with the evidence. ``books``: the task's
    API takes a RequestType (a schedule or a booking), so a check alone does not do it."""
    api, happy = plan.get("api"), plan.get("unhappy") in (None, "change")
    shown: dict[str, Any] = {"task": plan.get("task"), "api": api, "can_succeed": happy}
    answered = last_answer(events, api)
    if answered is None:
        return False, {**shown, "why": "the knowledge base was never asked"}
    query, answer = answered
    item = answer.get("Item")
    outcome = outcome_of(DialogState(nothing_found=item is None, item=item))
    try:
        constraints = constraints_from(query.data.get("Constraints", []))
    except InvalidInput:
        constraints = []
    shown.update(outcome=outcome, query=query.id)
    if not happy:
        ok = outcome in (EMPTY, FAILED)
        return ok, {**shown, "why": "the knowledge base said no, as the scenario has it" if ok
                    else "the knowledge base was not asked for what cannot be had"}
    if outcome not in (FOUND, SUCCEEDED):
        return False, {**shown, "why": "the knowledge base's last answer was a no"}
    if books and not outcomes.booking(constraints):
        return False, {**shown, "why": "checked, never booked"}
    asked = {c.field: _plain(c.value) for c in constraints if c.op in ("equals", "is_equal_to") and not c.negated}
    differs = sorted(name for name, values in wanted_values(plan).items()
                     if (seen := _plain(item[name]) if name in item else asked.get(name)) is not None
                     and seen not in values)
    if differs:
        return False, {**shown, "why": f"not what the user asked for: {', '.join(differs)}"}
    return True, {**shown, "why": "done as the user asked"}
