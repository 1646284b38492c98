"""The paper's figures as PNG files, drawn from a stats.json dictionary (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import matplotlib

matplotlib.use("Agg")  # files only; never look for a display

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axis import Axis  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

ROLE_COLOURS = {"student": "#1f77b4", "teacher": "#ff7f0e"}


def _counts(*axes: Axis) -> None:
    """Ticks at whole numbers only: a count axis never reads 6.25 turns."""
    for axis in axes:
        axis.set_major_locator(MaxNLocator(integer=True))


def _histogram_values(histogram: dict[str, Any]) -> tuple[list[int], list[int]]:
    counts = histogram["counts"]
    return [int(k) for k in counts], list(counts.values())


def conversation_length(stats: dict[str, Any]) -> Figure:
    """Figure 2: how many turns conversations have."""
    lengths, counts = _histogram_values(stats["conversation_length"])
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if lengths:
        ax.hist(lengths, weights=counts, bins=min(30, max(lengths) - min(lengths) + 1), color="#4c72b0")
    ax.set_xlabel("turns per conversation")
    ax.set_ylabel("conversations")
    _counts(ax.xaxis, ax.yaxis)
    ax.set_title("Conversation length")
    return fig


def utterance_length(stats: dict[str, Any]) -> Figure:
    """Figure 3: tokens per utterance by role, as shares so the roles compare at any corpus size."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    cap = 0
    for role in ("student", "teacher"):
        tokens, counts = _histogram_values(stats["roles"][role]["tokens"])
        if tokens:
            cap = max(cap, _percentile(tokens, counts, 0.99))
    for role in ("student", "teacher"):
        tokens, counts = _histogram_values(stats["roles"][role]["tokens"])
        if tokens:
            ax.hist([min(t, cap) for t in tokens], weights=counts, bins=range(0, cap + 2), density=True,
                    histtype="step", linewidth=1.5, color=ROLE_COLOURS[role], label=role)
    ax.set_xlabel(f"tokens per utterance (last bin: {cap} or more)")
    _counts(ax.xaxis)
    ax.set_ylabel("share of utterances")
    ax.set_title("Utterance length")
    _legend(ax)
    return fig


def pattern_length(stats: dict[str, Any]) -> Figure:
    """Figure 4: share of sentences whose root has k children, by role."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.4
    for offset, role in ((-width / 2, "student"), (width / 2, "teacher")):
        distribution = stats["patterns"][role]["length_distribution"]
        ax.bar([int(k) + offset for k in distribution], list(distribution.values()), width=width,
               color=ROLE_COLOURS[role], label=role)
    ax.set_xlabel("pattern length (children of the sentence root)")
    _counts(ax.xaxis)
    ax.set_ylabel("share of sentences")
    ax.set_title("Linguistic pattern length")
    _legend(ax)
    return fig


def labels(stats: dict[str, Any]) -> Figure:
    """Table 2 as bars: the share of each intent (students) and action (teachers), ten most common."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, role in zip(axes, ("student", "teacher")):
        shares = list(stats["labels"][role]["shares"].items())[:10]
        ax.barh([k for k, _ in shares][::-1], [v for _, v in shares][::-1], color=ROLE_COLOURS[role])
        ax.set_title(f"{role} {'intents' if role == 'student' else 'actions'}")
        ax.set_xlabel("share of utterances")
    fig.tight_layout()
    return fig


def _legend(ax: Any) -> None:
    """A legend for the roles drawn; none for an empty plot (matplotlib warns on stderr otherwise)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend()


FIGURES: dict[str, Callable[[dict[str, Any]], Figure]] = {
    "conversation_length": conversation_length,
    "utterance_length": utterance_length,
    "pattern_length": pattern_length,
    "labels": labels,
}


def write_figures(stats: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Draw every figure into ``out_dir/<name>.png``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, draw in FIGURES.items():
        fig = draw(stats)
        try:
            fig.tight_layout()
            path = out_dir / f"{name}.png"
            fig.savefig(path, dpi=110)
            written[name] = path
        finally:
            plt.close(fig)
    return written


def _percentile(values: list[int], counts: list[int], q: float) -> int:
    total = sum(counts)
    seen = 0
    for value, n in sorted(zip(values, counts)):
        seen += n
        if seen >= q * total:
            return value
    return max(values)
