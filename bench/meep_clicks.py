"""MEEP's intrinsic metrics (Arkhangorodsky et al. 2020, section 6) on collected MEEP logs.

    python -m bench meep_clicks [--conversations 40] [--seed 1]

The collected logs are a simulated MEEP batch: ``turkflow simulate --protocol meep`` plays it through the
real stack into a fresh SQLite database, and the logs are read back from its dialog events (the log
``turkflow replay`` executes; the SGD export does not keep which result field a click took). Every agent
click is a prediction, as in the paper: an *API* click (which API), a *template* click (which template, or
``wait_for_user`` where the agent sent and waits), and a *parameter* click (what fills an argument or a
blank; a query's words count as one). The baseline is simple and trained on the other half of the dialogs
(two folds by conversation): the next API/template is the one that most often followed the previous
action; a parameter is the filler most often used for that argument or blank, as a kind (a field of the
latest result of an API, of an earlier one, of the start, or words of the user's last or an earlier
message). Destination accuracy: the share of dialogs whose start_driving point is the goal's place, and
how often the user approved it on the map.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from sqlmodel import col, select

from turkflow.db import session_scope
from turkflow.models import Conversation, DialogEvent
from turkflow.protocols.meep.dialog import kept_events
from turkflow.protocols.meep.events import from_events
from turkflow.protocols.meep.log import ApiCall, FieldClick, Send, TemplatePick, UserMessage

TURKFLOW = Path(sys.executable).parent / "turkflow"


def simulate(folder: Path, conversations: int, seed: int) -> str:
    database_url = f"sqlite:///{folder / 'meep.sqlite'}"
    env = {"PATH": "/usr/bin:/bin", "TURKFLOW_DATA_DIR": str(folder), "TURKFLOW_DATABASE_URL": database_url,
           "TURKFLOW_SECRET_KEY": "bench", "TURKFLOW_WORKER_HASH_KEY": "bench"}
    done = subprocess.run([str(TURKFLOW), "simulate", "--protocol", "meep", "--conversations", str(conversations),
                           "--seed", str(seed), "--database-url", database_url, "--run-dir", str(folder / "run")],
                          capture_output=True, text=True, env=env, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"simulate failed: {done.stderr[-2000:]}")
    return database_url


def _filler_kind(clicks: tuple, history: list[ApiCall], last_message: int) -> str:
    if len(clicks) == 1 and isinstance(clicks[0], FieldClick):
        click = clicks[0]
        if click.result == "source":
            return f"source.{click.field}"
        owner = next((c for c in history if any(r.id == click.result for r in c.results)), None)
        api = owner.api if owner else "?"
        latest = owner is not None and owner is next((c for c in reversed(history) if c.api == api), None)
        return f"{'latest' if latest else 'earlier'} {api}.{click.field}"
    return "words of the last message" if clicks[0].message == last_message else "words of an earlier message"


def clicks_of(log) -> list[tuple[str, str, str]]:
    """The agent's clicks in order: (kind, context, truth); context is what the baseline conditions on."""
    out: list[tuple[str, str, str]] = []
    history: list[ApiCall] = []
    previous, last_message = "start", 0
    for record in log.records:
        if isinstance(record, UserMessage):
            last_message, previous = record.number, "user"
        elif isinstance(record, ApiCall):
            out.append(("API", previous, record.api))
            for name, filler in record.arguments.items():
                out.append(("parameter", f"{record.api}:{name}", _filler_kind(filler.clicks, history, last_message)))
            history.append(record)
            previous = record.api
        elif isinstance(record, TemplatePick):
            out.append(("template", previous, record.template))
            for n, filler in enumerate(record.fillers):
                out.append(("parameter", f"{record.template}:{n}", _filler_kind(filler.clicks, history, last_message)))
            previous = record.template
        elif isinstance(record, Send):
            out.append(("template", previous, "wait_for_user"))
            previous = "wait_for_user"
    return out


def read_logs(database_url: str) -> list[dict[str, Any]]:
    dialogs = []
    with session_scope(database_url) as s:
        for conversation in s.exec(select(Conversation).order_by(col(Conversation.id))):
            events = kept_events(s, list(s.exec(select(DialogEvent).where(
                DialogEvent.conversation_id == conversation.id).order_by(col(DialogEvent.id)))))
            if not any(e.action == "start" for e in events):
                continue
            log = from_events(events)
            drives = [r for r in log.records if isinstance(r, ApiCall) and r.api == "start_driving" and r.results]
            judge = next((e.data for e in events if e.action == "judge"), None)
            goal = conversation.scenario["destination"]
            dialogs.append({"id": conversation.id, "clicks": clicks_of(log),
                            "drove": bool(drives),
                            "right": bool(drives) and (drives[-1].results[0].fields["latitude"],
                                                       drives[-1].results[0].fields["longitude"])
                            == (goal["latitude"], goal["longitude"]),
                            "approved": None if judge is None else judge["Approved"]})
    return dialogs


def accuracy(dialogs: list[dict[str, Any]]) -> dict[str, Any]:
    hits: Counter = Counter()
    totals: Counter = Counter()
    for fold in (0, 1):
        train = [d for d in dialogs if d["id"] % 2 != fold]
        model: dict[tuple[str, str], Counter] = defaultdict(Counter)
        overall: dict[str, Counter] = defaultdict(Counter)
        for d in train:
            for kind, context, truth in d["clicks"]:
                action = "action" if kind != "parameter" else "parameter"
                model[(action, context)][truth] += 1
                overall[action][truth] += 1
        for d in (d for d in dialogs if d["id"] % 2 == fold):
            for kind, context, truth in d["clicks"]:
                action = "action" if kind != "parameter" else "parameter"
                seen = model.get((action, context)) or overall[action]
                guess = seen.most_common(1)[0][0] if seen else None
                totals[kind] += 1
                hits[kind] += guess == truth
    out = {kind: {"clicks": totals[kind], "accuracy": round(hits[kind] / totals[kind], 3)}
           for kind in ("API", "template", "parameter") if totals[kind]}
    out["all"] = {"clicks": sum(totals.values()), "accuracy": round(sum(hits.values()) / sum(totals.values()), 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        dialogs = read_logs(simulate(Path(folder), args.conversations, args.seed))
    drove = [d for d in dialogs if d["drove"]]
    judged = [d for d in dialogs if d["approved"] is not None]
    report = {
        "dialogs": len(dialogs),
        "next_click_accuracy": accuracy(dialogs),
        "destination": {"drove": len(drove), "accuracy": round(sum(d["right"] for d in dialogs) / len(dialogs), 3),
                        "accuracy_of_drives": round(sum(d["right"] for d in drove) / len(drove), 3) if drove else None,
                        "approved": sum(bool(d["approved"]) for d in judged), "judged": len(judged),
                        "verdict_agrees_with_truth": sum(bool(d["approved"]) == d["right"] for d in judged)},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
