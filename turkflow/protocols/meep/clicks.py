"""What a MEEP agent can do, one click at a time, each returning the log record it makes.

The agent types nothing. A message is a sequence of picked templates whose blanks are filled with words
of the user's last message or fields of results in the panel; an API call's arguments are filled the same
way, from any of the user's messages so far (MEEP's agents built "Starbucks Culver City" from two turns).
Each function takes the log so far and plain values as a page would send them, refuses anything else
with an ``InvalidInput`` naming the field, and returns the record without adding it: the caller adds it
(``log.add``) or, later, writes it as dialog events (``turkflow.protocols.meep.events``).

A filler as a page sends it: ``{"tokens": [5, 7]}`` (words of the user's last message, in click order),
``{"message": 1, "tokens": [5]}`` (of user message 1; API arguments only) or
``{"result": "v1", "field": "name"}``.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional, Sequence

from turkflow.errors import InvalidInput
from turkflow.protocols.meep.kb import NUMBER, KnowledgeBase
from turkflow.protocols.meep.log import (
    SOURCE,
    ApiCall,
    Click,
    FieldClick,
    Filler,
    Result,
    Blank,
    Piece,
    Send,
    SessionLog,
    TemplateAdded,
    TemplatePick,
    TemplateWord,
    UserMessage,
    WordClick,
)
from turkflow.protocols.meep.templates import add_template as added_to, blanks, render, show
from turkflow.protocols.meep.tokens import span_text, tokenize

MAX_MESSAGE = 1000
MAX_CLICKS = 20  # words in one filler
MAX_PIECES = 40  # words and blanks of one new template
_NO_SPACE_BEFORE = set(".,!?;:)%'’")
_NO_SPACE_AFTER = set("($")
_NUMBER = re.compile(r"[-+]?[0-9]+(?:\.[0-9]+)?")


def start(kb: KnowledgeBase, source: Optional[Mapping[str, Any]] = None) -> SessionLog:
    """An empty log whose panel holds the start location (the scenario's, else the knowledge base's)."""
    return SessionLog(given=(Result(SOURCE, "start", dict(source if source is not None else kb.start)),))


# ---- what the agent's page shows --------------------------------------------------------------------------


def panel(log: SessionLog) -> dict[str, Result]:
    """The results panel: the start location, then every API result in the order it came."""
    found = {r.id: r for r in log.given}
    for record in log.records:
        if isinstance(record, ApiCall):
            found.update((r.id, r) for r in record.results)
    return found


def messages(log: SessionLog) -> dict[int, str]:
    """The user's messages by number."""
    return {r.number: r.text for r in log.records if isinstance(r, UserMessage)}


def pending(log: SessionLog) -> list[TemplatePick]:
    """The templates picked since the agent last sent a message: the message being built."""
    picks: list[TemplatePick] = []
    for record in log.records:
        if isinstance(record, TemplatePick):
            picks.append(record)
        elif isinstance(record, Send):
            picks = []
    return picks


# ---- resolving clicked values (shared with executing a log) ---------------------------------------------


def value_of(clicks: Sequence[Click], results: Mapping[str, Result], said: Mapping[int, str],
             field: str) -> Any:
    """The value the clicks give now: the words as the user wrote them, or the result field's value."""
    if len(clicks) == 1 and isinstance(clicks[0], FieldClick):
        click = clicks[0]
        if click.result not in results:
            raise InvalidInput(f"there is no result {click.result!r} in the panel", field)
        if click.field not in results[click.result].fields:
            raise InvalidInput(f"result {click.result} has no field {click.field!r}", field)
        return results[click.result].fields[click.field]
    if not clicks or not all(isinstance(c, WordClick) for c in clicks):
        raise InvalidInput("click words of one user message, or one result field", field)
    numbers = {c.message for c in clicks}
    if len(numbers) != 1:
        raise InvalidInput("click words of one user message", field)
    number = numbers.pop()
    if number not in said:
        raise InvalidInput(f"there is no user message {number}", field)
    tokens = tokenize(said[number])
    chosen = []
    for click in clicks:
        if not 0 <= click.token < len(tokens):
            raise InvalidInput(f"user message {number} has no token {click.token}", field)
        chosen.append(tokens[click.token])
    return span_text(said[number], chosen)


def as_argument(value: Any, kind: str, field: str) -> Any:
    """A clicked value as an API argument of ``kind``: a clicked word can be a number ("3"), a number
    can be text."""
    if kind == NUMBER:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
            text = value.strip()
            return float(text) if "." in text else int(text)
        raise InvalidInput(f"expected a number, clicked {show(value)[:40]!r}", field)
    return value if isinstance(value, str) else show(value)


def _clicks(raw: Any, log: SessionLog, field: str, *, last_message_only: bool) -> tuple[Click, ...]:
    """A filler as a page sent it, as clicks; free text and words of an absent message are refused."""
    if isinstance(raw, str):
        raise InvalidInput("no free text: click words of the user's message or a result field", field)
    if not isinstance(raw, Mapping):
        raise InvalidInput("expected {tokens: [...]} or {result, field}", field)
    if "result" in raw or "field" in raw:
        if set(raw) != {"result", "field"}:
            raise InvalidInput("a result field is {result, field} and nothing else", field)
        results = panel(log)
        result, name = raw["result"], raw["field"]
        if not isinstance(result, str) or result not in results:
            raise InvalidInput(f"not a result in the panel: {str(result)[:40]!r}", field)
        if not isinstance(name, str) or name not in results[result].fields:
            raise InvalidInput(f"result {result} has no field {str(name)[:40]!r}", field)
        return (FieldClick(result, name, results[result].fields[name]),)
    if not set(raw) <= {"tokens", "message"} or "tokens" not in raw:
        raise InvalidInput("expected {tokens: [...]} or {result, field}", field)
    said = messages(log)
    if not said:
        raise InvalidInput("the user has said nothing yet", field)
    last = max(said)
    number = raw.get("message", last)
    if isinstance(number, bool) or not isinstance(number, int) or number not in said:
        raise InvalidInput(f"no user message {str(number)[:20]!r}", field)
    if last_message_only and number != last:
        raise InvalidInput(f"click words of the user's last message ({last})", field)
    indexes = raw["tokens"]
    if (not isinstance(indexes, list) or not indexes or len(indexes) > MAX_CLICKS
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in indexes)
            or len(set(indexes)) != len(indexes)):
        raise InvalidInput(f"expected 1 to {MAX_CLICKS} different token numbers", field)
    tokens = tokenize(said[number])
    outside = [i for i in indexes if not 0 <= i < len(tokens)]
    if outside:
        raise InvalidInput(f"user message {number} has no token {outside[0]}", field)
    return tuple(WordClick(number, i, tokens[i].text) for i in indexes)


# ---- the clicks -----------------------------------------------------------------------------------------


def user_says(log: SessionLog, text: Any) -> UserMessage:
    """The user's free text (the only free text in MEEP); it waits until the agent's message is sent."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("write a message", "text")
    text = text.strip()
    if len(text) > MAX_MESSAGE:
        raise InvalidInput(f"write at most {MAX_MESSAGE} characters", "text")
    if pending(log):
        raise InvalidInput("the agent's message is not sent yet", "turn")
    return UserMessage(len(messages(log)) + 1, text)


def call_api(log: SessionLog, kb: KnowledgeBase, api_name: Any, arguments: Any) -> ApiCall:
    """Call an API with clicked arguments; its results join the panel as ``v<n>``."""
    api = kb.api(api_name)
    if not isinstance(arguments, Mapping):
        raise InvalidInput("expected the arguments as {name: filler}", "arguments")
    for name in arguments:
        if name not in api.arguments:
            raise InvalidInput(f"{api.name} takes no such argument", f"arguments.{str(name)[:40]}")
    fillers = {}
    for name, kind in api.arguments.items():
        field = f"arguments.{name}"
        if name not in arguments:
            raise InvalidInput("click a value for it", field)
        clicks = _clicks(arguments[name], log, field, last_message_only=False)
        value = as_argument(value_of(clicks, panel(log), messages(log), field), kind, field)
        fillers[name] = Filler(clicks, value)
    answers = kb.call(api.name, {name: f.value for name, f in fillers.items()})
    numbered = sum(len(r.results) for r in log.records if isinstance(r, ApiCall))
    results = tuple(Result(f"v{numbered + n}", api.name, answer) for n, answer in enumerate(answers, 1))
    return ApiCall(api.name, fillers, results)


def pick_template(log: SessionLog, templates: Mapping[str, str], template_id: Any,
                  fillers: Any) -> TemplatePick:
    """Add a template to the agent's message, its blanks filled in order by the clicked fillers."""
    if not isinstance(template_id, str) or template_id not in templates:
        raise InvalidInput("not one of the templates", "template")
    if not isinstance(fillers, list):
        raise InvalidInput("expected a list of fillers, one per blank", "fillers")
    text = templates[template_id]
    if len(fillers) != blanks(text):
        raise InvalidInput(f"this template has {blanks(text)} blank(s), got {len(fillers)} filler(s)",
                           "fillers")
    made = []
    for n, raw in enumerate(fillers):
        field = f"fillers[{n}]"
        clicks = _clicks(raw, log, field, last_message_only=True)
        made.append(Filler(clicks, value_of(clicks, panel(log), messages(log), field)))
    return TemplatePick(template_id, text, tuple(made), render(text, [f.value for f in made]))


def drive_call(log: SessionLog, kb: KnowledgeBase) -> Optional[ApiCall]:
    """The agent's last call of a ``drive`` API (MEEP's ``start_driving``): the dialog's destination."""
    calls = [r for r in log.records if isinstance(r, ApiCall) and r.results
             and r.api in kb.apis and kb.apis[r.api].function == "drive"]
    return calls[-1] if calls else None


def destination(log: SessionLog, kb: KnowledgeBase) -> Optional[dict[str, Any]]:
    """Where the car is driving (``latitude``, ``longitude``), or None while the agent has not started."""
    call = drive_call(log, kb)
    if call is None:
        return None
    fields = call.results[0].fields
    return {"latitude": fields.get("latitude"), "longitude": fields.get("longitude")}


def template_words(text: str) -> list[tuple[int, str]]:
    """A template's clickable words: its tokens but the braces of its blanks, by token index."""
    return [(t.index, t.text) for t in tokenize(text) if t.text not in ("{", "}")]


def compose(words: Sequence[Optional[str]]) -> str:
    """A template's text from clicked words and blanks (None): spaced as a sentence is, with no space
    before a full stop or after an opening bracket."""
    out = ""
    for word in words:
        piece = "{}" if word is None else word
        if out and piece[0] not in _NO_SPACE_BEFORE and out[-1] not in _NO_SPACE_AFTER:
            out += " "
        out += piece
    return out


def piece_text(piece: Piece, said: Mapping[int, str], templates: Mapping[str, str], field: str) -> Optional[str]:
    """The word a composer's piece gives now (None for a blank); a piece that gives none names ``field``."""
    if isinstance(piece, Blank):
        return None
    if isinstance(piece, TemplateWord):
        if piece.template not in templates:
            raise InvalidInput(f"there is no template {piece.template!r}", field)
        found = dict(template_words(templates[piece.template]))
        if piece.token not in found:
            raise InvalidInput(f"template {piece.template} has no word {piece.token}", field)
        return found[piece.token]
    if piece.message not in said:
        raise InvalidInput(f"there is no user message {piece.message}", field)
    tokens = tokenize(said[piece.message])
    if not 0 <= piece.token < len(tokens):
        raise InvalidInput(f"user message {piece.message} has no token {piece.token}", field)
    if tokens[piece.token].text in ("{", "}"):
        raise InvalidInput("a blank is the composer's { } button, not a brace", field)
    return tokens[piece.token].text


def _piece(raw: Any, said: Mapping[int, str], templates: Mapping[str, str], field: str) -> Piece:
    """A composer's piece as a page sends it: ``{"blank": true}``, ``{"message": 2, "token": 5}`` or
    ``{"template": "t3", "token": 2}``."""
    if not isinstance(raw, Mapping):
        raise InvalidInput("expected {blank: true}, {message, token} or {template, token}", field)
    if set(raw) == {"blank"} and raw["blank"] is True:
        return Blank()
    token = raw.get("token")
    if isinstance(token, bool) or not isinstance(token, int):
        raise InvalidInput("expected a token number", field)
    if set(raw) == {"template", "token"} and isinstance(raw["template"], str):
        piece: Piece = TemplateWord(raw["template"], token, "")
    elif set(raw) == {"message", "token"} and isinstance(raw["message"], int) and not isinstance(raw["message"], bool):
        piece = WordClick(raw["message"], token, "")
    else:
        raise InvalidInput("expected {blank: true}, {message, token} or {template, token}", field)
    text = piece_text(piece, said, templates, field)
    return TemplateWord(piece.template, token, text) if isinstance(piece, TemplateWord) \
        else WordClick(piece.message, token, text)


def add_template(log: SessionLog, templates: Mapping[str, str], pieces: Any) -> TemplateAdded:
    """MEEP's "+": a new template composed by clicking words (of the user's messages or of the
    templates) and blanks, in order; its id is an existing one when the same text is there already."""
    if not isinstance(pieces, list) or not pieces or len(pieces) > MAX_PIECES:
        raise InvalidInput(f"click 1 to {MAX_PIECES} words and blanks", "words")
    said = messages(log)
    made = tuple(_piece(raw, said, templates, f"words[{n}]") for n, raw in enumerate(pieces))
    if all(isinstance(p, Blank) for p in made):
        raise InvalidInput("click at least one word", "words")
    text = compose([None if isinstance(p, Blank) else p.text for p in made])
    template_id, _ = added_to(templates, text)
    return TemplateAdded(template_id, text, made)


def send(log: SessionLog) -> Send:
    """Send the message built from the templates picked since the last send."""
    picks = pending(log)
    if not picks:
        raise InvalidInput("pick a template first: the agent says nothing else", "template")
    return Send(" ".join(p.text for p in picks))
