"""The agents' report of a batch (``turkflow agents report BATCH``, the dashboard's agents page): per role played
by agents, per agent, what the conversations say, each figure with its 95% interval, and for two or more agents
their pairwise differences with a test, corrected for the number of pairs; and per judge, whether they judged
carelessly (``agents.judges``), with the option of leaving the careless out.

The report is a pure function of the conversations' records (``agents.evaluation``), so the same records give
the same report, from the database or from an export. The statistics (bootstrap intervals over conversations,
permutation tests, Holm's correction) are ``turkflow.dataset.analysis.intervals``'s; every figure is drawn over
the conversations an agent played, never over turns, so a dialog weighs as much in an interval as in the data.

What each figure reads (a conversation counts where it has what the figure needs):

- ``verified_success``: the dialogs whose success against the goal the protocol checks, the share that succeeded
  (ended dialogs only; an agent's failure that ended one is a failure);
- ``claimed_success``: the people's "did it get the task done?", the share of yes;
- ``turns_to_success``: the turns of the dialogs that succeeded (checked, else claimed), their mean;
- ``understanding``, ``appropriateness``, ``satisfaction``: the people's 1-5 answers, their mean;
- ``relevant``, ``useful``: the agent's turns the next person rated (Wizard of Tasks), the share of yes;
- ``failed_calls``: the calls to the agent that gave nothing usable, their share (an answer that came after the
  dialog was cancelled is not the agent's failure); ``agent_failures``: the ended dialogs in which an agent's
  turn ran out of attempts;
- ``latency_p50``, ``latency_p95``: the answered calls' latency (ms), pooled; ``tokens_per_turn``: prompt and
  completion tokens of every call over the agent's turns stored.
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Optional

from turkflow.agents.evaluation import Played, Record
from turkflow.agents.judges import is_control, verdicts
from turkflow.dataset.analysis.intervals import (CONFIDENCE, PERMUTATIONS, RESAMPLES, Pooled, Ratio, Sample,
                                                 compare, estimate)
from turkflow.protocols.questions import EVALUATION_RATINGS

# (name, what it says, its unit): in the order the report shows them
MEASURES: tuple[tuple[str, str, str], ...] = (
    ("verified_success", "success checked against the goal", "share"),
    ("claimed_success", "success as people say", "share"),
    ("turns_to_success", "turns to success", "turns"),
    ("understanding", "understanding (1-5)", "rating"),
    ("appropriateness", "appropriateness (1-5)", "rating"),
    ("satisfaction", "satisfaction (1-5)", "rating"),
    ("relevant", "turns rated relevant", "share"),
    ("useful", "turns rated useful", "share"),
    ("failed_calls", "calls that failed", "share"),
    ("agent_failures", "dialogs ended by a failure", "share"),
    ("latency_p50", "latency p50 (ms)", "ms"),
    ("latency_p95", "latency p95 (ms)", "ms"),
    ("tokens_per_turn", "tokens per turn", "tokens"),
)
LABELS = {name: label for name, label, _ in MEASURES}
# the figures whose differences between agents are tested (the others describe the service, not the dialogs)
COMPARED = ("verified_success", "claimed_success", "understanding", "appropriateness", "satisfaction", "relevant",
            "useful")
NOT_THE_AGENTS = "cancelled"  # a call's outcome that is no failure of the agent's (the dialog ended first)


@dataclass(frozen=True)
class Options:
    """How the report is computed; kept with it, so it can be computed again alike."""

    confidence: float = CONFIDENCE
    resamples: int = RESAMPLES
    permutations: int = PERMUTATIONS
    seed: int = 0
    exclude_careless: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"confidence": self.confidence, "resamples": self.resamples, "permutations": self.permutations,
                "seed": self.seed, "exclude_careless": self.exclude_careless}


def _succeeded(record: Record, played: Played) -> Optional[bool]:
    if record.verified is not None:
        return record.verified
    claims = [j.claimed for j in played.judgements if j.claimed is not None]
    return sum(claims) * 2 > len(claims) if claims else None


def _samples(records: list[Record], role: str) -> dict[str, Sample]:
    """Each figure's sample of one agent's conversations in ``role`` (``records``: those it played)."""
    ended = [r for r in records if r.ended]
    played = [(r, r.played[role]) for r in records]
    done = [(r, r.played[role]) for r in ended]
    calls = [[c for c in p.calls if c.outcome != NOT_THE_AGENTS] for _, p in played]
    samples: dict[str, Sample] = {
        "verified_success": Ratio.mean([r.verified for r in ended]),
        "claimed_success": Ratio.of((sum(1 for j in p.judgements if j.claimed), sum(
            1 for j in p.judgements if j.claimed is not None)) for _, p in done),
        "turns_to_success": Ratio.mean([r.turns for r, p in done if _succeeded(r, p)]),
        "relevant": Ratio.of((sum(t.relevant for t in p.ratings), len(p.ratings)) for _, p in played),
        "useful": Ratio.of((sum(t.useful for t in p.ratings), len(p.ratings)) for _, p in played),
        "failed_calls": Ratio.of((sum(c.outcome != "ok" for c in made), len(made)) for made in calls),
        "agent_failures": Ratio.mean([p.failed is not None for _, p in done]),
        "latency_p50": Pooled.of([[c.latency_ms for c in made if c.outcome == "ok"] for made in calls], 50),
        "latency_p95": Pooled.of([[c.latency_ms for c in made if c.outcome == "ok"] for made in calls], 95),
        "tokens_per_turn": Ratio.of((sum(c.prompt_tokens + c.completion_tokens for c in made), p.turns)
                                    for made, (_, p) in zip(calls, played)),
    }
    for name in EVALUATION_RATINGS:
        samples[name] = Ratio.of((sum(j.ratings[name] for j in p.judgements if name in j.ratings),
                                  sum(1 for j in p.judgements if name in j.ratings)) for _, p in done)
    return samples


def without_judges(records: Iterable[Record], judges: set[str]) -> list[Record]:
    """The records with the answers of ``judges`` left out (their judgements and their turn ratings)."""
    return [replace(r, played={role: replace(p, judgements=[j for j in p.judgements if j.judge not in judges],
                                             ratings=[t for t in p.ratings if t.judge not in judges])
                               for role, p in r.played.items()}) for r in records]


def build(records: list[Record], options: Options = Options()) -> dict[str, Any]:
    """The report of these records as plain data (JSON)."""
    judged = verdicts(records)
    careless = {v.judge for v in judged if v.careless}
    counted = without_judges(records, careless) if options.exclude_careless else records
    roles = sorted({role for r in counted for role in r.played})
    return {"parameters": options.as_dict(), "conversations": len(records),
            "roles": [_role(counted, role, options) for role in roles],
            "judges": [v.as_dict() for v in judged],
            "excluded_judges": sorted(careless) if options.exclude_careless else []}


def _role(records: list[Record], role: str, options: Options) -> dict[str, Any]:
    names = sorted({r.played[role].agent for r in records if role in r.played})
    samples = {name: _samples([r for r in records if role in r.played and r.played[role].agent == name], role)
               for name in names}
    agents = []
    for name in names:
        mine = [r for r in records if role in r.played and r.played[role].agent == name]
        calls = [c for r in mine for c in r.played[role].calls]
        reasons = Counter(f"{c.outcome}: {c.detail}"[:160] for c in calls if c.outcome != "ok")
        agents.append({
            "agent": name, "control": is_control(name), "conversations": len(mine),
            "ended": sum(r.ended for r in mine),
            "measures": {measure: estimate(samples[name][measure], confidence=options.confidence,
                                           resamples=options.resamples, seed=options.seed,
                                           label=f"{role}:{name}:{measure}").as_dict()
                         for measure, _, _ in MEASURES},
            "calls": dict(sorted(Counter(c.outcome for c in calls).items())),
            "tokens": {"prompt": sum(c.prompt_tokens for c in calls),
                       "completion": sum(c.completion_tokens for c in calls)},
            "reasons": [[reason, n] for reason, n in reasons.most_common(10)],
            "failures": dict(Counter(r.played[role].failed for r in mine if r.played[role].failed).most_common(10)),
        })
    contenders = [name for name in names if not is_control(name)]  # a control is there to judge the judges
    differences = {}
    if len(contenders) > 1:
        for measure in COMPARED:
            differences[measure] = [d.as_dict() for d in compare(
                {name: samples[name][measure] for name in contenders}, alpha=1 - options.confidence,
                resamples=options.resamples, permutations=options.permutations, seed=options.seed,
                label=f"{role}:{measure}")]
    return {"role": role, "agents": agents, "differences": differences}


# ---- shown ---------------------------------------------------------------------------------------------------


def shown(value: Optional[float], unit: str) -> str:
    if value is None:
        return "-"
    if unit == "share":
        return f"{value:.0%}" if abs(value) >= 0.01 or value == 0 else f"{value:.1%}"
    return f"{value:.2f}" if unit in ("rating", "turns") else f"{value:,.0f}"


def interval_text(figure: dict[str, Any], unit: str) -> str:
    """``62% [48%, 75%] n=40``, as tables show a figure."""
    if figure["value"] is None:
        return "-"
    spread = (f" [{shown(figure['low'], unit)}, {shown(figure['high'], unit)}]" if figure["low"] is not None
              else "")
    return f"{shown(figure['value'], unit)}{spread} n={figure['units']}"


def difference_text(d: dict[str, Any], unit: str) -> str:
    sign = "+" if d["difference"] is not None and d["difference"] > 0 else ""
    value = "-" if d["difference"] is None else sign + shown(d["difference"], unit)
    spread = "" if d["low"] is None else f" [{shown(d['low'], unit)}, {shown(d['high'], unit)}]"
    return value + spread


def plot(report: dict[str, Any], measures: tuple[str, ...] = COMPARED) -> bytes:
    """A PNG: per role, one panel per figure with each agent's estimate and its interval."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    rows = [(role, m) for role in report["roles"] for m in measures
            if any(a["measures"][m]["value"] is not None for a in role["agents"])]
    figure = Figure(figsize=(7, 0.5 + 1.1 * max(len(rows), 1)), layout="constrained")
    axes = figure.subplots(max(len(rows), 1), 1, squeeze=False)[:, 0]
    units = {name: unit for name, _, unit in MEASURES}
    for ax, (role, measure) in zip(axes, rows):
        names = [a["agent"] for a in role["agents"]]
        for y, agent in enumerate(role["agents"]):
            found = agent["measures"][measure]
            if found["value"] is None:
                continue
            low = found["low"] if found["low"] is not None else found["value"]
            high = found["high"] if found["high"] is not None else found["value"]
            ax.errorbar([found["value"]], [y], xerr=[[found["value"] - low], [high - found["value"]]], fmt="o",
                        capsize=4, color="#888888" if agent["control"] else f"C{y % 10}")
        ax.set_yticks(range(len(names)), names)
        ax.set_ylim(-0.6, len(names) - 0.4)
        ax.set_title(f"{role['role']}: {LABELS[measure]}", fontsize=9, loc="left")
        if units[measure] == "share":
            ax.set_xlim(-0.02, 1.02)
            ax.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        elif units[measure] == "rating":
            ax.set_xlim(0.8, 5.2)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=8)
    if not rows:
        axes[0].text(0.5, 0.5, "nothing to plot yet", ha="center", va="center")
        axes[0].set_axis_off()
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=110)
    return out.getvalue()


def table_rows(role: dict[str, Any], measures: Iterable[str] = tuple(m for m, _, _ in MEASURES),
               text: Callable[[dict[str, Any], str], str] = interval_text) -> list[list[str]]:
    """One row per figure, one column per agent, as the CLI and the dashboard show a role."""
    units = {name: unit for name, _, unit in MEASURES}
    return [[LABELS[m], *(text(a["measures"][m], units[m]) for a in role["agents"])] for m in measures]
