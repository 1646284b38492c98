"""Reply suggestions for a STAR wizard: the task's templates ranked for the dialog so far, then filled.

Two parts add up to each template's score, as in STAR's schema-guided model (its section 5.2, a schema
distribution and a classifier combined):

- **The schema prior**, for any task, a requester's new one included: a few facts about a template and the
  dialog (is it the flow chart's next node after the last reply, does it follow the last query's outcome,
  does it share words with the user's last utterance or the wizard's draft, can the selected item fill it),
  weighed by weights learned on STAR's training split across all its tasks.
- **The next-action model**, for a task STAR's training split has: a multinomial logistic regression over
  what the page knows (the replies picked so far, the user's words, the draft's words, the last query's
  outcome), one weight per feature and reply. ``turkflow star train`` fits both (``model.py``) and writes
  them to ``next_action.npz`` beside this module; it is read once per process, with no network.

Two rules sit above the scores, because a wrong click sends the reply: a template that contradicts the
last query's outcome (an "available" or "booked" reply after the knowledge base said unavailable, failed or
found nothing) is never suggested, and neither are the flow chart's non-replies (the user-answer and
query-outcome nodes "Yes", "Available", "Failed" that STAR never offered its wizards).
Templates are filled from the selected item and render yes/no fields and lists as STAR's logged replies do
("It does not have a balcony and has an elevator", "near a School and a Park").
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from turkflow.errors import InvalidDocument
from turkflow.protocols.star.schemas import TaskSchema, Template

WORD = re.compile(r"[a-z0-9']+")
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
MODEL_PATH = Path(__file__).with_name("next_action.npz")

# ---- the dialog as the page knows it --------------------------------------------------------------------


@dataclass(frozen=True)
class DialogState:
    """What the wizard's page knows about the selected task when it asks for suggestions."""

    last_label: Optional[str] = None      # the last reply the wizard picked (STAR's ActionLabel)
    queried: bool = False                 # a query was made since that reply
    nothing_found: bool = False           # the task's last query returned no item
    user_text: str = ""                   # the user's last utterance
    draft: str = ""                       # what the wizard has typed so far, if anything
    item: Optional[Mapping[str, Any]] = None  # the selected knowledge-base item (the last query's result)
    used: tuple[str, ...] = ()            # every reply picked so far, oldest first


@dataclass(frozen=True)
class Suggestion:
    label: str
    text: str
    score: float
    missing: tuple[str, ...] = field(default=())  # slots the item could not fill (left as {slot})


def tokens(text: str) -> list[str]:
    return WORD.findall(text.lower())


def words(text: str) -> frozenset[str]:
    return frozenset(w for w in tokens(text) if w not in STOPWORDS)


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Cosine of two word sets: 1 when equal, 0 when disjoint, length-fair for short templates."""
    if not a or not b:
        return 0.0
    return len(a & b) / math.sqrt(len(a) * len(b))


# ---- the last query's outcome and the templates that would contradict it ------------------------------

EMPTY, FAILED, SUCCEEDED, FOUND = "empty", "failed", "succeeded", "found"
# what a booking or checking API answers is in a message or status field (STAR: Message, ReservationStatus,
# RequestStatus, ChangeStatus, Confirmation); these words make an answer a refusal
_REFUSAL = re.compile(r"\b(unavailable|unable|unauthori[sz]ed|unsuccessful\w*|not|no|fail\w*|conflict\w*|too|"
                      r"sorry|cannot|can't|denied|another|must provide)\b")
# a reply announces an outcome when it says one of these; it announces a refusal when it also negates
_OUTCOME_WORDS = re.compile(r"\b(available|book\w*|reserv\w*|success\w*|succeeded|confirm\w*|schedul\w*|"
                            r"found|match\w*|submitted|unlocked|recovered|changed)\b")
# "I am only able to help you reserve a room" claims nothing
_CAPABILITY = re.compile(r"\b(help you|able to|i can)\b")
_NEGATION = re.compile(r"\b(not|no|unfortunately|sorry|unavailable|unable|cannot|can't|fail\w*)\b")


def answer_text(item: Mapping[str, Any]) -> str:
    """The words of an outcome API's answer (empty for a search result)."""
    return " ".join(str(v) for k, v in item.items()
                    if isinstance(v, str) and (k == "Message" or k.endswith("Status") or k == "Confirmation"))


def outcome_of(state: DialogState) -> Optional[str]:
    """What the task's last query said: nothing found, an answer that refuses or accepts, or a found item."""
    if state.nothing_found:
        return EMPTY
    if state.item is None:
        return None
    answer = answer_text(state.item)
    if not answer:
        return FOUND
    return FAILED if _REFUSAL.search(answer.lower()) else SUCCEEDED


def claims(text: str) -> int:
    """+1 when a template's statements announce success, -1 a refusal, 0 neither (questions say nothing)."""
    text = re.sub(r"\{[^}]*\}", " ", text).lower()
    said = " ".join(s for s in re.split(r"(?<=[.!?\n])", text)
                    if not s.strip().endswith("?") and not _CAPABILITY.search(s))
    if not _OUTCOME_WORDS.search(said):
        return 0
    return -1 if _NEGATION.search(said) else 1


def polarities(schema: TaskSchema) -> dict[str, int]:
    """Each reply's claim about a query's outcome. A reply the flow chart puts after an outcome node
    ("Available" -> "Can I book it?") claims that outcome even when its own words do not."""
    found = {t.label: claims(t.text) for t in schema.replies()}
    targets = set(schema.graph.edges.values())
    for node, following in schema.graph.edges.items():
        template = schema.templates.get(node)
        if node in targets or node == schema.graph.start or template is None or following not in found:
            continue
        if template.is_query and node not in ("query_success", "query_failure"):
            continue
        said = template.text.lower().strip(" .!")
        if said in ("yes", "no") or len(tokens(said)) > 2:  # the user's answer, not the knowledge base's
            continue
        if node == "query_failure" or _REFUSAL.search(said):
            found[following] = -1
        elif node == "query_success" or _OUTCOME_WORDS.search(said):
            found[following] = 1
    return found


def contradicts(polarity: int, outcome: Optional[str]) -> bool:
    """A success claimed after a refusal or an empty result, or a refusal claimed after a success."""
    return (polarity > 0 and outcome in (EMPTY, FAILED)) or (polarity < 0 and outcome == SUCCEEDED)


# ---- filling a template as STAR rendered it -------------------------------------------------------------


@dataclass(frozen=True)
class Renderings:
    """How STAR's logged replies render slot values, learned per slot name by ``turkflow star train``.

    ``booleans``: slot -> (text when true, text when false), each may name other item fields as ``{Field}``
    ("has a {BalconySide} facing balcony"); ``lists``: slot -> (each element, with ``{}`` for it; the
    separator; the last separator); ``values``: slot -> value -> text ("Economy" -> "an Economy").
    """

    booleans: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    lists: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)
    values: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"booleans": {k: list(v) for k, v in sorted(self.booleans.items())},
                "lists": {k: list(v) for k, v in sorted(self.lists.items())},
                "values": {k: dict(sorted(v.items())) for k, v in sorted(self.values.items())}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Renderings":
        return cls({k: tuple(v) for k, v in data.get("booleans", {}).items()},
                   {k: tuple(v) for k, v in data.get("lists", {}).items()},
                   {k: dict(v) for k, v in data.get("values", {}).items()})


def field_for(slot: str, item: Mapping[str, Any]) -> Optional[str]:
    """The item field a template slot shows."""
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


def _boolean_phrase(slot: str, value: bool) -> str:
    """A yes/no slot no logged reply showed: said from its name (has_pool -> "has a pool")."""
    head, _, rest = slot.partition("_")
    thing = rest.replace("_", " ")
    if head == "has" and thing:
        article = "an" if thing[0] in "aeiou" else "a"
        return f"has {article} {thing}" if value else f"does not have {article} {thing}"
    if head == "is" and thing:
        return f"is {thing}" if value else f"is not {thing}"
    if head in ("takes", "allows", "offers", "serves") and thing:
        return f"{head} {thing}" if value else f"does not {head[:-1]} {thing}"
    return "yes" if value else "no"


def _natural(parts: Sequence[str], separator: str = ", ", last: str = " and ") -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return separator.join(parts[:-1]) + last + parts[-1]


def render(slot: str, value: Any, spec: str, item: Mapping[str, Any], renderings: Renderings) -> str:
    if isinstance(value, bool):
        learned = renderings.booleans.get(slot)
        if learned is None:
            return _boolean_phrase(slot, value)
        pattern = learned[0 if value else 1]
        return re.sub(r"\{(\w+)\}", lambda m: str(item[m.group(1)]) if m.group(1) in item else m.group(0),
                      pattern)
    if isinstance(value, (list, tuple)):
        element, separator, last = renderings.lists.get(slot, ("{}", ", ", " and "))
        return _natural([element.replace("{}", str(v)) for v in value], separator, last)
    if spec == "d" and isinstance(value, float) and value.is_integer():
        value = int(value)
    return renderings.values.get(slot, {}).get(str(value), str(value))


def fill(template: Template, item: Optional[Mapping[str, Any]],
         renderings: Optional[Renderings] = None) -> tuple[str, tuple[str, ...]]:
    """The template's text with every slot the item can fill; the rest stay ``{slot}`` and are returned."""
    if renderings is None:
        renderings = shipped_model().renderings if MODEL_PATH.exists() else Renderings()
    values, missing = {}, []
    for slot in template.slots:
        key = field_for(slot.name, item) if item else None
        if key is None:
            missing.append(slot.name)
            values[slot.name] = "{" + slot.name + "}"
        else:
            values[slot.name] = render(slot.name, item[key], slot.spec, item, renderings)
    text = template.text
    for slot in template.slots:
        text = re.sub(r"\{" + slot.name + r"(:[^}]*)?\}", lambda _: values[slot.name], text)
    return text, tuple(dict.fromkeys(missing))


# ---- the schema prior: features of (dialog, template) that hold for any task ---------------------------

PRIOR_FEATURES = (
    "next_node", "second_node", "start_first", "start_again", "branch_target", "after_query_node",
    "after_outcome_agrees", "after_outcome_other", "nothing_found_reply", "claims_found_after_query",
    "user_words", "draft_words", "item_words", "fillable", "unfillable", "repeat", "used_before",
    "closing", "out_of_scope", "closing_after_user_thanks", "question_after_question", "chart_distance",
    "previous_node", "ask_after_query", "not_on_chart", "after_the_answers_node",
)
_THANKS = re.compile(r"\b(thanks?|thank you|bye|goodbye|that's all|that is all|no,? that|nothing else)\b")


@dataclass(frozen=True)
class SchemaFacts:
    """A task's graph facts, computed once per task: what follows queries and outcome nodes, each reply's
    words and claim, which labels are replies at all."""

    schema: TaskSchema
    replies: tuple[str, ...]                  # labels a wizard may be offered, in the schema's order
    template_words: Mapping[str, frozenset[str]]
    polarity: Mapping[str, int]
    after_roots: frozenset[str]
    after_queries: frozenset[str]
    after_success: frozenset[str]
    after_failure: frozenset[str]
    on_chart: frozenset[str]
    after_answer: Mapping[str, tuple[frozenset[str], ...]]  # reply -> words of the outcome nodes before it

    @classmethod
    def of(cls, schema: TaskSchema, non_replies: Iterable[str]) -> "SchemaFacts":
        graph, excluded = schema.graph, set(non_replies)
        targets = set(graph.edges.values())
        roots = [n for n in graph.edges if n not in targets and n != graph.start]
        polarity = polarities(schema)
        success = {label for label, claim in polarity.items() if claim > 0}
        failure = {label for label, claim in polarity.items() if claim < 0} | {
            t.label for t in schema.replies() if "nothing_found" in t.label}
        replies = tuple(t.label for t in schema.replies() if t.label not in excluded)
        words_of = {t.label: words(t.text + " " + t.label.replace("_", " ")) for t in schema.replies()}
        after_answer: dict[str, tuple[frozenset[str], ...]] = {}
        for root in roots:  # "Available" -> the reply for an available slot
            said = frozenset(tokens(schema.templates[root].text))
            if said and not said <= {"yes", "no"}:  # the user's answers are not in the knowledge base's
                after_answer[graph.edges[root]] = (*after_answer.get(graph.edges[root], ()), said)
        return cls(schema, replies, words_of, polarity, frozenset(graph.edges[r] for r in roots),
                   frozenset(graph.edges[n] for n in graph.edges if schema.templates[n].is_query),
                   frozenset(success), frozenset(failure), frozenset(graph.nodes), after_answer)

    def ahead(self, state: DialogState, steps: int = 4) -> list[str]:
        """The replies along the chart from the last one, skipping any already used (the user may have
        answered two questions at once), up to the next query."""
        graph, found, node, seen = self.schema.graph, [], state.last_label, set()
        while node is not None and node not in seen and len(found) < steps:
            seen.add(node)
            node = graph.successor(node)
            if node is None or self.schema.templates[node].is_query:
                break
            if node not in state.used:
                found.append(node)
        return found

    def features(self, state: DialogState, labels: Sequence[str]) -> np.ndarray:
        """One row of PRIOR_FEATURES per label."""
        graph = self.schema.graph
        user, draft = words(state.user_text), words(state.draft)
        outcome = outcome_of(state)
        item_words = (words(" ".join(str(v) for v in state.item.values()))
                      if state.item and state.queried else frozenset())
        ahead = self.ahead(state)
        fresh = state.last_label is None and not state.queried
        following = graph.successor(state.last_label) if state.last_label else None
        at_query = following is None or (following in self.schema.templates
                                          and self.schema.templates[following].is_query)
        previous = set(graph.predecessors(state.last_label)) if state.last_label else set()
        thanks = bool(_THANKS.search(state.user_text.lower()))
        answer = frozenset(tokens(answer_text(state.item))) if state.queried and state.item else frozenset()
        user_asks = state.user_text.strip().endswith("?")
        used = set(state.used)
        rows = np.zeros((len(labels), len(PRIOR_FEATURES)), dtype=np.float32)
        for i, label in enumerate(labels):
            template = self.schema.templates[label]
            vocabulary = self.template_words[label]
            closing = any(part in label for part in CLOSING[:3])
            can_fill = bool(template.slots) and state.item is not None and all(
                field_for(s.name, state.item) for s in template.slots)
            distance = ahead.index(label) + 1 if label in ahead else 0
            rows[i] = (
                bool(ahead) and label == ahead[0],
                label in ahead[1:2],
                fresh and label == graph.start,
                not fresh and label == graph.start,
                not state.queried and label in self.after_roots and at_query,
                state.queried and label in self.after_queries,
                state.queried and ((outcome in (SUCCEEDED, FOUND) and label in self.after_success)
                                   or (outcome in (EMPTY, FAILED) and label in self.after_failure)),
                state.queried and label in self.after_roots | self.after_success | self.after_failure,
                outcome == EMPTY and "nothing_found" in label,
                state.queried and outcome == FOUND and can_fill,
                _overlap(user, vocabulary),
                _overlap(draft, vocabulary),
                _overlap(item_words, vocabulary) if item_words else 0.0,
                can_fill,
                bool(template.slots) and not can_fill,
                label == state.last_label,
                label in used and label != state.last_label,
                closing,
                label == "out_of_scope",
                closing and thanks,
                user_asks and template.text.strip().endswith("?"),
                1.0 / distance if distance else 0.0,
                label in previous,
                state.queried and template.text.strip().endswith("?") and not template.slots,
                label not in self.on_chart,
                bool(answer) and any(said <= answer for said in self.after_answer.get(label, ())),
            )
        return rows


# ---- the model's view of the dialog -----------------------------------------------------------------------

_YES = re.compile(r"^\W*(yes|yeah|yep|sure|ok|okay|please|correct|right|that's right|sounds good)\b")
_NO = re.compile(r"^\W*(no|nope|not|nah)\b")


def state_features(state: DialogState) -> list[str]:
    """The dialog's features for the next-action model: the replies picked, the user's and the draft's
    words, the last query's outcome."""
    last = state.last_label or "-"
    outcome = outcome_of(state) or "-"
    queried = "q" if state.queried else "-"
    user = tokens(state.user_text)
    said = state.user_text.lower()
    answer = "yes" if _YES.search(said) else "no" if _NO.search(said) else "-"
    found = ["bias", f"last={last}", f"last={last}|{queried}|{outcome}", f"outcome={queried}|{outcome}",
             f"last={last}|answer={answer}", f"n={min(len(state.used), 10)}",
             f"item={state.item is not None}"]
    if len(state.used) >= 2:
        found.append(f"prev={state.used[-2]}")
        found.append(f"prev={state.used[-2]}|last={last}")
    found += [f"used={label}" for label in dict.fromkeys(state.used)]
    found += [f"u={w}" for w in dict.fromkeys(user)]
    found += [f"uu={a}_{b}" for a, b in dict.fromkeys(zip(user, user[1:]))]
    if state.queried and state.item is not None:
        found += [f"m={w}" for w in dict.fromkeys(tokens(answer_text(state.item)))]
    if state.draft:
        draft = tokens(state.draft)
        found += [f"d={w}" for w in dict.fromkeys(draft)]
        found += [f"dd={a}_{b}" for a, b in dict.fromkeys(zip(draft, draft[1:]))]
    return found


# ---- the trained model -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskWeights:
    """One STAR task's part of the model: a weight per (feature, reply) and the replies STAR offered."""

    labels: tuple[str, ...]
    features: Mapping[str, int]
    weights: np.ndarray  # len(features) x len(labels)

    def scores(self, feature_names: Iterable[str]) -> np.ndarray:
        rows = [self.features[f] for f in feature_names if f in self.features]
        if not rows:
            return np.zeros(len(self.labels), dtype=np.float32)
        return self.weights[rows].sum(axis=0, dtype=np.float32)


@dataclass(frozen=True)
class NextActionModel:
    """What ``turkflow star train`` learned from STAR's training split."""

    prior: np.ndarray                         # one weight per PRIOR_FEATURES entry
    tasks: Mapping[str, TaskWeights]
    non_replies: Mapping[str, frozenset[str]]  # per task: schema labels STAR never offered as replies
    common_non_replies: frozenset[str]          # labels no task ever offered ("yes", "available", ...)
    renderings: Renderings
    meta: Mapping[str, Any] = field(default_factory=dict)

    def non_replies_of(self, schema: TaskSchema) -> frozenset[str]:
        """Labels never offered: STAR's own list for its tasks; for a new task, the labels no STAR task
        offered and the graph's answer nodes (nothing leads to them, a word or two: "Yes", "Booked")."""
        known = self.non_replies.get(schema.name)
        if known is not None and schema.name in self.tasks:
            return known
        graph = schema.graph
        targets = set(graph.edges.values())
        answers = {n for n in graph.edges if n not in targets and n != graph.start
                   and len(tokens(schema.templates[n].text)) <= 2}
        return frozenset((self.common_non_replies & set(schema.templates)) | answers)

    def save(self, path: Path) -> None:
        """One compressed ``.npz``: the arrays, and the rest as a JSON document in a byte array."""
        arrays = {"prior": self.prior.astype(np.float32)}
        tasks = {}
        for n, (name, part) in enumerate(sorted(self.tasks.items())):
            arrays[f"w{n}"] = part.weights.astype(np.float16)
            tasks[name] = {"array": f"w{n}", "labels": list(part.labels),
                           "features": sorted(part.features, key=part.features.__getitem__)}
        document = {"prior_features": list(PRIOR_FEATURES), "tasks": tasks,
                    "non_replies": {k: sorted(v) for k, v in sorted(self.non_replies.items())},
                    "common_non_replies": sorted(self.common_non_replies),
                    "renderings": self.renderings.as_json(), "meta": dict(self.meta)}
        arrays["document"] = np.frombuffer(json.dumps(document, sort_keys=True).encode(), dtype=np.uint8)
        with open(path, "wb") as out:
            np.savez_compressed(out, **arrays)

    @classmethod
    def load(cls, path: Path) -> "NextActionModel":
        try:
            with np.load(path, allow_pickle=False) as data:
                document = json.loads(bytes(data["document"]).decode())
                if tuple(document["prior_features"]) != PRIOR_FEATURES:
                    raise InvalidDocument(f"{path}: trained with other schema features; "
                                          "run turkflow star train")
                tasks = {name: TaskWeights(tuple(part["labels"]),
                                           {f: i for i, f in enumerate(part["features"])},
                                           data[part["array"]].astype(np.float32))
                         for name, part in document["tasks"].items()}
                prior = data["prior"].astype(np.float32)
        except (OSError, ValueError, KeyError) as exc:
            raise InvalidDocument(f"{path}: cannot read the next-action model: {exc}") from None
        return cls(prior, tasks, {k: frozenset(v) for k, v in document["non_replies"].items()},
                   frozenset(document["common_non_replies"]), Renderings.from_json(document["renderings"]),
                   document.get("meta", {}))


@lru_cache(maxsize=1)
def shipped_model() -> NextActionModel:
    """The model shipped with turkflow (``next_action.npz``), read once per process."""
    return NextActionModel.load(MODEL_PATH)


# ---- ranking ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ranker:
    """A task's templates with the graph facts precomputed and the model's part for the task, if any."""

    schema: TaskSchema
    facts: SchemaFacts
    model: Optional[NextActionModel]
    learned: Optional[TaskWeights]
    columns: np.ndarray  # for each reply in facts.replies, its column in learned.weights, or -1

    @classmethod
    def for_schema(cls, schema: TaskSchema, model: Optional[NextActionModel] = None,
                   learned: bool = True) -> "Ranker":
        """``model`` defaults to the shipped one; ``learned=False`` ranks with the schema prior only, as a
        task STAR never had is ranked."""
        if model is None and MODEL_PATH.exists():
            model = shipped_model()
        non_replies = model.non_replies_of(schema) if model else frozenset()
        facts = SchemaFacts.of(schema, non_replies)
        part = model.tasks.get(schema.name) if model and learned else None
        index = {label: i for i, label in enumerate(part.labels)} if part else {}
        columns = np.array([index.get(label, -1) for label in facts.replies], dtype=np.int64)
        return cls(schema, facts, model, part, columns)

    def scores(self, state: DialogState) -> np.ndarray:
        """A score per reply of ``facts.replies`` (higher is better)."""
        prior = self.facts.features(state, self.facts.replies)
        if self.model is None:
            weights = np.ones(len(PRIOR_FEATURES), dtype=np.float32)
        else:
            weights = self.model.prior
        score = prior @ weights
        if self.learned is not None:
            learned = self.learned.scores(state_features(state))
            known = self.columns >= 0
            score[known] += learned[self.columns[known]]
        return score

    def rank(self, state: DialogState, limit: Optional[int] = None) -> list[Suggestion]:
        """The task's replies, best first, filled from ``state.item``; ties keep the schema's order.
        Replies that contradict the last query's outcome are left out."""
        score = self.scores(state)
        outcome = outcome_of(state)
        order = sorted(range(len(score)), key=lambda i: (-score[i], i))
        renderings = self.model.renderings if self.model else Renderings()
        out = []
        for i in order:
            label = self.facts.replies[i]
            if contradicts(self.facts.polarity.get(label, 0), outcome):
                continue
            text, missing = fill(self.schema.templates[label], state.item, renderings)
            out.append(Suggestion(label, text, float(score[i]), missing))
            if limit is not None and len(out) >= limit:
                break
        return out


def rank(schema: TaskSchema, state: DialogState, limit: Optional[int] = None) -> list[Suggestion]:
    """One-off ranking; callers that rank often keep a :class:`Ranker` per task."""
    return Ranker.for_schema(schema).rank(state, limit)


def labels(suggestions: Iterable[Suggestion]) -> list[str]:
    return [s.label for s in suggestions]
