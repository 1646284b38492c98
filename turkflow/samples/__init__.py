"""What turkflow ships for a first try, found wherever it is installed (a checkout or a wheel): each
protocol's sample tasks (``turkflow tasks load --sample``) and the dialogs the simulator's honest workers
replay when none are given. The turkflow authors wrote them, except ``sgd/``, a slice of a public corpus
with its license beside it.

Each folder's README says what it holds. Nothing here imports anything of turkflow's: any module may name a
sample.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent

# What ``turkflow tasks load --protocol NAME`` reads for each protocol that has tasks to load (annotation's
# conversations are another batch's turns).
TASKS: dict[str, Path] = {
    "wizard_of_tasks": HERE / "tasks.yaml",
    "star": HERE / "star" / "tasks",
    "frames": HERE / "frames" / "frames.yaml",
    "meep": HERE / "meep",
}
STAR_ROOT = HERE / "star"  # the STAR tasks with the knowledge base their apis/ folder holds
SGD_DIALOGS = HERE / "sgd"  # SGD's dialogues_*.json.gz, as the simulator reads a folder of them


def tasks(protocol: str) -> Optional[Path]:
    """The sample tasks of ``protocol``, None if it has none."""
    return TASKS.get(protocol)
