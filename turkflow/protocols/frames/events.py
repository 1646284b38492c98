"""What a Frames search leaves in the dialog's log, as the plain values a ``DialogEvent`` row holds.

A wizard's search is three events, in this order: the wizard's ``search`` (conditions as typed, sort, and
``flexible`` days when the dates were widened), the
database's ``search_results`` (the ids shown and how many matched) and, when the draw allowed them, the
``suggestions`` shown (possibly none). Frames kept the same in its turns' ``db`` field. Logging the
suggestions draw even when nothing could be suggested lets the analysis tell "not offered" from "nothing
to offer", which is what Frames' random suggestions were for. ``replay`` re-runs logged searches.

The wizard's ``book`` (Frames' ``action`` slot, "book") ends the dialog: its data is ``{"id": <item id>,
"item": {column: value}}``, the package as it was booked, so the data set says what was booked even if the
requester's database changes later, and ``replay`` names a booked package that is gone or changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from turkflow.errors import InvalidInput
from turkflow.protocols.frames.database import Database, to_json
from turkflow.protocols.frames.search import Search, SearchResult, Suggestion, parse_sort, run_search

WIZARD, DATABASE = "Wizard", "KnowledgeBase"  # agents as DialogEvent names them
SEARCH, RESULTS, SUGGESTIONS = "search", "search_results", "suggestions"
BOOK = "book"  # the wizard books one item; the dialog ends with that wizard's turn


@dataclass(frozen=True)
class FramesEvent:
    """``agent``, ``action`` and ``data`` of one DialogEvent row; ``data`` is JSON."""

    agent: str
    action: str
    data: dict[str, Any]


def _suggestion(s: Suggestion) -> dict[str, Any]:
    return {"relaxed": s.relaxed.as_dict(), "instead": s.instead.as_dict() if s.instead else None,
            "ids": list(s.ids), "total": s.total}


def search_events(search: Search, result: SearchResult) -> list[FramesEvent]:
    events = [
        FramesEvent(WIZARD, SEARCH, {"constraints": [c.as_dict() for c in search.constraints],
                                     "sort": search.sort.as_dict(),
                                     **({"flexible": search.flexible} if search.flexible else {})}),
        FramesEvent(DATABASE, RESULTS, {"ids": list(result.ids), "total": result.total}),
    ]
    if result.offered:
        events.append(FramesEvent(DATABASE, SUGGESTIONS, {"suggestions": [_suggestion(s)
                                                                          for s in result.suggestions]}))
    return events


def book_event(item: Mapping[str, Any]) -> FramesEvent:
    """The wizard's booking of ``item`` (a database row), kept as booked."""
    return FramesEvent(WIZARD, BOOK, {"id": item["id"], "item": {k: to_json(v) for k, v in item.items()}})


def search_from_event(db: Database, data: Mapping[str, Any]) -> Search:
    """A logged search, its conditions re-checked against the database (an ``InvalidInput`` names the
    field that no longer fits, e.g. a column the requester renamed)."""
    try:
        constraints = tuple(db.constraint(c["field"], c["op"], c["value"]) for c in data["constraints"])
        sort = data["sort"]
        return Search(constraints, parse_sort(db, sort["field"], sort["descending"]),
                      int(data.get("flexible", 0)))
    except (KeyError, TypeError):
        raise InvalidInput("not a logged search", "data") from None


def _logged(events: Sequence[FramesEvent | Mapping[str, Any]]) -> list[FramesEvent]:
    found = []
    for event in events:
        if isinstance(event, Mapping):
            data = dict(event.get("data") or {})
            event = FramesEvent(event.get("agent", ""), event.get("action", ""), data)
        if event.action in (SEARCH, RESULTS, SUGGESTIONS, BOOK):
            found.append(event)
    return found


def replay(db: Database, events: Sequence[FramesEvent | Mapping[str, Any]]) -> list[str]:
    """Re-run every logged search on ``db`` and describe each difference from what was logged (empty when
    the database still answers the same), naming the items shown then and not now, and the other way round.
    Logged suggestions are recomputed as if offered. A booking is checked against the item now."""
    differences = []
    logged = _logged(events)
    number = 0
    items = None
    for index, event in enumerate(logged):
        if event.action == BOOK:
            items = items if items is not None else {i["id"]: i for i in db.items}
            differences += _booking_differences(items, event.data)
        if event.action != SEARCH:
            continue
        number += 1
        search = search_from_event(db, event.data)
        following = logged[index + 1:index + 3]
        results: Optional[FramesEvent] = next((e for e in following[:1] if e.action == RESULTS), None)
        if results is None:
            differences.append(f"search {number}: no results logged")
            continue
        offered = next((e for e in following[1:] if e.action == SUGGESTIONS), None)
        rerun = run_search(db, search, suggestion_probability=1.0 if offered else 0.0)
        now = search_events(search, rerun)
        if now[1].data != results.data:
            gone = [i for i in results.data["ids"] if i not in rerun.ids]
            new = [i for i in rerun.ids if i not in results.data["ids"]]
            which = "".join(f"; {label}: {', '.join(map(str, ids))}"
                            for label, ids in (("no longer found", gone), ("now found", new)) if ids)
            differences.append(f"search {number}: logged {results.data['total']} items "
                               f"{results.data['ids'][:10]}, now {rerun.total} {list(rerun.ids)}{which}")
        elif offered is not None and now[2].data != offered.data:
            differences.append(f"search {number}: the suggestions differ")
    return differences



def _booking_differences(items: Mapping[Any, Mapping[str, Any]], data: Mapping[str, Any]) -> list[str]:
    """What changed in a booked item since it was booked: gone, or the columns whose value differs."""
    booked = data.get("item") or {}
    now = items.get(data.get("id"))
    if now is None:
        return [f"booking: item {data.get('id')} is no longer in the database"]
    changed = [f"{name} {booked.get(name)!r} -> {to_json(now.get(name))!r}"
               for name in sorted(set(booked) | set(now)) if booked.get(name) != to_json(now.get(name))]
    return [f"booking: item {data['id']} changed: {'; '.join(changed)}"] if changed else []
