"""What honest simulated workers say: real dialogs replayed turn by turn.

The Schema-Guided Dialogue corpus (SGD, Rastogi et al. 2020) alternates USER and SYSTEM turns starting
with the user, exactly like a turkflow conversation alternates student and teacher starting with the
student. So a conversation's *script* replays SGD dialogs in order: student turn ``2j`` says the ``j``-th
USER utterance, teacher turn ``2j + 1`` the ``j``-th SYSTEM utterance, and the student stops where the
script ends. Scripts depend only on the seed, so the same seed always asks for the same conversations.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from turkflow import samples
from turkflow.models import Role


def default_dialogs_dir() -> Path:
    """The slice of SGD's dev split shipped with turkflow (``turkflow/samples/sgd``), found wherever it is
    installed; ``--dialogs`` replays another folder, such as the whole split."""
    return samples.SGD_DIALOGS


@dataclass(frozen=True)
class Dialog:
    dialogue_id: str
    user: tuple[str, ...]
    system: tuple[str, ...]


def read_dialogs(directory: Path) -> list[Dialog]:
    """Every SGD dialog under ``directory`` (``dialogues_*.json.gz`` or ``.json``), in file order."""
    files = sorted(directory.glob("dialogues_*.json.gz")) or sorted(directory.glob("dialogues_*.json"))
    if not files:
        raise ValueError(f"no SGD dialogues_*.json(.gz) files in {directory}")
    dialogs = []
    for path in files:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            for raw in json.load(handle):
                turns = raw["turns"]
                user = tuple(t["utterance"].strip() for t in turns if t["speaker"] == "USER")
                system = tuple(t["utterance"].strip() for t in turns if t["speaker"] == "SYSTEM")
                if user and system and turns[0]["speaker"] == "USER":
                    dialogs.append(Dialog(raw["dialogue_id"], user, system))
    return dialogs


@dataclass(frozen=True)
class Script:
    """What the honest writers of one conversation say, and how long it lasts.

    ``length`` counts turns up to the teacher's closing turn; the student asks to stop at ``length - 2``.
    A batch's ``max_turns`` may end the conversation earlier.
    """

    length: int
    student: tuple[str, ...]
    teacher: tuple[str, ...]
    dialogue_ids: tuple[str, ...]

    def utterance(self, role: str, index: int) -> str:
        lines = self.student if role == Role.student else self.teacher
        return lines[(index // 2) % len(lines)]

    def stops_at(self, index: int) -> bool:
        return index == self.length - 2

    def turns(self, max_turns: int) -> int:
        """How many turns the conversation will have under a batch's turn limit."""
        return min(self.length, max_turns)


def write_scripts(dialogs: list[Dialog], conversations: int, seed: int,
                  mean_turns: Optional[int] = None) -> list[Script]:
    """One script per conversation, from consecutive dialogs starting at a seeded place in the corpus.

    Without ``mean_turns`` a conversation is as long as the dialog it replays. With it, lengths are drawn
    evenly around the mean (even numbers, so a teacher closes) and dialogs are chained to fill them.
    """
    if not dialogs:
        raise ValueError("no dialogs to replay")
    if mean_turns is not None and mean_turns < 2:
        raise ValueError("mean-turns must be at least 2")
    rng = random.Random(f"{seed}:scripts")
    cursor = rng.randrange(len(dialogs))
    scripts = []
    for _ in range(conversations):
        if mean_turns is None:
            target = 2 * min(len(dialogs[cursor].user), len(dialogs[cursor].system))
        else:
            half = mean_turns // 2
            target = 2 * rng.randint(max(1, half - half // 2), half + half // 2)
        student: list[str] = []
        teacher: list[str] = []
        used: list[str] = []
        while len(student) < target // 2:
            dialog = dialogs[cursor]
            pairs = min(len(dialog.user), len(dialog.system), target // 2 - len(student))
            student.extend(dialog.user[:pairs])
            teacher.extend(dialog.system[:pairs])
            used.append(dialog.dialogue_id)
            cursor = (cursor + 1) % len(dialogs)
        scripts.append(Script(length=target, student=tuple(student), teacher=tuple(teacher),
                              dialogue_ids=tuple(used)))
    return scripts
