"""A comparison batch's report: the systems ranked by a Bradley-Terry fit with ties and bootstrap 95% intervals,
the win-rate grid with a test per pair (Holm-corrected), the judges' position bias, and each judge's known-answer
record and agreement with the others; and the ranking plot (matplotlib, no display needed).

Votes of judges who are blocked (for now or for good) are left out unless asked for: the monitor blocked them
on their known-answer pairs, so their votes are the ones least worth counting.
"""

from __future__ import annotations

import io
import math
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never look for a display

import matplotlib.pyplot as plt  # noqa: E402
from sqlmodel import Session, col, select  # noqa: E402

from turkflow.models import Batch, Worker  # noqa: E402
from turkflow.protocols.compare import dialog, pairs, ranking  # noqa: E402

ROUNDS = 1000  # bootstrap resamples


def batch_report(session: Session, batch_id: int, *, rounds: int = ROUNDS, include_blocked: bool = False,
                 seed: int = 0) -> dict[str, Any]:
    """Everything the CLI and the dashboard show of a comparison batch, as plain data."""
    task = dialog.batch_task(session, batch_id)
    batch = session.get(Batch, batch_id)
    found = pairs.judgements(session, batch_id)
    counted = pairs.votes(found, include_blocked)
    systems = sorted({s for pair in pairs.comparable(pairs.sources(session, task.star["of"])) for s in pair})
    counts = ranking.count(systems, counted)
    fitted = ranking.fit(counts)
    low, high = ranking.bootstrap(counts, rounds=rounds, seed=seed)
    played = {s: 0 for s in systems}
    for v in counted:
        played[v.left] += 1
        played[v.right] += 1
    grid = ranking.win_grid(counts)
    order = sorted(range(len(systems)), key=lambda n: -fitted.strength[n])
    position = ranking.left_share(counted)
    return {
        "batch": {"id": batch_id, "name": batch.name, "status": batch.status, "question": task.star["question"],
                  "of": task.star["of"], "pairs": task.star["pairs"], "votes_planned": task.star["votes"]},
        "votes": {"counted": len(counted), "left_out_blocked": len(pairs.votes(found, True)) - len(counted),
                  "known_answer": sum(1 for j in found if j.gold),
                  "known_answer_right": sum(1 for j in found if j.gold and j.choice == j.shown["expected"])},
        "ranking": [{"rank": r + 1, "system": systems[n], "strength": round(float(fitted.strength[n]), 4),
                     "low": _rounded(low[n]), "high": _rounded(high[n]), "votes": played[systems[n]]}
                    for r, n in enumerate(order)],
        "tie": round(fitted.tie, 4),
        "pairs": [{"a": p.a, "b": p.b, "a_wins": p.wins, "b_wins": p.losses, "ties": p.ties,
                   "a_win_rate": None if p.win_rate is None else round(p.win_rate, 4),
                   "p_value": None if p.p_value is None else round(float(p.p_value), 6),
                   "p_holm": None if p.p_holm is None else round(float(p.p_holm), 6),
                   "significant": p.significant()} for p in grid],
        "position": {"left_share": _rounded(position.share), "low": _rounded(position.low),
                     "high": _rounded(position.high), "decisive_votes": position.n,
                     "p_value": _rounded(position.p_value, 6)},
        "judges": judges(session, found),
        "level": ranking.LEVEL, "rounds": rounds, "include_blocked": include_blocked,
    }


def judges(session: Session, found: list[pairs.Judgement]) -> list[dict[str, Any]]:
    """Per judge: votes, known-answer pairs answered and right, agreement with the other judges' majority on
    the same two systems, the share of their decisive votes for the left dialog, and their status."""
    agree = ranking.agreement([j.vote for j in found if not j.gold])
    ids = sorted({j.judge for j in found})
    names = dict(session.exec(select(Worker.id, Worker.external_id).where(col(Worker.id).in_(ids))).all())
    status = dict(session.exec(select(Worker.id, Worker.status).where(col(Worker.id).in_(ids))).all())
    shown = []
    for judge in ids:
        mine = [j for j in found if j.judge == judge]
        gold = [j for j in mine if j.gold]
        voted = [j.vote for j in mine if not j.gold]
        agreed, compared = agree.get(judge, (0, 0))
        left = ranking.left_share(voted)
        shown.append({"judge": names[judge], "worker_id": judge, "status": status[judge], "votes": len(voted),
                      "known_answer": len(gold),
                      "known_answer_right": sum(1 for j in gold if j.choice == j.shown["expected"]),
                      "agreement": round(agreed / compared, 4) if compared else None, "compared": compared,
                      "left_share": _rounded(left.share)})
    return shown


def _rounded(value: Any, digits: int = 4) -> Any:
    """A number for JSON: None where there is none (no vote yet: no interval)."""
    return None if value is None or not math.isfinite(value) else round(float(value), digits)


def ranking_png(report: dict[str, Any]) -> bytes:
    """The ranking as a plot: each system's strength (log-odds against the average system) with its interval,
    strongest on top."""
    rows = report["ranking"][::-1]
    fig, ax = plt.subplots(figsize=(6.4, 0.6 * len(rows) + 1.4))
    if rows:
        strength = [r["strength"] for r in rows]
        errors = [[0 if r["low"] is None else r["strength"] - r["low"] for r in rows],
                  [0 if r["high"] is None else r["high"] - r["strength"] for r in rows]]
        ax.errorbar(strength, range(len(rows)), xerr=errors, fmt="o", color="#4c72b0", capsize=4)
        ax.set_yticks(range(len(rows)), [r["system"] for r in rows])
        ax.axvline(0, color="#999999", linewidth=0.8)
    ax.set_xlabel(f"strength (log-odds against the average system), {report['level']:.0%} bootstrap intervals")
    ax.set_title(f"{report['votes']['counted']} votes")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
    return out.getvalue()
