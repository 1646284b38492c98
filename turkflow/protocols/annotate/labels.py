"""A turn's labels under a scheme: what an annotator's clicks may add, checked, and one canonical form that
agreement, adjudication and the exports compare.

An annotator builds the labels one click-made item at a time: an act (with a slot type and its value, or
without), or a frame relation. A value is never typed: it is a run of the turn's own words (``words``, their
numbers in ``words_of``), a value of the database column the slot type names, or one of the slot type's
fixed values. Labels as stored::

    {"acts": [{"act": "inform", "slots": [{"slot": "destination", "value": "Lisbon"}]}, ...],
     "frames": [{"relation": "refers", "frame": 2}]}
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Iterable, Mapping, Optional, Sequence

from turkflow.errors import InvalidInput
from turkflow.protocols.annotate.scheme import MAX_FRAMES, RELATIONS, Scheme

_WORD = re.compile(r"[$€£]?\w+(?:[.,:'’/-]\w+)*")
MAX_ITEMS = 40  # items one turn's labels may hold
EMPTY: dict[str, list] = {"acts": [], "frames": []}


def words_of(text: str) -> list[tuple[int, int, str]]:
    """The turn's clickable words: (start, end, word), punctuation at their edges left out ("Lisbon," is
    Lisbon; "$1,500" and "2026-05-01" stay whole)."""
    return [(m.start(), m.end(), m.group()) for m in _WORD.finditer(text or "")]


def picked_words(text: str, picked: Any) -> str:
    """The value a run of clicked words says: their numbers must be one unbroken run of the turn's words."""
    values = picked if isinstance(picked, list) else [picked]
    try:
        numbers = sorted({int(v) for v in values})
    except (TypeError, ValueError):
        raise InvalidInput("expected the numbers of the clicked words", "words") from None
    words = words_of(text)
    if not numbers or numbers[0] < 0 or numbers[-1] >= len(words):
        raise InvalidInput(f"pick words of this turn (0 to {len(words) - 1})", "words")
    if numbers != list(range(numbers[0], numbers[-1] + 1)):
        raise InvalidInput("pick one run of neighbouring words", "words")
    return text[words[numbers[0]][0]:words[numbers[-1]][1]]


def label_item(scheme: Scheme, speaker: str, text: str, fields: Mapping[str, Any],
               database_values: Optional[Mapping[str, Sequence[str]]] = None) -> dict[str, Any]:
    """One act item from an annotator's clicks (``act``; ``slot`` and ``words`` or ``value``), checked: an
    ``InvalidInput`` names the field. ``database_values``: the pickable values of each database column."""
    rest = dict(fields)
    act = rest.pop("act", None)
    allowed = [a.name for a in scheme.acts_for(speaker)]
    if act not in allowed:
        raise InvalidInput(f"a {speaker}'s turn carries one of: {', '.join(allowed)}", "act")
    slot, words, value = rest.pop("slot", None) or None, rest.pop("words", None), rest.pop("value", None) or None
    if rest:
        raise InvalidInput("not a field of a label", str(sorted(rest)[0])[:60])
    if slot is None:
        if words is not None or value is not None:
            raise InvalidInput("choose the slot type the value is of", "slot")
        return {"act": act}
    kind = scheme.slots.get(slot) if isinstance(slot, str) else None
    if kind is None:
        raise InvalidInput(f"not a slot type of the {scheme.name} scheme", "slot")
    if words is not None and value is not None:
        raise InvalidInput("pick words of the turn or a listed value, not both", "value")
    if words is not None:
        if kind.values:
            raise InvalidInput(f"pick one of: {', '.join(kind.values)}", "value")
        return {"act": act, "slot": slot, "value": picked_words(text, words)}
    if value is None:
        return {"act": act, "slot": slot}  # a slot without a value: "the same price" (the paper's Table 3)
    listed = kind.values or tuple((database_values or {}).get(slot, ()))
    if not isinstance(value, str) or value not in listed:
        raise InvalidInput("pick the value from the words of the turn or the listed values", "value")
    return {"act": act, "slot": slot, "value": value}


def frame_item(scheme: Scheme, fields: Mapping[str, Any]) -> dict[str, Any]:
    """One frame relation from an annotator's clicks (``relation``, ``frame``), checked."""
    if not scheme.frames:
        raise InvalidInput(f"the {scheme.name} scheme has no frames", "relation")
    rest = dict(fields)
    relation, frame = rest.pop("relation", None), rest.pop("frame", None)
    if rest:
        raise InvalidInput("not a field of a frame relation", str(sorted(rest)[0])[:60])
    if relation not in RELATIONS:
        raise InvalidInput(f"choose one of: {', '.join(RELATIONS)}", "relation")
    try:
        number = int(frame)
    except (TypeError, ValueError):
        number = 0
    if not 1 <= number <= MAX_FRAMES:
        raise InvalidInput(f"choose a frame from 1 to {MAX_FRAMES}", "frame")
    return {"relation": relation, "frame": number}


def collect(items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Items (act items and frame relations, in click order) as one turn's labels in canonical order: acts by
    name, each act's slots by type and value, no item twice."""
    acts: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    frames: dict[tuple[str, int], dict[str, Any]] = {}
    for item in items:
        if "relation" in item:
            frames[(item["relation"], item["frame"])] = {"relation": item["relation"], "frame": item["frame"]}
            continue
        slots = acts.setdefault(item["act"], {})
        if "slot" in item:
            slot = {"slot": item["slot"], **({"value": item["value"]} if "value" in item else {})}
            slots[(slot["slot"], _norm(slot.get("value")))] = slot
    labels = {"acts": [{"act": act, "slots": [slots[k] for k in sorted(slots)]} for act, slots in sorted(acts.items())],
              "frames": [frames[k] for k in sorted(frames)]}
    if sum(1 + len(a["slots"]) for a in labels["acts"]) + len(labels["frames"]) > MAX_ITEMS:
        raise InvalidInput(f"a turn holds at most {MAX_ITEMS} labels", "act")
    return labels


def key(labels: Mapping[str, Any]) -> frozenset:
    """What two annotators must both say to agree on a turn: every act, slot value (case and spacing aside)
    and frame relation."""
    return frozenset(items(labels))


def items(labels: Mapping[str, Any]) -> list[tuple]:
    """The labels as separate items, each a label of its own for agreement: ("act", a),
    ("slot", a, s, value), ("frame", relation, n)."""
    found: list[tuple] = []
    for act in labels.get("acts", []):
        found.append(("act", act["act"]))
        found += [("slot", act["act"], s["slot"], _norm(s.get("value"))) for s in act["slots"]]
    found += [("frame", f["relation"], f["frame"]) for f in labels.get("frames", [])]
    return found


def summary(labels: Mapping[str, Any]) -> str:
    """The labels in the Frames paper's notation, the text a labelled turn is stored with:
    ``inform(destination=Lisbon, price); ref=[2]``."""
    parts = []
    for act in labels.get("acts", []):
        args = ", ".join(s["slot"] + (f"={s['value']}" if "value" in s else "") for s in act["slots"])
        parts.append(f"{act['act']}({args})" if args else act["act"])
    parts += [f"{RELATIONS[f['relation']]}=[{f['frame']}]" for f in labels.get("frames", [])]
    return "; ".join(parts) or "no act"


def _norm(value: Optional[str]) -> str:
    return " ".join(unicodedata.normalize("NFC", value).casefold().split()) if value is not None else ""
