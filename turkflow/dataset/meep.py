"""``turkflow export --format meep``: MEEP's session logs as the deliverable (Arkhangorodsky et al., section 5.2
and Figure 3) and its click-level training examples (section 6).

``DIR/sessions/<id>.json``, one per conversation:

- ``log``: the session log as turkflow executes it (``turkflow.protocols.meep.log.SessionLog``'s JSON: the
  start, every user message, API call with its clicked arguments and results, template picked with its
  fillers, "+" template added and message sent). ``turkflow replay --from DIR`` reads it back and executes
  it against the requester's files (``folder``), as ``turkflow replay`` does from the database;
- ``clicks``: the same session as MEEP's click stream, each value named where it came from as MEEP's
  logs name it: ``u1_7`` (user message 1, word 7), ``v1.name`` (field ``name`` of result ``v1``),
  ``source.latitude``; a ``wait_for_user`` wherever the agent's message went out and the user spoke next
  (MEEP's special click, so an agent learns when to wait);
- ``templates``: every template the batch offered by then, ``verdict``: the user's approval of the
  destination (MEEP's success label), ``workers``: who wrote each role (keyed hashes).

``DIR/sessions/<id>.py``: the same session as MEEP's Figure 3 stored it, Python that runs it again against
the requester's folder and prints the dialog (``turkflow.protocols.meep.script``).

``DIR/examples.jsonl``: one line per agent decision MEEP predicts (section 6): its ``kind`` (``action``: an
API, a template or ``wait_for_user``; ``query``: the words of a ``find_place``-like string argument, one
prediction however many words; ``parameter``: the variable an API argument or a template blank takes),
the ``target`` and the session so far as lines of text (``context``), "[USER] ...", "[AGENT] find_place",
"[VAR] v1 name = ...", "[AGENT] <the template>".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from sqlmodel import Session, col, select

from turkflow.dataset.export import ExportError, ExportFilters, anonymize, staged, worker_id_hider
from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.models import DialogEvent, Worker
from turkflow.protocols.meep import dialog as meep_dialog
from turkflow.protocols.meep.log import (
    SOURCE, ApiCall, Blank, Click, Filler, Send, SessionLog, TemplateAdded, TemplatePick,
    TemplateWord, UserMessage, WordClick,
)
from turkflow.protocols.questions import MEEP
from turkflow.protocols.registry import conversation_pages, dialog_events, task_of

FORMAT = "turkflow.meep-session/1"
WAIT_FOR_USER = "wait_for_user"


@dataclass(frozen=True)
class MeepExportSummary:
    out_dir: Path
    sessions: int
    clicks: int  # the agents' clicks (MEEP's "agent decisions"), wait_for_user included
    examples: int


def named(click: Click) -> str:
    """Where a clicked value came from, as MEEP's session logs name it: ``u1_7``, ``v1.name``."""
    if isinstance(click, WordClick):
        return f"u{click.message}_{click.token}"
    return f"{click.result}.{click.field}"


def _filler(filler: Filler) -> dict[str, Any]:
    return {"from": [named(c) for c in filler.clicks], "value": filler.value}


def _piece(piece: Any) -> str:
    if isinstance(piece, Blank):
        return "{ }"
    if isinstance(piece, TemplateWord):
        return f"{piece.template}_{piece.token}"
    return named(piece)


def click_stream(log: SessionLog) -> list[dict[str, Any]]:
    """The session as MEEP's clicks, in order (user messages and API results between them, as the agent
    saw them); ``wait_for_user`` after each message the agent sent that the user then answered."""
    stream: list[dict[str, Any]] = []
    for record in log.records:
        if isinstance(record, UserMessage):
            if stream and stream[-1]["click"] == "send":
                stream.append({"click": WAIT_FOR_USER})
            stream.append({"click": "user_message", "number": record.number, "text": record.text})
        elif isinstance(record, ApiCall):
            stream.append({"click": "api", "api": record.api})
            for name, filler in record.arguments.items():
                stream.append({"click": "argument", "api": record.api, "argument": name, **_filler(filler),
                               "query": all(isinstance(c, WordClick) for c in filler.clicks)})
            stream.append({"click": "results", "api": record.api,
                           "results": [{"id": r.id, "fields": dict(r.fields)} for r in record.results]})
        elif isinstance(record, TemplatePick):
            stream.append({"click": "template", "template": record.template, "template_text": record.template_text})
            for blank, filler in enumerate(record.fillers):
                stream.append({"click": "blank", "template": record.template, "blank": blank, **_filler(filler)})
        elif isinstance(record, TemplateAdded):
            stream.append({"click": "add_template", "template": record.template, "text": record.text,
                           "pieces": [_piece(p) for p in record.pieces]})
        elif isinstance(record, Send):
            stream.append({"click": "send", "text": record.text})
    return stream


def _context_line(entry: Mapping[str, Any]) -> list[str]:
    """What one entry of the stream adds to the session so far, as section 7's context strings write it."""
    click = entry["click"]
    if click == "user_message":
        return [f"[USER] {entry['text']}"]
    if click == "api":
        return [f"[AGENT] {entry['api']}"]
    if click in ("argument", "blank"):
        return [f"[PARAM] {' '.join(entry['from'])} = {entry['value']}"]
    if click == "results":
        return [f"[VAR] {r['id']} " + ", ".join(f"{k} = {v}" for k, v in r["fields"].items()) for r in entry["results"]]
    if click == "template":
        return [f"[AGENT] {entry['template_text']}"]
    if click == WAIT_FOR_USER:
        return [f"[AGENT] {WAIT_FOR_USER}"]
    return []


def examples(dialog_id: str, stream: Sequence[Mapping[str, Any]], given: Sequence[Mapping[str, Any]]
             ) -> Iterator[dict[str, Any]]:
    """MEEP's click-level examples (section 6): each agent decision with the session before it."""
    context = [f"[VAR] {SOURCE} " + ", ".join(f"{k} = {v}" for k, v in r["fields"].items()) for r in given]
    for index, entry in enumerate(stream):
        click = entry["click"]
        target: Optional[dict[str, Any]] = None
        if click == "api":
            target = {"kind": "action", "target": entry["api"]}
        elif click == "template":
            target = {"kind": "action", "target": entry["template"]}
        elif click == WAIT_FOR_USER:
            target = {"kind": "action", "target": WAIT_FOR_USER}
        elif click == "argument":
            kind = "query" if entry["query"] else "parameter"
            target = {"kind": kind, "of": entry["api"], "argument": entry["argument"], "target": entry["from"],
                      "value": entry["value"]}
        elif click == "blank":
            target = {"kind": "parameter", "of": entry["template"], "blank": entry["blank"],
                      "target": entry["from"], "value": entry["value"]}
        if target is not None:
            yield {"dialog": dialog_id, "index": index, **target, "context": list(context)}
        context += _context_line(entry)


def session_documents(session: Session, hash_key: str, filters: ExportFilters,
                      page_size: int = 200) -> Iterator[dict[str, Any]]:
    """One session document per MEEP conversation someone has written in, in id order."""
    for page in conversation_pages(session, MEEP, filters, page_size):
        for conversation, _ in page:
            events = meep_dialog.kept_events(session, dialog_events(session, conversation.id))
            if not any(e.action == "start" for e in events):
                continue  # nobody has said anything yet
            task = task_of(session, MEEP, conversation)
            files = meep_dialog.requester_files(task.star["folder"])
            log = meep_dialog.session_log(session, conversation, files)
            yield _document(session, conversation.id, task, files, log, events, hash_key,
                            meep_dialog.batch_templates(session, conversation, files))


def _document(session: Session, conversation_id: int, task: Any, files: Any, log: SessionLog,
              events: Sequence[DialogEvent], hash_key: str, templates: Mapping[str, str]) -> dict[str, Any]:
    writers = {e.worker_id: e.agent for e in events if e.worker_id is not None}
    names = dict(session.exec(select(Worker.id, Worker.external_id).where(col(Worker.id).in_(list(writers)))).all())
    workers: dict[str, list[str]] = {"user": [], "agent": []}
    for worker_id, agent in writers.items():
        role = "user" if agent == "User" else "agent"
        if names.get(worker_id) and anonymize(hash_key, names[worker_id]) not in workers[role]:
            workers[role].append(anonymize(hash_key, names[worker_id]))
    judge = next((e.data for e in events if (e.agent, e.action) == ("User", "judge")), None)
    return {"format": FORMAT, "id": f"meep_{conversation_id}", "task": task.key, "folder": task.star["folder"],
            "templates": dict(templates), "log": log.to_json(), "clicks": click_stream(log),
            "verdict": None if judge is None else {"approved": judge["Approved"], "latitude": judge["Latitude"],
                                                   "longitude": judge["Longitude"]},
            "workers": workers}


def export_meep(session: Session, out_dir: Path, *, hash_key: str,
                filters: ExportFilters = ExportFilters()) -> MeepExportSummary:
    """Write ``sessions/<id>.json`` and ``examples.jsonl`` into ``out_dir``, which appears only when
    complete."""
    if not hash_key:
        raise ExportError("no worker hash key configured; set TURKFLOW_WORKER_HASH_KEY")
    sessions = clicks = made = 0
    out_dir = Path(out_dir)
    hide = worker_id_hider(session, hash_key)
    with staged(out_dir) as staging, (staging / "examples.jsonl").open("w", encoding="utf-8") as lines:
        (staging / "sessions").mkdir()
        for document in map(hide, session_documents(session, hash_key, replace(filters, protocol=MEEP.name))):
            (staging / "sessions" / f"{document['id']}.json").write_text(
                json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            (staging / "sessions" / f"{document['id']}.py").write_text(
                python_form(document, SessionLog.from_json(document["log"])), encoding="utf-8")
            sessions += 1
            clicks += sum(1 for c in document["clicks"] if c["click"] not in ("user_message", "results"))
            for example in examples(document["id"], document["clicks"], document["log"]["given"]):
                lines.write(json.dumps(example, ensure_ascii=False) + "\n")
                made += 1
    return MeepExportSummary(out_dir, sessions, clicks, made)


def read_sessions(paths: Sequence[Path]) -> Iterator[tuple[Path, dict[str, Any], SessionLog]]:
    """Exported session files (or folders of them, or export folders holding ``sessions/``), each with its
    log read back; a file that is not one is an ``InvalidDocument`` naming it."""
    files: list[Path] = []
    for path in paths:
        path = Path(path)
        folder = path / "sessions" if (path / "sessions").is_dir() else path
        found = sorted(folder.glob("*.json")) if folder.is_dir() else [path]  # the .py beside each: not read
        if not found:
            raise InvalidDocument(f"{path}: no MEEP session files in it")
        files += found
    for file in files:
        try:
            document = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidDocument(f"{file}: not a MEEP session file: {exc}") from None
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise InvalidDocument(f"{file}: not a MEEP session file (format {FORMAT} expected)")
        try:
            log = SessionLog.from_json(document.get("log"))
        except InvalidDocument as exc:
            raise InvalidDocument(f"{file}: log: {exc}") from None
        yield file, document, log


def replay_sessions(paths: Sequence[Path], folder: Optional[Path] = None) -> tuple[int, int, list[str]]:
    """Execute exported session logs against the requester's files as they are now (each session's own
    ``folder``, or ``folder``): (sessions, clicks run, each difference described with its file). The
    templates are the requester's file's, then those the batch's agents added ("+"), which the export kept."""
    from turkflow.protocols.meep import clicks as meep_clicks
    from turkflow.protocols.meep.execute import execute

    sessions = ran = 0
    differences: list[str] = []
    for file, document, log in read_sessions(paths):
        files = meep_dialog.requester_files(folder or document.get("folder") or "")
        templates = {**{k: v for k, v in (document.get("templates") or {}).items() if isinstance(v, str)},
                     **files.templates}
        sessions += 1
        ran += sum(1 for r in log.records if not isinstance(r, UserMessage))
        differences += [f"{file.name}, {found.describe()}" for found in execute(log, templates, files.kb)]
        verdict = document.get("verdict")
        call = meep_clicks.drive_call(log, files.kb)
        if verdict and call is not None:
            try:
                now = files.kb.call(call.api, {n: f.value for n, f in call.arguments.items()})
            except InvalidInput:
                now = []  # execute named the call that fails
            point = {k: (now[0] if now else {}).get(k) for k in ("latitude", "longitude")}
            if point != {k: verdict.get(k) for k in ("latitude", "longitude")}:
                differences.append(f"{file.name}, the user judged the destination "
                                   f"{json.dumps({k: verdict.get(k) for k in ('latitude', 'longitude')})}, "
                                   f"executing start_driving drives to {json.dumps(point)}")
    return sessions, ran, differences


def _identifier(name: str) -> str:
    return re.sub(r"\W", "_", name)


def _variable(click: Click) -> str:
    if isinstance(click, WordClick):
        return f"u{click.message}_{click.token}"
    return f"{_identifier(click.result)}_{_identifier(click.field)}"


def _expression(filler: Filler) -> str:
    """A filler as the Python form writes it: the clicked words of a message, or the result field's variable."""
    if filler.clicks and all(isinstance(c, WordClick) for c in filler.clicks):
        message = filler.clicks[0].message
        return f"words(u{message}, {', '.join(str(c.token) for c in filler.clicks)})"
    return _variable(filler.clicks[0]) if filler.clicks else repr(filler.value)


def python_form(document: Mapping[str, Any], log: SessionLog) -> str:
    """The session as MEEP's Figure 3 wrote it, Python that runs it again against the requester's folder
    (``turkflow.protocols.meep.script``) and prints each user and agent message."""
    from turkflow.protocols.meep.tokens import tokenize

    added = {r.template: r.text for r in log.records if isinstance(r, TemplateAdded)}
    others = {k: v for k, v in (document.get("templates") or {}).items() if k not in added}
    lines = [f"# MEEP session {document['id']}, exported by turkflow: the stored, executable form of the",
             "# session (MEEP, Figure 3). Run it with the Python turkflow is installed in; it calls the",
             "# requester's APIs and fills their templates as they are now, and prints the dialog.",
             "from turkflow.protocols.meep.script import Session, words", "",
             f"session = Session({document['folder']!r}, added={others!r})", "", "## Initial variables"]
    for result in log.given:
        lines += [f"{_identifier(result.id)}_{_identifier(k)} = {v!r}" for k, v in result.fields.items()]
    picks: list[str] = []
    for record in log.records:
        if isinstance(record, UserMessage):
            lines += ["", "# User utterance", f"u{record.number} = {record.text!r}",
                      f"print('User: ' + u{record.number})"]
            lines += [f"u{record.number}_{t.index} = {t.text!r}" for t in tokenize(record.text)]
        elif isinstance(record, ApiCall):
            arguments = ", ".join(f"{name}={_expression(f)}" for name, f in record.arguments.items())
            lines += ["", "# API call", f"api_variables = session.call({record.api!r}, {arguments})"]
            for n, result in enumerate(record.results):
                lines += [f"{_identifier(result.id)}_{_identifier(k)} = api_variables[{n}][{k!r}]"
                          for k in result.fields]
        elif isinstance(record, TemplateAdded):
            lines += ["", "# A template added (\"+\")", f"session.add_template({record.template!r}, {record.text!r})"]
        elif isinstance(record, TemplatePick):
            values = "".join(f", {_expression(f)}" for f in record.fillers)
            picks.append(f"session.say({record.template!r}{values})")
        elif isinstance(record, Send):
            lines += ["", "# Agent utterance", f"print('Agent: ' + ' '.join([{', '.join(picks)}]))"]
            picks = []
    return "\n".join(lines) + "\n"
