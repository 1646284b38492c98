"""One self-contained HTML page with the paper's tables and figures: images are inlined, so the file can
be mailed or attached to a ticket as is. Every string from the corpus is escaped."""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path
from typing import Any, Iterable, Optional

ROLES = ("student", "teacher")

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1000px; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5rem 0 1rem; } caption { text-align: left; color: #555; }
th, td { border: 1px solid #ccc; padding: .25rem .6rem; text-align: right; vertical-align: top; }
th:first-child, td:first-child, td.text { text-align: left; }
figure { margin: 1rem 0; } img { max-width: 100%; } .note { color: #666; }
"""


def _pct(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _num(value: Any) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"


def _table(caption: str, header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """Cells arrive already escaped (numbers) or are escaped here (everything else is text)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><caption>{escape(caption)}</caption><tr>{head}</tr>{body}</table>"


def _figure(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def render_report(stats: dict[str, Any], figures: dict[str, Path], title: str) -> str:
    s = stats
    parts = [f"<h1>{escape(title)}</h1>",
             f"<p class='note'>Corpus: {escape(s['source']['corpus'])} · inputs: "
             f"{escape(', '.join(s['source']['inputs']))} · {s['source']['files']:,} files · "
             f"spaCy: {escape(s['model'])}</p>"]

    parts.append("<h2>Dataset (section 4.1)</h2>")
    parts.append(_table("Size", ["", "value"], [
        ["dialogues", _num(s["dialogues"])], ["turns", _num(s["turns"])],
        ["utterances with text", _num(s["utterances"])],
        ["turns per dialogue", _num(s["turns_per_dialogue"])], ["tokens per turn", _num(s["tokens_per_turn"])],
        ["sentences per turn", _num(s["sentences_per_turn"])],
        *[[f"domain {escape(d)}", _num(n)] for d, n in s["domains"].items()],
        *[[f"skipped: {escape(k)}", _num(n)] for k, n in s["source"]["skipped"].items()],
    ]))
    parts.append(_figure(figures["conversation_length"], "Figure 2: conversation length"))

    if any(s["quality"][r]["rated"] for r in ROLES):
        parts.append(_table("Table 1: utterances marked relevant or useful by the next worker",
                            ["role", "rated", "relevance", "usefulness"],
                            [[r, _num(s["quality"][r]["rated"]), _pct(s["quality"][r]["relevance"]),
                              _pct(s["quality"][r]["usefulness"])] for r in ROLES]))
    else:
        parts.append("<p class='note'>Table 1: this corpus has no relevance/usefulness ratings.</p>")

    for role, shared in s["shared_information"].items():
        parts.append(_table(f"External resources and shared information ({role} utterances)",
                            ["", "share"], [["used external URLs", _pct(shared["used_urls"])],
                                            ["shared document content", _pct(shared["shared_content"])]]))

    parts.append("<h2>Intents and actions (Table 2)</h2>")
    for role in ROLES:
        labels = s["labels"][role]
        if labels["labelled"]:
            parts.append(_table(f"{role}: {labels['labelled']:,} labelled utterances", ["label", "share"],
                                [[escape(k), _pct(v)] for k, v in labels["shares"].items()]))
    parts.append(_figure(figures["labels"], "Intents and actions"))

    parts.append("<h2>Utterance length (section 4.2, Figure 3, Table 12)</h2>")
    parts.append(_table("Tokens and sentences per utterance", ["role", "utterances", "tokens", "sentences"],
                        [[r, _num(s["roles"][r]["utterances"]), _num(s["roles"][r]["tokens_per_turn"]),
                          _num(s["roles"][r]["sentences_per_turn"])] for r in ROLES]))
    buckets = list(s["sentences_per_utterance"]["student"])
    parts.append(_table("Table 12: utterances by number of sentences", ["sentences", *ROLES],
                        [[b, *(_pct(s["sentences_per_utterance"][r][b]) for r in ROLES)] for b in buckets]))
    parts.append(_figure(figures["utterance_length"], "Figure 3: tokens per utterance"))

    p = s["patterns"]
    parts.append("<h2>Linguistic patterns (section 4.2, Tables 3, 4, 11, 13, Figure 4)</h2>")
    parts.append(_table("Table 4: pattern statistics", ["", *ROLES], [
        ["sentences", *(_num(p[r]["sentences"]) for r in ROLES)],
        ["unique patterns", *(_num(p[r]["unique_patterns"]) for r in ROLES)],
        ["sentences per pattern", *(_num(p[r]["sentences_per_pattern"]) for r in ROLES)],
        ["average pattern length (unique patterns)", *(_num(p[r]["avg_unique_pattern_length"]) for r in ROLES)],
        ["average pattern length (sentences)", *(_num(p[r]["avg_pattern_length"]) for r in ROLES)],
    ]))
    parts.append(f"<p>Jaccard index of student and teacher patterns: {_num(p['jaccard'])}</p>")
    parts.append(_table("Table 13: patterns by the number of sentences expressing them", ["sentences", *ROLES],
                        [[escape(b), *(_pct(p[r]["frequency_buckets"][b]) for r in ROLES)]
                         for b in p["student"]["frequency_buckets"]]))
    for role in ROLES:
        parts.append(_table(f"Most frequent {role} patterns (at least two dependencies)",
                            ["pattern", "sentences", "examples"],
                            [[escape(t["pattern"]), _num(t["sentences"]),
                              "<br>".join(escape(e) for e in t["examples"])] for t in p[role]["top"]]))
    parts.append(_figure(figures["pattern_length"], "Figure 4: pattern length"))

    if "star" in s:
        parts.append(_star_section(s["star"]))

    workers = s["workers"]
    parts.append("<h2>Workers</h2>")
    if workers:
        rows = [["all", _num(workers["workers"]), _num(workers["utterances_per_worker"]),
                 _num(workers["tasks_per_worker"])]]
        rows += [[r, _num(w["workers"]), _num(w["utterances_per_worker"]), _num(w["tasks_per_worker"])]
                 for r, w in workers["roles"].items()]
        parts.append(_table("Workers", ["", "workers", "utterances per worker", "tasks per worker"], rows))
    else:
        parts.append("<p class='note'>This corpus does not identify its workers.</p>")

    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n")


def _star_section(star: dict[str, Any]) -> str:
    replies = star["wizard_replies"]
    parts = ["<h2>The wizard (STAR, section 4 and Table 8)</h2>",
             _table("Replies and queries", ["", "value"], [
                 ["suggestions picked", _num(replies["suggestions_picked"])],
                 ["replies written", _num(replies["written"])],
                 ["share picked", _pct(replies["picked_share"])],
                 ["queries per dialogue", _num(star["queries_per_dialogue"])]])]
    order = star["wizard_order"]
    if order is None:
        parts.append("<p class='note'>Table 8 needs the task schemas: analyse with --schemas.</p>")
        return "".join(parts)
    parts.append(_table(
        f"Table 8: single-task dialogues whose wizard asks the schema's first questions in order "
        f"(all {_pct(order['follow'])}, happy {_pct(order['happy_follow'])}; STAR reports 91%)",
        ["task", "dialogues", "happy", "all", "checked actions"],
        [[escape(task), _num(t["dialogues"]), _pct(t["happy_follow"]), _pct(t["follow"]),
          escape(", ".join(t["checked_actions"]))] for task, t in order["tasks"].items()]))
    return "".join(parts)
