"""Frames' end-of-dialog surveys and the analysis of success against each template's probability.

At the end of a Frames dialog the user rated the wizard's cooperativity from 1 to 5 and the wizard, shown
the user's goal, said whether the user reached it (section 3.2; the corpus keeps them as
``userSurveyRating`` and ``wizardSurveyTaskSuccessful``). The questions are data here; a later step gives
them to ``turkflow.protocols.questions``'s ``RoleForm.survey``, as STAR's questionnaires are.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from turkflow.errors import InvalidAnswer
from turkflow.protocols.frames.goals import BREAKS_GOAL, MEETS_ALTERNATE, MEETS_GOAL, Goal, judge_booking

RATINGS = (1, 2, 3, 4, 5)
BOOKED, NOT_BOOKED = "booked", "none"  # a dialog's booking outcome, beside its answers in the report
OUTCOMES = (MEETS_GOAL, MEETS_ALTERNATE, BREAKS_GOAL, NOT_BOOKED)


@dataclass(frozen=True)
class SurveyQuestion:
    """``kind`` is "rating" (1-5, ``options`` label each value) or "yes_no". ``shows_goal``: the page shows
    the user's goal beside the question, as Frames showed the wizard."""

    name: str
    label: str
    kind: str
    options: tuple[tuple[str, str], ...]
    shows_goal: bool = False


FRAMES_USER_SURVEY = (
    SurveyQuestion("cooperativity", "How cooperative was the assistant?", "rating", (
        ("1", "1: not cooperative at all"), ("2", "2"), ("3", "3"), ("4", "4"),
        ("5", "5: very cooperative"))),
)
FRAMES_WIZARD_SURVEY = (
    SurveyQuestion("goal_reached", "This was the user's task. Do you think the user reached the goal?",
                   "yes_no", (("yes", "Yes"), ("no", "No")), shows_goal=True),
)
SURVEYS = {"user": FRAMES_USER_SURVEY, "wizard": FRAMES_WIZARD_SURVEY}


def read_answers(role: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """A role's answers from a form or JSON: a rating becomes an int from 1 to 5, yes/no a bool. Every
    question is required; an unknown or bad field is an ``InvalidAnswer`` naming it."""
    if role not in SURVEYS:
        raise InvalidAnswer("role", "a Frames dialog has a user and a wizard")
    if not isinstance(raw, Mapping):
        raise InvalidAnswer("survey", "expected the answers as an object")
    questions = SURVEYS[role]
    unknown = sorted(str(name) for name in raw if name not in {q.name for q in questions})
    if unknown:
        raise InvalidAnswer(unknown[0][:60], "not a question of this survey")
    clean: dict[str, Any] = {}
    for question in questions:
        given = raw.get(question.name)
        if given is None or given == "":
            raise InvalidAnswer(question.name, "this answer is required")
        if question.kind == "rating":
            text = str(given).strip() if not isinstance(given, bool) else ""
            if text not in {value for value, _ in question.options}:
                raise InvalidAnswer(question.name, "answer with a whole number from 1 to 5")
            clean[question.name] = int(text)
        else:
            if isinstance(given, bool):
                given = "yes" if given else "no"
            if given not in ("yes", "no"):
                raise InvalidAnswer(question.name, "answer yes or no")
            clean[question.name] = given == "yes"
    return clean


def _central(pmf: list[float], confidence: float) -> tuple[int, int]:
    """The narrowest counts [lo, hi] leaving at most (1 - confidence) / 2 of ``pmf`` outside on each side."""
    tail = (1 - confidence) / 2
    lo, below = 0, 0.0
    while below + pmf[lo] <= tail:
        below += pmf[lo]
        lo += 1
    hi, above = len(pmf) - 1, 0.0
    while above + pmf[hi] <= tail:
        above += pmf[hi]
        hi -= 1
    return lo, hi


def binomial_interval(n: int, p: float, confidence: float = 0.99) -> tuple[int, int]:
    """The counts Binomial(n, p) falls between with at least ``confidence``. Computed in logs, so n in the
    thousands is fine."""
    if n == 0 or p <= 0.0 or p >= 1.0:
        edge = 0 if p <= 0.0 else n
        return edge, edge
    pmf = [math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                    + k * math.log(p) + (n - k) * math.log1p(-p)) for k in range(n + 1)]
    return _central(pmf, confidence)


def mixed_interval(probabilities: list[float], confidence: float = 0.99) -> tuple[int, int]:
    """The same for independent draws with different probabilities (goals of several templates)."""
    pmf = [1.0]
    for p in probabilities:
        pmf = [(pmf[k] if k < len(pmf) else 0.0) * (1 - p) + (pmf[k - 1] * p if k else 0.0)
               for k in range(len(pmf) + 1)]
    return _central(pmf, confidence)


@dataclass(frozen=True)
class TemplateSuccess:
    """One template's dialogs: how many goals could succeed (first constraints matched), how many the
    wizard judged reached, split by the goal's draw and by what an unsuccessful user was told to do, and
    the users' cooperativity ratings."""

    template: str
    probability: float
    dialogs: int
    feasible: int
    expected: tuple[int, int]  # the 99% binomial interval for ``feasible`` at ``probability``
    judged: int  # dialogs whose wizard answered
    reached: int
    reached_feasible: tuple[int, int]  # (reached, judged) among feasible goals
    reached_alternate: tuple[int, int]  # among unfeasible goals with an alternate
    reached_ending: tuple[int, int]  # among unfeasible goals told to end the dialog
    ratings: Mapping[int, int]
    booked: Mapping[str, int]  # dialogs by what was booked: meets_goal, meets_alternate, breaks_goal, none

    @property
    def feasible_as_expected(self) -> bool:
        return self.expected[0] <= self.feasible <= self.expected[1]

    @property
    def reached_share(self) -> Optional[float]:
        return self.reached / self.judged if self.judged else None

    @property
    def mean_rating(self) -> Optional[float]:
        count = sum(self.ratings.values())
        return sum(r * c for r, c in self.ratings.items()) / count if count else None


def success_report(dialogs: Iterable[tuple[Goal, Mapping[str, Any]]],
                   booked: Optional[Sequence[Optional[Mapping[str, Any]]]] = None) -> list[TemplateSuccess]:
    """Per template (in name order), from each dialog's goal and its survey answers (the user's
    ``cooperativity`` and the wizard's ``goal_reached``, either possibly missing), plus a last row
    ``"all"`` whose probability is the mean of its goals'. ``booked`` gives each dialog's booked item (None:
    nothing booked), judged against the goal (``goals.judge_booking``)."""
    dialogs = list(dialogs)
    items = list(booked) if booked is not None else [None] * len(dialogs)
    if len(items) != len(dialogs):
        raise ValueError("one booked item (or None) per dialog")
    groups: dict[str, list[tuple[Goal, Mapping[str, Any]]]] = {}
    for (goal, answers), item in zip(dialogs, items):
        outcome = judge_booking(goal, item).outcome if item is not None else NOT_BOOKED
        groups.setdefault(goal.template, []).append((goal, {**answers, BOOKED: outcome}))
    rows = [_row(name, groups[name]) for name in sorted(groups)]
    everything = [pair for name in sorted(groups) for pair in groups[name]]
    if everything:
        rows.append(_row("all", everything))
    return rows


def _row(name: str, dialogs: list[tuple[Goal, Mapping[str, Any]]]) -> TemplateSuccess:
    def tally(which: list[tuple[Goal, Mapping[str, Any]]]) -> tuple[int, int]:
        judged = [a["goal_reached"] for _, a in which if a.get("goal_reached") is not None]
        return sum(bool(j) for j in judged), len(judged)

    feasible = [(g, a) for g, a in dialogs if g.matches > 0]
    alternate = [(g, a) for g, a in dialogs if g.matches == 0 and g.alternate]
    ending = [(g, a) for g, a in dialogs if g.matches == 0 and not g.alternate]
    reached, judged = tally(dialogs)
    probabilities = [g.probability for g, _ in dialogs]
    same = len(set(probabilities)) == 1
    probability = probabilities[0] if same else sum(probabilities) / len(probabilities)
    expected = binomial_interval(len(dialogs), probability) if same else mixed_interval(probabilities)
    ratings = Counter(a["cooperativity"] for _, a in dialogs if a.get("cooperativity") in RATINGS)
    outcomes = Counter(a[BOOKED] for _, a in dialogs)
    return TemplateSuccess(name, probability, len(dialogs), len(feasible), expected, judged, reached,
                           tally(feasible), tally(alternate), tally(ending),
                           {r: ratings.get(r, 0) for r in RATINGS},
                           {o: outcomes.get(o, 0) for o in OUTCOMES})

