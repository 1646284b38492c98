"""Reply suggestions for a STAR wizard: the task's templates ranked for the dialog so far, then filled.

The ranking is cheap on purpose (it runs on every keystroke-free request, well under a millisecond): first
where the flow chart says the wizard is (the node after the last reply picked, or after the last query), then
how much each template shares words with the user's last utterance and with what the wizard has typed so
far, then whether the selected knowledge-base item can fill the template's slots. No model, no downloads.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

from turkflow.protocols.star.schemas import TaskSchema, Template

WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    "a an the i you we it is are was be to of in on at for and or my your me do does did can could would "
    "will that this with have has had am so just please what how when where which there their them they "
    "he she his her our us okay ok oh".split())
CLOSING = ("anything_else", "bye", "goodbye", "out_of_scope")
# slot -> item field when their names differ by more than case and underscores (learned from the schemas)
SLOT_FIELDS = {
    "clazz": ("Class",), "price_range": ("Cost",), "food_type": ("Food",), "rating": ("AverageRating",),
    "instructions": ("Message",), "num_bedrooms": ("NumRooms",), "size": ("FloorSquareMeters",),
    "floor": ("Level",), "pois": ("NearbyPOIs",), "booking_id": ("id",), "flight_id": ("id",),
    "duration": ("DurationHours", "DurationMinutes"), "hotel_location": ("Location",),
    "balance": ("BankBalance",), "temperature": ("TemperatureCelsius",),
    "simple_instruction": ("TransitInstructions", "DrivingInstructions", "WalkingInstructions"),
    "detailed_instruction": ("DetailedTransitInstructions", "DetailedDrivingInstructions",
                             "DetailedWalkingInstructions"),
}

# weights of the score's parts, set by hand (a few tries on the sample logs, so the bench is in-sample)
NEXT_NODE, BRANCH, SKIP_ONE, CLOSING_BASE = 1.0, 0.6, 0.3, 0.15
USER_WORDS, DRAFT_WORDS, ITEM_WORDS, FILLABLE, UNFILLABLE, REPEAT = 0.5, 1.5, 0.8, 0.1, 0.3, 0.2


@dataclass(frozen=True)
class DialogState:
    """What the wizard's page knows when it asks for suggestions."""

    last_label: Optional[str] = None      # the last reply the wizard picked (STAR's ActionLabel)
    queried: bool = False                 # a query was made since that reply
    nothing_found: bool = False           # and it returned no item
    user_text: str = ""                   # the user's last utterance
    draft: str = ""                       # what the wizard has typed so far, if anything
    item: Optional[Mapping[str, Any]] = None  # the knowledge-base item the wizard selected
    used: tuple[str, ...] = ()            # every reply picked so far, oldest first


@dataclass(frozen=True)
class Suggestion:
    label: str
    text: str
    score: float
    missing: tuple[str, ...] = field(default=())  # slots the item could not fill (left as {slot})


def words(text: str) -> frozenset[str]:
    return frozenset(w for w in WORD.findall(text.lower()) if w not in STOPWORDS)


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Cosine of two word sets: 1 when equal, 0 when disjoint, length-fair for short templates."""
    if not a or not b:
        return 0.0
    return len(a & b) / math.sqrt(len(a) * len(b))


def _field_for(slot: str, item: Mapping[str, Any]) -> Optional[str]:
    wanted = slot.replace("_", "").lower()
    by_name = {key.lower(): key for key in item}
    if wanted in by_name:
        return by_name[wanted]
    for candidate in SLOT_FIELDS.get(slot, ()):
        if candidate in item:
            return candidate
    last = slot.rsplit("_", 1)[-1]
    if last in by_name:  # hotel_name -> Name
        return by_name[last]
    prefixed = [key for low, key in by_name.items() if low.startswith(wanted)]
    return prefixed[0] if len(prefixed) == 1 else None


def _render(value: Any, spec: str) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if spec == "d" and isinstance(value, (int, float)):
        return str(int(value))
    return str(value)


def fill(template: Template, item: Optional[Mapping[str, Any]]) -> tuple[str, tuple[str, ...]]:
    """The template's text with every slot the item can fill; the rest stay ``{slot}`` and are returned."""
    values, missing = {}, []
    for slot in template.slots:
        key = _field_for(slot.name, item) if item else None
        if key is None:
            missing.append(slot.name)
            values[slot.name] = "{" + slot.name + "}"
        else:
            values[slot.name] = _render(item[key], slot.spec)
    text = template.text
    for slot in template.slots:
        text = re.sub(r"\{" + slot.name + r"(:[^}]*)?\}", lambda _: values[slot.name], text)
    return text, tuple(dict.fromkeys(missing))


@dataclass(frozen=True)
class Ranker:
    """A task's templates with the graph facts precomputed, so ranking is a loop of additions."""

    schema: TaskSchema
    template_words: Mapping[str, frozenset[str]]
    branch_targets: frozenset[str]
    query_targets: frozenset[str]

    @classmethod
    def for_schema(cls, schema: TaskSchema) -> "Ranker":
        graph = schema.graph
        targets = set(graph.edges.values())
        # nodes nothing leads to (yes/no, available, query_success...) are outcomes of a question or a query
        roots = [n for n in graph.edges if n not in targets and n != graph.start]
        after_roots = {graph.edges[r] for r in roots}
        after_queries = {graph.edges[n] for n in graph.edges if schema.templates[n].is_query}
        text_words = {t.label: words(t.text + " " + t.label.replace("_", " ")) for t in schema.replies()}
        return cls(schema, text_words, frozenset(after_roots), frozenset(after_queries | after_roots))

    def _graph_score(self, label: str, state: DialogState, ahead: list[str]) -> float:
        graph = self.schema.graph
        if state.last_label is None and not state.queried:
            return NEXT_NODE if label == graph.start else 0.0
        if state.queried:
            if "nothing_found" in label:
                return NEXT_NODE if state.nothing_found else 0.0
            return NEXT_NODE if label in self.query_targets else 0.0
        following = graph.successor(state.last_label) if state.last_label else None
        if ahead and label == ahead[0]:
            return NEXT_NODE
        if label in self.branch_targets and (following is None or following in self.schema.templates
                                             and self.schema.templates[following].is_query):
            return BRANCH
        if label in ahead[1:2]:
            return SKIP_ONE
        return 0.0

    def _ahead(self, state: DialogState) -> list[str]:
        """The replies along the chart from the last one, skipping any already used (the user may have
        answered two questions at once), up to the next query."""
        graph, found, node, seen = self.schema.graph, [], state.last_label, set()
        while node is not None and node not in seen and len(found) < 2:
            seen.add(node)
            node = graph.successor(node)
            if node is None or self.schema.templates[node].is_query:
                break
            if node not in state.used:
                found.append(node)
        return found

    def rank(self, state: DialogState, limit: Optional[int] = None) -> list[Suggestion]:
        """Every reply template, best first, filled from ``state.item``; ties keep the schema's order."""
        user, draft = words(state.user_text), words(state.draft)
        item = words(" ".join(str(v) for v in state.item.values())) if state.item and state.queried else None
        ahead = self._ahead(state)
        scored = []
        for position, template in enumerate(self.schema.replies()):
            label = template.label
            score = self._graph_score(label, state, ahead)
            if any(part in label for part in CLOSING):
                score = max(score, CLOSING_BASE)
            vocabulary = self.template_words[label]
            score += USER_WORDS * _overlap(user, vocabulary) + DRAFT_WORDS * _overlap(draft, vocabulary)
            if item:  # a query's outcome message says which branch follows ("The venue is available.")
                score += ITEM_WORDS * _overlap(item, vocabulary)
            if template.slots:
                can_fill = state.item is not None and all(_field_for(s.name, state.item)
                                                          for s in template.slots)
                score += FILLABLE if can_fill else -UNFILLABLE
            if label == state.last_label:
                score -= REPEAT
            scored.append((-score, position, template))
        scored.sort(key=lambda entry: (entry[0], entry[1]))
        chosen = scored if limit is None else scored[:limit]
        out = []
        for negative, _, template in chosen:
            text, missing = fill(template, state.item)
            out.append(Suggestion(template.label, text, -negative, missing))
        return out


def rank(schema: TaskSchema, state: DialogState, limit: Optional[int] = None) -> list[Suggestion]:
    """One-off ranking; callers that rank often keep a :class:`Ranker` per task."""
    return Ranker.for_schema(schema).rank(state, limit)


def labels(suggestions: Iterable[Suggestion]) -> list[str]:
    return [s.label for s in suggestions]
