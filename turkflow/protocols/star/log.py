"""Reading STAR's event logs (``dialogues/N.json``) and checking our knowledge base against them.

STAR logged every wizard query with its constraints and the item its server returned. The server drew its
rows at random at start-up and returned a random match, so a logged item cannot be reproduced row for row;
what must hold is that the logged item meets the logged constraints under our semantics (so a database
holding it returns it) and that its values lie in the database's domain (so our generator could draw it).
For booking and checking APIs, the logged answer must be one of the answers ``outcomes.possible`` lists
for the request (a ride check or a trip: a row meeting the constraints on the database's columns).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols.star import outcomes
from turkflow.protocols.star.kb import Column, KnowledgeBase
from turkflow.protocols.star.suggestions import DialogState

# outcomes of one logged query
AGREES = "agrees"                # the logged item meets the constraints and fits the database
DISAGREES = "disagrees"          # it does not: our semantics or domain differ from STAR's
FOUND_NOTHING = "found_nothing"  # STAR returned no item (its random rows had no match, or it failed)
REFUSED = "refused"              # our validation refuses the constraints
ECHO_BLANK = "echo_blank"        # an answer STAR gave with a field blanked by its own lookup bug
UNSUPPORTED = "unsupported"      # an API we do not answer yet (trivia)


def load_dialogue(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidDocument(f"{path}: cannot read STAR dialogue: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("Events"), list):
        raise InvalidDocument(f"{path}: a STAR dialogue needs an Events list")
    return document


def load_dialogues(folder: Path) -> list[dict[str, Any]]:
    """Every ``N.json`` under ``folder`` in id order."""
    paths = sorted(folder.glob("*.json"), key=lambda p: (not p.stem.isdigit(), int(p.stem) if p.stem.isdigit()
                                                         else 0, p.stem))
    return [load_dialogue(p) for p in paths]


@dataclass(frozen=True)
class QueryCheck:
    dialogue: Any
    api: str
    outcome: str
    detail: str = ""


def _in_domain(column: Column, value: Any) -> bool:
    if column.type == "Integer" and isinstance(column.minimum, int) and isinstance(column.maximum, int):
        return isinstance(value, int) and column.minimum <= value <= column.maximum
    if column.type == "Boolean":
        return isinstance(value, bool)
    if column.type == "Categorical" and column.categories is not None:
        return value in column.categories or (isinstance(value, list) and tuple(value) in column.categories)
    return True


def check_query(kb: KnowledgeBase, api_name: str, constraints: Any,
                returned: Mapping[str, Any]) -> QueryCheck:
    """Judge one logged query against what STAR's knowledge base returned for it."""
    api = kb.api(api_name)
    try:
        kb.validate(api_name, constraints)
    except InvalidInput as exc:
        return QueryCheck(None, api_name, REFUSED, exc.message)
    item = returned.get("Item")
    if api_name not in outcomes.RULES and api_name not in outcomes.SPECIAL and not api.searchable:
        return QueryCheck(None, api_name, UNSUPPORTED)
    if not item:
        return QueryCheck(None, api_name, FOUND_NOTHING)
    row = {k: v for k, v in item.items() if k != "APIName"}
    if not api.searchable:
        return QueryCheck(None, api_name, _judge_outcome(kb, api_name, constraints, row))
    found = kb.query(api_name, constraints, rows=[row])
    if not any(r is row for r in found.items):
        return QueryCheck(None, api_name, DISAGREES, "logged item does not meet the constraints")
    columns = {c.name: c for c in kb.databases[api.db].columns}
    outside = [k for k, v in row.items() if k in columns and not _in_domain(columns[k], v)]
    if outside:
        return QueryCheck(None, api_name, DISAGREES, f"value outside the database's domain: {outside[0]}")
    return QueryCheck(None, api_name, AGREES)


def _judge_outcome(kb: KnowledgeBase, api_name: str, constraints: Any, row: dict[str, Any]) -> str:
    if api_name in ("ride_book", "trip_directions") and "Message" not in row:
        return AGREES if outcomes.meets(kb, api_name, constraints, row) else DISAGREES
    if api_name in outcomes.SPECIAL:
        return AGREES if row in outcomes.call(kb, api_name, constraints).items else DISAGREES
    answers = [answer for answer, _ in outcomes.possible(kb, api_name, constraints)]
    if api_name == "apartment_schedule":  # the documents to bring are drawn at random
        row = {**row, "Message": row.get("Message", "").split(" Please bring ")[0]}
    if api_name == "ride_status":
        row = {k: v for k, v in row.items() if k != "RideWait"}
    if row in answers:
        return AGREES
    blanked = [k for k, v in row.items() if v == ""]
    if blanked and any({**answer, **{k: "" for k in blanked}} == row for answer in answers):
        return ECHO_BLANK
    return DISAGREES


def logged_queries(dialogue: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """Each ``query`` event with the KnowledgeBase ``return_item`` event that follows it."""
    events = dialogue["Events"]
    for here, event in enumerate(events):
        if event.get("Action") != "query":
            continue
        for later in events[here + 1:]:
            if later.get("Agent") == "KnowledgeBase" and later.get("Action") == "return_item":
                yield event, later
                break
            if later.get("Action") == "query":
                break


def check_dialogues(kb: KnowledgeBase, dialogues: Iterable[Mapping[str, Any]]) -> list[QueryCheck]:
    checks = []
    for dialogue in dialogues:
        for query, returned in logged_queries(dialogue):
            check = check_query(kb, query["APIName"], query.get("Constraints") or [], returned)
            checks.append(QueryCheck(dialogue.get("DialogueID"), check.api, check.outcome, check.detail))
    return checks


def states_before_picks(dialogue: Mapping[str, Any]) -> Iterator[tuple[DialogState, Mapping[str, Any]]]:
    """For every Wizard ``pick_suggestion``, the state the wizard's page had just before it, from the log.

    The draft is the text of the wizard's last ``request_suggestions`` since its previous reply (STAR ranked
    on it); the item is the one the pick event shows as selected, else the last one returned.
    """
    state = DialogState()
    events = dialogue["Events"]
    for event in events:
        agent, action = event.get("Agent"), event.get("Action")
        if agent == "User" and action == "utter":
            state = replace(state, user_text=event.get("Text") or "")
        elif agent == "Wizard" and action == "query":
            state = replace(state, queried=True, nothing_found=False)
        elif agent == "KnowledgeBase" and action == "return_item":
            item = event.get("Item")
            state = replace(state, nothing_found=not item, item=_row(item) if item else state.item)
        elif agent == "Wizard" and action in ("request_suggestions", "select_primary"):
            item = event.get("PrimaryItem")
            state = replace(state, draft=event.get("Text") or state.draft,
                            item=_row(item) if item else state.item)
        elif agent == "Wizard" and action == "pick_suggestion":
            item = event.get("PrimaryItem")
            before = replace(state, item=_row(item) if item else state.item)
            yield before, event
            label = event.get("ActionLabel")
            state = replace(before, last_label=label, queried=False, nothing_found=False, draft="",
                            used=(*before.used, label))
        elif agent == "Wizard" and action == "utter":
            state = replace(state, draft="")


def _row(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "APIName"}
