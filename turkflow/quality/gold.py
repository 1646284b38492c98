"""Gold turns: example turns, in context, whose rating is known, rated once at onboarding.

A rater's first real ratings would otherwise be weighed with the trust model's prior alone, so an honest
newcomer rated by a careless rater in their first turns is judged as if that rater were attentive. Rating a
few gold turns gives every rater a record before they rate anyone (``reliability.learn_gold``): a rater who
answers at random, or says no/no to a plainly good turn, starts with little or no trust; one who answers
as the key does is trusted from their first real rating. Gold never fails anyone at onboarding (a careless
rater may still write well): it sets how much their ratings count.

Each role rates the other role's turns, as in the batch: a student rates teacher turns, a teacher student
turns. Half the gold turns are good (relevant and useful), half plainly bad (spam, off-topic, random
letters), written for turkflow (no corpus text, no license to carry). The items are protocol-neutral data;
a protocol with other rating questions would bring its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from sqlmodel import Session

from turkflow import events
from turkflow.errors import InvalidInput
from turkflow.models import Role
from turkflow.quality import reliability


@dataclass(frozen=True)
class GoldTurn:
    name: str
    task: str  # the task's title, as the rater would see it
    context: tuple[tuple[str, str], ...]  # (speaker, text) before the rated turn, oldest first
    speaker: str
    text: str
    good: bool  # the key: relevant and useful (True), or neither (False)


_FRENCH_TOAST = "Make French toast"
_REPOT = "Repot a houseplant"

GOLD: dict[str, tuple[GoldTurn, ...]] = {
    Role.student: (  # students rate teacher turns
        GoldTurn("t1", _FRENCH_TOAST, (("student", "What do I need first?"),), "teacher",
                 "Two eggs, half a cup of milk, a pinch of cinnamon and four slices of bread. Do you have them?",
                 True),
        GoldTurn("t2", _FRENCH_TOAST, (("student", "Do I need to preheat the pan?"),), "teacher",
                 "good good good", False),
        GoldTurn("t3", _REPOT, (("student", "Which pot should I pick?"),), "teacher",
                 "One a few centimetres wider than the old one, with a drainage hole at the bottom.", True),
        GoldTurn("t4", _REPOT, (("student", "How much soil goes in first?"),), "teacher",
                 "My favourite football team won yesterday.", False),
        GoldTurn("t5", _FRENCH_TOAST, (("student", "How long do I soak the bread?"),), "teacher",
                 "Only a few seconds on each side, so it takes up the egg without falling apart.", True),
        GoldTurn("t6", _FRENCH_TOAST, (("student", "What do I do after whisking the eggs?"),), "teacher",
                 "qwe rtz uiop asdf", False),
    ),
    Role.teacher: (  # teachers rate student turns
        GoldTurn("s1", _FRENCH_TOAST, (("teacher", "First whisk the eggs with the milk and cinnamon in a shallow "
                                                   "bowl."),), "student",
                 "Done! Should the mixture be completely smooth?", True),
        GoldTurn("s2", _REPOT, (("teacher", "Now gently take the plant out of its old pot."),), "student",
                 "ok ok ok ok", False),
        GoldTurn("s3", _REPOT, (("teacher", "Water the plant a day before you repot it."),), "student",
                 "Why a day before and not right before?", True),
        GoldTurn("s4", _FRENCH_TOAST, (("teacher", "Dip each slice in the egg mixture."),), "student",
                 "what is the capital of france lol", False),
        GoldTurn("s5", _FRENCH_TOAST, (("teacher", "Next, melt a little butter in a pan."),), "student",
                 "Ok, how hot should the pan be before the bread goes in?", True),
        GoldTurn("s6", _REPOT, (("teacher", "Put a layer of fresh soil in the new pot."),), "student",
                 "xkcd lorem blah zzz", False),
    ),
}

ANSWERS = {"yes": True, "no": False}


def gold_for(role: str) -> tuple[GoldTurn, ...]:
    """The gold turns a role rates at onboarding (none for a role without them)."""
    return GOLD.get(role, ())


def field(item: GoldTurn, question: str) -> str:
    """The form field of one question (relevant, useful) about a gold turn."""
    return f"gold-{item.name}-{question}"


def answers_from(role: str, form: Mapping[str, str]) -> dict[str, tuple[bool, bool]]:
    """(relevant, useful) per gold turn from the onboarding form; a missing or other answer than yes or no
    is refused naming its field. A form with no gold answer at all (a program that only takes the quiz)
    gives none: the worker starts the batch as a rater of unknown record."""
    if not any(field(item, question) in form for item in gold_for(role) for question in ("relevant", "useful")):
        return {}
    answers = {}
    for item in gold_for(role):
        pair = []
        for question in ("relevant", "useful"):
            name = field(item, question)
            value = form.get(name)
            if value not in ANSWERS:
                raise InvalidInput("answer yes or no", name)
            pair.append(ANSWERS[value])
        answers[item.name] = (pair[0], pair[1])
    return answers


def teach(model: reliability.Model, record: reliability.RaterRecord, role: str,
          answers: Mapping[str, tuple[bool, bool]]) -> reliability.RaterRecord:
    """The rater's record after their gold answers, in the items' order (the simulator's replay calls the
    same function, so live and replay agree)."""
    for item in gold_for(role):
        if item.name in answers:
            relevant, useful = answers[item.name]
            record = reliability.learn_gold(model, record, reliability.answer_of(relevant, useful), item.good)
    return record


def record_gold(session: Session, worker_id: int, role: str, answers: Mapping[str, tuple[bool, bool]],
                model: reliability.Model) -> dict[str, Any]:
    """Store what a rater's gold answers say of them (once: a worker rates gold when they first pass
    onboarding) and log the answers; returns the evidence the review page shows of a rater."""
    before = reliability.records(session, [worker_id])[worker_id]
    after = teach(model, before, role, answers)
    evidence = reliability.evidence(model, after)
    events.record(session, "gold_rated", f"worker:{worker_id}", worker_id=worker_id, role=role,
                  gold={name: list(pair) for name, pair in answers.items()}, rater=evidence)
    if reliability.add_rating(session, worker_id, before, after):
        events.record(session, "rater_identified", "system", worker_id=worker_id, **evidence)
    return evidence
