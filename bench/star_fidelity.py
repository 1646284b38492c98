"""STAR's scenarios, nudges and questionnaires against ours, counted the same way on both (issue 39).

STAR's side is its training split (``DIR/train.tar.gz``, read in place): how IntroducesConflicts falls on
happy and unhappy dialogues, how many distinct nudges (the UserGuide's ``instruct`` texts, without their
"[instruction N of M]") its dialogues hold, how many distinct nudge sets, and which questions its users were
asked. Ours: ``make_scenarios`` over STAR's 24 tasks (``DIR/tasks``) for as many dialogues as STAR's first
``--dialogues`` (by id), with STAR's unhappy share and the default conflicts share, each task in turn, and
the same counts on the nudges and the users' task questions the scenarios hold.

    python -m bench star_fidelity --data ../shared/data/star --dialogues 5388
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from turkflow.protocols.star import scenarios
from turkflow.protocols.star.dialog import make_scenarios, read_tasks
from turkflow.protocols.star.log import read_corpus

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "star"
NUMBERED = re.compile(r"\s*\[instruction \d+ of \d+\]\s*$")


def nudge_counts(nudge_sets: list[tuple[str, ...]]) -> dict[str, Any]:
    texts = Counter(t for given in nudge_sets for t in given)
    sets = Counter(nudge_sets)
    return {"dialogues": len(nudge_sets), "nudges": sum(texts.values()), "distinct_nudges": len(texts),
            "distinct_nudges_per_dialogue": round(len(texts) / max(1, len(nudge_sets)), 3),
            "distinct_sets": len(sets), "dialogues_with_a_set_of_their_own": sum(1 for c in sets.values() if c == 1),
            "most_common_set_shared_by": max(sets.values(), default=0)}


def star_side(dialogues: Iterable[dict[str, Any]], limit: int) -> dict[str, Any]:
    flags: Counter = Counter()
    nudge_sets, user_questions = [], Counter()
    for n, dialogue in enumerate(dialogues):
        if n >= limit:
            break
        happy = dialogue["Scenario"]["Happy"]
        flags[f"{'happy' if happy else 'unhappy'}_{'with' if dialogue.get('IntroducesConflicts') else 'without'}"
              "_conflicts"] += 1
        nudge_sets.append(tuple(NUMBERED.sub("", e["Text"]).strip() for e in dialogue["Events"]
                                if e["Agent"] == "UserGuide" and e["Action"] == "instruct"))
        for question in dialogue.get("UserQuestionnaire") or []:
            user_questions[question["Question"]] += 1
    return {"introduces_conflicts": dict(sorted(flags.items())), **nudge_counts(nudge_sets),
            "user_questions": user_questions}


def our_side(tasks_dir: Path, dialogues: int, unhappy: float, seed: int) -> dict[str, Any]:
    tasks = read_tasks(tasks_dir)
    started = time.perf_counter()
    made = [s for _, s in make_scenarios(tasks, dialogues, unhappy=unhappy, seed=seed)]
    seconds = time.perf_counter() - started
    flags = Counter(f"{'happy' if s['happy'] else 'unhappy'}_{'with' if s['conflicts'] else 'without'}_conflicts"
                    for s in made)
    return {"introduces_conflicts": dict(sorted(flags.items())),
            **nudge_counts([tuple(n["text"] for n in s["nudges"]) for s in made]),
            "task_questions": Counter(s["task_question"] for s in made),
            "scenarios_per_second": round(dialogues / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="STAR's folder: train.tar.gz and tasks/")
    parser.add_argument("--dialogues", type=int, default=5388, help="STAR's first N dialogues, and N of ours")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    star = star_side(read_corpus(args.data / "train.tar.gz"), args.dialogues)
    flags = star["introduces_conflicts"]
    unhappy = (flags.get("unhappy_with_conflicts", 0) + flags.get("unhappy_without_conflicts", 0)) / star["dialogues"]
    ours = our_side(args.data / "tasks", star["dialogues"], unhappy, args.seed)
    asked = set(star.pop("user_questions"))
    questions = ours.pop("task_questions")
    ours["users_asked_a_question_star_asked"] = round(
        sum(n for q, n in questions.items() if q in asked) / star["dialogues"], 3)
    report = {"star": star, "ours": ours, "unhappy_share": round(unhappy, 3),
              "conflicts_share": scenarios.CONFLICTS}
    print(json.dumps(report, indent=1))
    print(f"distinct nudges per dialogue: STAR {star['distinct_nudges_per_dialogue']}, ours "
          f"{ours['distinct_nudges_per_dialogue']} ({ours['distinct_nudges_per_dialogue'] / max(star['distinct_nudges_per_dialogue'], 1e-9):.2f}x); "
          f"dialogues with a nudge set of their own: STAR {star['dialogues_with_a_set_of_their_own']}, ours "
          f"{ours['dialogues_with_a_set_of_their_own']} of {star['dialogues']}")


if __name__ == "__main__":
    main()
