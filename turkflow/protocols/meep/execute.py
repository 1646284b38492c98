"""Executing a MEEP log: every utterance rebuilt from its template and fillers, every API called again.

MEEP stored its sessions as Python a person could run; here the log is data, and ``execute`` is the one
interpreter. It runs the log forward the way the session ran: a result's fields come from the API called
again, so a changed database row shows at the call that returned it and at every later click that used
it. Each difference names the click (its index in ``log.records``, its kind and what it picked) and says
what was logged and what executing gives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Optional

from turkflow.errors import InvalidInput
from turkflow.protocols.meep.clicks import as_argument, compose, piece_text, value_of
from turkflow.protocols.meep.kb import KnowledgeBase
from turkflow.protocols.meep.log import (
    ApiCall, Filler, Result, SessionLog, TemplateAdded, TemplatePick, UserMessage,
)
from turkflow.protocols.meep.templates import render
from turkflow.protocols.meep.tokens import TOKENIZER


@dataclass(frozen=True)
class Difference:
    """One way a click executes differently from its log: ``click`` is its index in ``log.records`` (-1
    for the log as a whole), ``name`` the API or template it picked, ``what`` the part that differs
    (``results``, ``arguments.query``, ``fillers[1]``, ``template``, ``utterance``, ``message``)."""

    click: int
    kind: str
    name: str
    what: str
    logged: Any
    now: Any

    def describe(self) -> str:
        logged, now = json.dumps(self.logged, default=str), json.dumps(self.now, default=str)
        return (f"click {self.click} ({f'{self.kind} {self.name}'.strip()}): {self.what} was {logged}, "
                f"executing gives {now}")


Report = Callable[[str, Any, Any], None]  # (what, logged, now) for the click being executed


def _error(exc: InvalidInput) -> dict[str, str]:
    return {"error": exc.reason}


def execute(log: SessionLog, templates: Mapping[str, str], apis: KnowledgeBase) -> list[Difference]:
    """Every difference between the log and what executing it gives now; none for an untouched log."""
    differences: list[Difference] = []
    if log.tokenizer != TOKENIZER:
        differences.append(Difference(-1, "log", "tokenizer", "tokenizer", log.tokenizer, TOKENIZER))
    results: dict[str, Result] = {r.id: r for r in log.given}
    templates = dict(templates)  # with the templates this log adds, as they compose now
    said: dict[int, str] = {}
    built: list[str] = []  # the utterances rebuilt since the last send
    for index, record in enumerate(log.records):
        report = partial(_report, differences, index, record.kind)
        if isinstance(record, UserMessage):
            said[record.number] = record.text
        elif isinstance(record, ApiCall):
            _call(record, results, said, apis, partial(report, record.api))
        elif isinstance(record, TemplateAdded):
            _compose(record, said, templates, partial(report, record.template))
        elif isinstance(record, TemplatePick):
            built.append(_utterance(record, results, said, templates, partial(report, record.template)))
        else:  # Send
            now = " ".join(built)
            if now != record.text:
                report("", "message", record.text, now)
            built = []
    return differences


def _report(differences: list[Difference], index: int, kind: str, name: str, what: str, logged: Any,
            now: Any) -> None:
    differences.append(Difference(index, kind, name, what, logged, now))


def _refill(filler: Filler, results: Mapping[str, Result], said: Mapping[int, str], field: str,
            kind: Optional[str], report: Report) -> tuple[bool, Any]:
    """The filler's value now (as an argument of ``kind`` when given), reporting a change."""
    try:
        now = value_of(filler.clicks, results, said, field)
        if kind is not None:
            now = as_argument(now, kind, field)
    except InvalidInput as exc:
        report(field, filler.value, _error(exc))
        return False, None
    if now != filler.value:
        report(field, filler.value, now)
    return True, now


def _call(record: ApiCall, results: dict[str, Result], said: Mapping[int, str], apis: KnowledgeBase,
          report: Report) -> None:
    logged = [dict(r.fields) for r in record.results]
    try:
        api = apis.api(record.api)
    except InvalidInput as exc:
        report("api", record.api, _error(exc))
        return
    values, complete = {}, True
    for name, filler in record.arguments.items():
        kind = api.arguments.get(name)
        ok, now = _refill(filler, results, said, f"arguments.{name}", kind, report)
        complete = complete and ok
        values[name] = now
    if not complete:
        report("results", logged, {"error": "not called: an argument has no value"})
        return
    try:
        answers = apis.call(api.name, values)
    except InvalidInput as exc:
        report("results", logged, _error(exc))
        return
    if answers != logged:
        report("results", logged, answers)
    # later clicks read the fields executing gives, under the ids the log gave them
    for result, answer in zip(record.results, answers):
        results[result.id] = Result(result.id, record.api, answer)
    for result in record.results[len(answers):]:
        results.pop(result.id, None)


def _compose(record: TemplateAdded, said: Mapping[int, str], templates: dict[str, str],
             report: Report) -> None:
    """The template composed again from its clicked words; later picks of it read the text it gives."""
    words = []
    for n, piece in enumerate(record.pieces):
        try:
            words.append(piece_text(piece, said, templates, f"words[{n}]"))
        except InvalidInput as exc:
            report(f"words[{n}]", getattr(piece, "text", None), _error(exc))
            words.append(getattr(piece, "text", None))
    now = compose(words)
    if now != record.text:
        report("template_text", record.text, now)
    templates[record.template] = now


def _utterance(record: TemplatePick, results: Mapping[str, Result], said: Mapping[int, str],
               templates: Mapping[str, str], report: Report) -> str:
    text = templates.get(record.template)
    if text != record.template_text:
        report("template", record.template_text, text)
    values = []
    for n, filler in enumerate(record.fillers):
        _, now = _refill(filler, results, said, f"fillers[{n}]", None, report)
        values.append(now)
    if text is None:
        return record.text
    try:
        now_text = render(text, values)
    except InvalidInput as exc:
        report("utterance", record.text, _error(exc))
        return record.text
    if now_text != record.text:
        report("utterance", record.text, now_text)
    return now_text
