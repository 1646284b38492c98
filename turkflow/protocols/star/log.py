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
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional

from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols.star import outcomes
from turkflow.protocols.star.kb import Column, KnowledgeBase
from turkflow.protocols.star.schemas import TaskSchema
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


def _by_id(name: str) -> tuple[bool, int, str]:
    stem = Path(name).stem
    return (not stem.isdigit(), int(stem) if stem.isdigit() else 0, stem)


def load_dialogues(folder: Path) -> list[dict[str, Any]]:
    """Every ``N.json`` under ``folder`` in id order."""
    return [load_dialogue(p) for p in sorted(folder.glob("*.json"), key=lambda p: _by_id(p.name))]


def read_corpus(source: Path) -> Iterator[dict[str, Any]]:
    """STAR dialogues in id order, one at a time, from a folder of ``N.json`` files, a folder holding
    ``dialogues/``, or a ``.tar.gz`` of ``dialogues/N.json`` (STAR's training split is read in place)."""
    if source.is_file() and source.name.endswith((".tar.gz", ".tgz", ".tar")):
        found: dict[str, bytes] = {}
        try:
            with tarfile.open(source) as archive:  # in stream order: a .gz cannot seek back cheaply
                for member in archive:
                    handle = archive.extractfile(member) if member.isfile() else None
                    if handle is not None and member.name.endswith(".json"):
                        found[member.name] = handle.read()
        except (OSError, tarfile.TarError) as exc:
            raise InvalidDocument(f"{source}: cannot read STAR dialogues: {exc}") from None
        for name in sorted(found, key=_by_id):
            try:
                document = json.loads(found.pop(name).decode("utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise InvalidDocument(f"{source}:{name}: cannot read STAR dialogue: {exc}") from None
            if not isinstance(document, dict) or not isinstance(document.get("Events"), list):
                raise InvalidDocument(f"{source}:{name}: a STAR dialogue needs an Events list")
            yield document
        return
    folder = source / "dialogues" if (source / "dialogues").is_dir() else source
    if not folder.is_dir():
        raise InvalidDocument(f"{source}: neither a folder of STAR dialogues nor a .tar.gz of them")
    for path in sorted(folder.glob("*.json"), key=lambda p: _by_id(p.name)):
        yield load_dialogue(path)


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


# ---- the wizard's picks, with the state the page had before each -----------------------------------------


_PATTERNS: dict[int, tuple[TaskSchema, tuple[tuple[str, re.Pattern[str], int], ...]]] = {}


def _template_patterns(schema: TaskSchema) -> tuple[tuple[str, re.Pattern[str], int], ...]:
    """Each reply's text as a pattern over a sent reply (slots match anything), longest wording first
    (kept per schema object: a schema is immutable)."""
    cached = _PATTERNS.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    found = []
    for template in schema.replies():
        parts = re.split(r"\{[^}]*\}", template.text)
        literal = [re.escape(" ".join(p.split())) for p in parts]
        pattern = re.compile(r"\s*" + r"(.+?)".join(literal) + r"\s*$", re.S | re.I)
        found.append((template.label, pattern, sum(len(p) for p in parts)))
    patterns = tuple(sorted(found, key=lambda entry: -entry[2]))
    _PATTERNS[id(schema)] = (schema, patterns)
    return patterns


def canonical_label(schema: TaskSchema, label: Optional[str], text: str) -> Optional[str]:
    """The schema's label for a logged pick: its own when the schema has it, else the reply whose wording
    the sent text follows (STAR's logs come from older schemas: ``goodbye_1`` is now ``weather_bye``).
    None for a custom reply or one no template says."""
    template = schema.templates.get(label) if label else None
    if template is not None and not template.is_query:
        return label
    said = " ".join(text.split())
    for candidate, pattern, _ in _template_patterns(schema):
        if pattern.match(said):
            return candidate
    return None


@dataclass(frozen=True)
class Pick:
    """One Wizard ``pick_suggestion`` with the task the wizard had selected and the page's state before it."""

    dialogue: Any
    task: str
    state: DialogState
    label: Optional[str]      # the reply in today's schema, None when no template says it (custom)
    event: Mapping[str, Any] = field(repr=False)


@dataclass
class _TaskTrack:
    schema: TaskSchema
    last_label: Optional[str] = None
    queried: bool = False
    nothing_found: bool = False
    item: Optional[dict[str, Any]] = None
    used: tuple[str, ...] = ()


def picks(dialogue: Mapping[str, Any], schemas: Mapping[str, TaskSchema]) -> Iterator[Pick]:
    """For every Wizard ``pick_suggestion``, the task the wizard had selected (the last ``select_task``,
    else the dialogue's first task) and that task's state as the wizard's page builds it
    (``star.dialog.dialog_state``): the last reply of the task picked and the replies before it, whether a
    query to its API came since, its last result, the user's last words. The draft is the text of the
    wizard's last ``request_suggestions`` since its previous reply (STAR ranked on it); the item is the one
    the pick event shows as selected, else the task's last result. Tasks not in ``schemas`` are skipped."""
    tasks = [c.get("Task") for c in dialogue.get("Scenario", {}).get("WizardCapabilities", [])]
    tracks = {name: _TaskTrack(schemas[name]) for name in tasks if name in schemas}
    selected = tasks[0] if tasks else None
    user_text, draft = "", ""
    for event in dialogue["Events"]:
        agent, action = event.get("Agent"), event.get("Action")
        if action == "select_task":
            selected = event.get("Task")
        elif agent == "User" and action == "utter":
            user_text = event.get("Text") or ""
        elif agent == "Wizard" and action == "query":
            for track in tracks.values():
                if event.get("APIName") == track.schema.api:
                    track.queried = True
        elif agent == "KnowledgeBase" and action == "return_item":
            for track in tracks.values():
                if event.get("APIName") == track.schema.api:
                    item = event.get("Item")
                    track.nothing_found = not item
                    track.item = _row(item) if item else track.item
        elif agent == "Wizard" and action == "request_suggestions":
            draft = event.get("Text") or draft
        elif agent == "Wizard" and action == "utter":
            draft = ""
        elif agent == "Wizard" and action == "pick_suggestion":
            track = tracks.get(selected)
            if track is not None:
                shown = event.get("PrimaryItem")
                item = (_row(shown) if shown and shown.get("APIName") == track.schema.api else track.item)
                state = DialogState(last_label=track.last_label, queried=track.queried,
                                    nothing_found=track.nothing_found, user_text=user_text, draft=draft,
                                    item=item, used=track.used)
                label = canonical_label(track.schema, event.get("ActionLabel"), event.get("Text") or "")
                yield Pick(dialogue.get("DialogueID"), selected, state, label, event)
                for other in tracks.values():
                    if label is not None and label in other.schema.templates:
                        other.last_label, other.queried = label, False
                        other.used = (*other.used, label)
            draft = ""


def states_before_picks(dialogue: Mapping[str, Any],
                        schemas: Mapping[str, TaskSchema]) -> Iterator[tuple[DialogState, Mapping[str, Any]]]:
    """``picks`` as (state, pick event) pairs."""
    for pick in picks(dialogue, schemas):
        yield pick.state, pick.event


def _row(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "APIName"}
