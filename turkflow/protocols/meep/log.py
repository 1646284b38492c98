"""A MEEP session log: every user message and every agent click, with where each clicked value came from.

The log is the dataset. It holds enough to execute it again (``turkflow.protocols.meep.execute``): which template
was picked and which words or result fields filled each blank, which API was called with which clicked
arguments, and what came back. Every value is logged as it was at the click, so executing can say what
changed. A word is named as MEEP's session logs named it, ``u1_5``: user message 1, token 5. A result is
named ``v1``, ``v2``, ... in the order results reached the panel; the start location is ``source``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Union

from turkflow.errors import InvalidDocument
from turkflow.protocols.meep.tokens import TOKENIZER

SOURCE = "source"


@dataclass(frozen=True)
class WordClick:
    """A click on token ``token`` of user message ``message`` (numbered from 1); ``text`` is the word."""

    message: int
    token: int
    text: str


@dataclass(frozen=True)
class FieldClick:
    """A click on field ``field`` of result ``result`` in the panel; ``value`` is what it held."""

    result: str
    field: str
    value: Any


Click = Union[WordClick, FieldClick]


@dataclass(frozen=True)
class Filler:
    """What fills one blank of a template or one argument of an API: words of one user message, or one
    result field; ``value`` is the value it gave (for an argument, of the argument's type)."""

    clicks: tuple[Click, ...]
    value: Any


@dataclass(frozen=True)
class Result:
    """One record in the results panel, later clickable by its ``id``."""

    id: str
    api: str
    fields: Mapping[str, Any]


@dataclass(frozen=True)
class UserMessage:
    kind: ClassVar[str] = "user_message"
    number: int
    text: str


@dataclass(frozen=True)
class ApiCall:
    kind: ClassVar[str] = "api_call"
    api: str
    arguments: Mapping[str, Filler]
    results: tuple[Result, ...]


@dataclass(frozen=True)
class TemplatePick:
    kind: ClassVar[str] = "template"
    template: str
    template_text: str
    fillers: tuple[Filler, ...]
    text: str


@dataclass(frozen=True)
class Send:
    """The agent's message goes to the user: the picked templates since the last send, in order."""

    kind: ClassVar[str] = "send"
    text: str


@dataclass(frozen=True)
class TemplateWord:
    """A click on token ``token`` of template ``template``'s text (its words, never its blanks)."""

    template: str
    token: int
    text: str


@dataclass(frozen=True)
class Blank:
    """The "{ }" button of the template composer: a blank the template's users fill by clicks."""


Piece = Union[WordClick, TemplateWord, Blank]


@dataclass(frozen=True)
class TemplateAdded:
    """MEEP's "+": a new template composed by clicks (words of the user's messages or of the templates,
    and blanks), ``template`` its id; every agent of the batch may pick it from then on."""

    kind: ClassVar[str] = "template_added"
    template: str
    text: str
    pieces: tuple[Piece, ...]


Record = Union[UserMessage, ApiCall, TemplatePick, Send, TemplateAdded]


@dataclass
class SessionLog:
    given: tuple[Result, ...]
    records: list[Record] = field(default_factory=list)
    tokenizer: str = TOKENIZER

    def add(self, record: Record) -> Record:
        self.records.append(record)
        return record

    def to_json(self) -> dict[str, Any]:
        return {"tokenizer": self.tokenizer, "given": [result_json(r) for r in self.given],
                "records": [record_json(r) for r in self.records]}

    @classmethod
    def from_json(cls, document: Any) -> "SessionLog":
        """The log from its JSON form; a malformed one is an ``InvalidDocument`` naming where."""
        if not isinstance(document, dict):
            raise InvalidDocument("a MEEP log must be an object")
        given = [_result(r, f"given[{n}]") for n, r in enumerate(_list(document, "given", "log"))]
        records = [record_from_json(r, f"records[{n}]")
                   for n, r in enumerate(_list(document, "records", "log"))]
        return cls(tuple(given), records, str(document.get("tokenizer", TOKENIZER)))


def click_json(click: Click) -> dict[str, Any]:
    if isinstance(click, WordClick):
        return {"message": click.message, "token": click.token, "text": click.text}
    return {"result": click.result, "field": click.field, "value": click.value}


def piece_json(piece: Piece) -> dict[str, Any]:
    if isinstance(piece, Blank):
        return {"blank": True}
    if isinstance(piece, TemplateWord):
        return {"template": piece.template, "token": piece.token, "text": piece.text}
    return click_json(piece)


def filler_json(filler: Filler) -> dict[str, Any]:
    return {"clicks": [click_json(c) for c in filler.clicks], "value": filler.value}


def result_json(result: Result) -> dict[str, Any]:
    return {"id": result.id, "api": result.api, "fields": dict(result.fields)}


def record_json(record: Record) -> dict[str, Any]:
    if isinstance(record, UserMessage):
        body: dict[str, Any] = {"number": record.number, "text": record.text}
    elif isinstance(record, ApiCall):
        body = {"api": record.api, "arguments": {k: filler_json(v) for k, v in record.arguments.items()},
                "results": [result_json(r) for r in record.results]}
    elif isinstance(record, TemplatePick):
        body = {"template": record.template, "template_text": record.template_text,
                "fillers": [filler_json(f) for f in record.fillers], "text": record.text}
    elif isinstance(record, TemplateAdded):
        body = {"template": record.template, "text": record.text,
                "pieces": [piece_json(p) for p in record.pieces]}
    else:
        body = {"text": record.text}
    return {"kind": record.kind, **body}


# ---- reading the JSON form back -------------------------------------------------------------------------


def _get(document: Any, key: str, kind: type, where: str) -> Any:
    if not isinstance(document, dict) or key not in document:
        raise InvalidDocument(f"{where}: {key} is missing")
    value = document[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidDocument(f"{where}.{key}: expected {kind.__name__}")
    return value


def _list(document: Any, key: str, where: str) -> list:
    return _get(document, key, list, where)


def _click(document: Any, where: str) -> Click:
    if isinstance(document, dict) and "token" in document:
        return WordClick(_get(document, "message", int, where), _get(document, "token", int, where),
                         _get(document, "text", str, where))
    if not isinstance(document, dict) or "value" not in document:
        raise InvalidDocument(f"{where}: a click names a token or a result field and its value")
    return FieldClick(_get(document, "result", str, where), _get(document, "field", str, where),
                      document["value"])


def _piece(document: Any, where: str) -> Piece:
    if isinstance(document, dict) and document.get("blank") is True and len(document) == 1:
        return Blank()
    if isinstance(document, dict) and "template" in document:
        return TemplateWord(_get(document, "template", str, where), _get(document, "token", int, where),
                            _get(document, "text", str, where))
    if isinstance(document, dict) and "message" in document:
        return WordClick(_get(document, "message", int, where), _get(document, "token", int, where),
                         _get(document, "text", str, where))
    raise InvalidDocument(f"{where}: a piece is a word of a message or of a template, or a blank")


def _filler(document: Any, where: str) -> Filler:
    clicks = tuple(_click(c, f"{where}.clicks[{n}]") for n, c in enumerate(_list(document, "clicks", where)))
    if "value" not in document:
        raise InvalidDocument(f"{where}: value is missing")
    return Filler(clicks, document["value"])


def _result(document: Any, where: str) -> Result:
    return Result(_get(document, "id", str, where), _get(document, "api", str, where),
                  dict(_get(document, "fields", dict, where)))


def record_from_json(document: Any, where: str = "record") -> Record:
    kind = _get(document, "kind", str, where)
    if kind == UserMessage.kind:
        return UserMessage(_get(document, "number", int, where), _get(document, "text", str, where))
    if kind == ApiCall.kind:
        arguments = _get(document, "arguments", dict, where)
        return ApiCall(_get(document, "api", str, where),
                       {k: _filler(v, f"{where}.arguments.{k}") for k, v in arguments.items()},
                       tuple(_result(r, f"{where}.results[{n}]")
                             for n, r in enumerate(_list(document, "results", where))))
    if kind == TemplatePick.kind:
        return TemplatePick(_get(document, "template", str, where),
                            _get(document, "template_text", str, where),
                            tuple(_filler(f, f"{where}.fillers[{n}]")
                                  for n, f in enumerate(_list(document, "fillers", where))),
                            _get(document, "text", str, where))
    if kind == Send.kind:
        return Send(_get(document, "text", str, where))
    if kind == TemplateAdded.kind:
        return TemplateAdded(_get(document, "template", str, where), _get(document, "text", str, where),
                             tuple(_piece(p, f"{where}.pieces[{n}]")
                                   for n, p in enumerate(_list(document, "pieces", where))))
    raise InvalidDocument(f"{where}.kind: one of user_message, api_call, template, send, template_added")
