"""STAR's measures of the wizard (Mosig et al. 2020, section 4 and Table 8), for STAR corpora and turkflow's
STAR exports: whether wizards ask the schema's questions in order at the start of single-task dialogs,
how often a reply is a picked suggestion rather than one the wizard wrote, and queries per dialog."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from turkflow.dataset.analysis.corpora import Dialogue
from turkflow.dataset.analysis.stats import ratio
from turkflow.models import Role
from turkflow.protocols.star.consistency import QUERY, checked_actions, follows_order
from turkflow.protocols.star.schemas import TaskSchema


@dataclass
class _Order:
    dialogues: int = 0
    follow: int = 0
    happy_dialogues: int = 0
    happy_follow: int = 0


class StarStats:
    """Tallies as dialogues go by. Without task schemas (``schemas`` None) the order is not judged."""

    def __init__(self, schemas: Optional[Mapping[str, TaskSchema]]):
        self.schemas = schemas
        self.checked = {name: checked_actions(schema) for name, schema in (schemas or {}).items()}
        self.dialogues = 0
        self.picked = 0
        self.written = 0
        self.queries = 0
        self.order: dict[str, _Order] = {}
        self.unknown_tasks: Counter[str] = Counter()

    def add_dialogue(self, dialogue: Dialogue) -> None:
        self.dialogues += 1
        wizard = [turn.label for turn in dialogue.turns if turn.role == Role.teacher]
        self.queries += sum(1 for label in wizard if label == QUERY)
        self.picked += sum(1 for label in wizard if label is not None and label != QUERY)
        self.written += sum(1 for label in wizard if label is None)
        if self.schemas is None or dialogue.multi_task or len(dialogue.tasks) != 1:
            return
        task = dialogue.tasks[0]
        if task not in self.checked:
            self.unknown_tasks[task] += 1
            return
        follows = follows_order(wizard, self.checked[task])
        tally = self.order.setdefault(task, _Order())
        tally.dialogues += 1
        tally.follow += follows
        if dialogue.happy:
            tally.happy_dialogues += 1
            tally.happy_follow += follows

    def result(self) -> dict[str, Any]:
        replies = self.picked + self.written
        return {
            "dialogues": self.dialogues,
            "queries_per_dialogue": ratio(self.queries, self.dialogues),
            "wizard_replies": {"suggestions_picked": self.picked, "written": self.written,
                               "picked_share": ratio(self.picked, replies)},
            "wizard_order": self._order(),
        }

    def _order(self) -> Optional[dict[str, Any]]:
        if self.schemas is None:
            return None
        tasks = {task: {"dialogues": t.dialogues, "follow": ratio(t.follow, t.dialogues),
                        "happy_dialogues": t.happy_dialogues,
                        "happy_follow": ratio(t.happy_follow, t.happy_dialogues),
                        "checked_actions": list(self.checked[task])}
                 for task, t in sorted(self.order.items())}
        dialogues = sum(t.dialogues for t in self.order.values())
        happy = sum(t.happy_dialogues for t in self.order.values())
        shares = [t["follow"] for t in tasks.values()]
        return {
            "single_task_dialogues": dialogues,
            "follow": ratio(sum(t.follow for t in self.order.values()), dialogues),
            "happy_follow": ratio(sum(t.happy_follow for t in self.order.values()), happy),
            "mean_over_tasks": ratio(sum(shares), len(shares)),
            "tasks": tasks,
            "tasks_without_schema": dict(self.unknown_tasks),
        }


def schemas_beside(paths: Sequence[Path]) -> Optional[Path]:
    """STAR's layout keeps ``tasks/`` beside ``dialogues/``: the schemas of a STAR root (or of its
    ``dialogues`` folder) given as input."""
    for path in paths:
        for root in (path, path.parent):
            if (root / "dialogues").is_dir() and (root / "tasks").is_dir():
                return root / "tasks"
    return None
