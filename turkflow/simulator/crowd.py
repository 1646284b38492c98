"""Simulated workers: who they are, how well they really work, and what they answer on a turn page.

Every simulated worker has a behaviour and a hidden true quality the quality monitor never sees: the
chance that a turn they write is actually relevant and useful. Whether a turn is good is drawn once when
it is written; the next worker rates it according to *their* behaviour (truthfully, at random, or always
"no"). The monitor is then judged against this hidden truth.

Every turn also carries the report the turn page would send on how it was written (``turkflow.writing``):
a person types their text at their own speed, with corrections, and a few use a phone keyboard whose word
completion needs fewer keys than characters; a paster writes good text with a language model and pastes
it, so it arrives without keystrokes. The not_typed flag is judged against this truth (``bench.typing_flag``).

All randomness is drawn from generators seeded by (seed, what is being decided, which turn), never from
shared state, so the answers do not depend on which thread or process got there first. A worker answers
the gold turns of onboarding as their behaviour rates (``answer_gold``).
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Optional

from sqlmodel import Session

from turkflow.hits import lifecycle
from turkflow.models import Assignment, Role, Turn, Worker, WorkerStatus
from turkflow.quality import gold
from turkflow.simulator.utterances import Script


class Behaviour(StrEnum):
    honest = "honest"
    spammer = "spammer"  # random or repeated text, random ratings
    lazy = "lazy"  # very short replies, truthful ratings
    careless = "careless"  # writes well, rates at random
    harsh = "harsh"  # writes well, rates every turn "no"
    paster = "paster"  # good text from a language model, pasted or inserted without typing; truthful ratings


@dataclass(frozen=True)
class Profile:
    writes: str  # replay | spam | short
    rates: str  # truthful | random | no
    quality: tuple[float, float]  # range of the hidden chance that a turn they write is good
    types: bool = True  # False: their text reaches the box without keystrokes


PROFILES: dict[Behaviour, Profile] = {
    Behaviour.honest: Profile("replay", "truthful", (0.85, 0.99)),
    Behaviour.spammer: Profile("spam", "random", (0.0, 0.10)),
    Behaviour.lazy: Profile("short", "truthful", (0.30, 0.50)),
    Behaviour.careless: Profile("replay", "random", (0.85, 0.99)),
    Behaviour.harsh: Profile("replay", "no", (0.85, 0.99)),
    Behaviour.paster: Profile("replay", "truthful", (0.85, 0.99), types=False),
}

# The monitor judges the turns a worker writes, so these are the workers it should block.
BAD_WRITERS = frozenset({Behaviour.spammer, Behaviour.lazy})

# How often an honest rater's yes/no disagrees with the truth (people misjudge too).
RATER_ERROR = 0.05

# Typing, per worker: characters a second (about 20 to 90 words a minute) and, for the share who write on a
# phone keyboard with word completion, keystrokes per character below one.
TYPING_SPEED = (1.5, 7.5)
PHONE_SHARE = 0.10
PHONE_KEYS_PER_CHAR = (0.4, 0.95)
DESK_KEYS_PER_CHAR = (1.0, 1.35)  # corrections and cursor keys

LAZY_REPLIES = ("ok", "yes", "no", "next", "ok thx", "sure", "fine", "go on")
SPAM_PHRASES = ("good good good", "nice nice", "I like it very much", "yes yes yes yes", "ok ok ok ok")


@dataclass(frozen=True)
class SimWorker:
    name: str
    role: str
    behaviour: Behaviour
    quality: float

    @property
    def profile(self) -> Profile:
        return PROFILES[self.behaviour]

    @property
    def bad_writer(self) -> bool:
        return self.behaviour in BAD_WRITERS


def build_crowd(students: int, teachers: int, mix: dict[Behaviour, float], seed: int,
                roles: tuple[str, str] = (Role.student, Role.teacher),
                played_by_agents: tuple[str, ...] = ()) -> list[SimWorker]:
    """Workers of both roles (another protocol's ``roles``: STAR's users and wizards take the students' and
    teachers' numbers); each role gets ``round(share * size)`` workers of every bad behaviour. A role in
    ``played_by_agents`` may have none (agents play it).

    Exact counts rather than coin flips, so a 15% spammer share is 15% in every run; which names get
    which behaviour is shuffled by the seed.
    """
    unknown = set(mix) - set(Behaviour)
    if unknown:
        raise ValueError(f"unknown behaviour(s): {', '.join(sorted(map(str, unknown)))}")
    if any(share < 0 for share in mix.values()) or sum(mix.values()) > 1:
        raise ValueError("behaviour shares must be between 0 and 1 and sum to at most 1")
    crowd = []
    for role, size in zip(roles, (students, teachers)):
        if size < 1 and role in played_by_agents:
            continue
        if size < 1:
            raise ValueError(f"at least one {role} is needed")
        behaviours: list[Behaviour] = []
        for behaviour in Behaviour:
            if behaviour != Behaviour.honest:
                behaviours += [behaviour] * round(mix.get(behaviour, 0.0) * size)
        behaviours = behaviours[:size]
        behaviours += [Behaviour.honest] * (size - len(behaviours))
        random.Random(f"{seed}:crowd:{role}").shuffle(behaviours)
        for n, behaviour in enumerate(behaviours):
            name = f"sim-{role}-{n:03d}"
            low, high = PROFILES[behaviour].quality
            quality = random.Random(f"{seed}:quality:{name}").uniform(low, high)
            crowd.append(SimWorker(name=name, role=role, behaviour=behaviour, quality=round(quality, 4)))
    return crowd


@dataclass(frozen=True)
class Written:
    """A simulated turn: the form to post and the hidden truth about it."""

    form: dict[str, Any]
    good: bool
    rated_relevant: bool | None
    rated_useful: bool | None


STUDENT_INTENTS = (("request_step", 40), ("question_step", 25), ("request_items", 10), ("question_items", 15),
                   ("chit_chat", 5), ("other", 5))
TEACHER_ACTIONS = (("return_step", 35), ("answer_document", 30), ("return_items", 10), ("answer_external", 10),
                   ("ask_question", 10), ("chit_chat", 5))
REAL_LIFE = ("I would get the things out and start.", "I would read the step again and do it.",
             "I would check what I have at home first.", "I would try it and see how it goes.")


def write_turn(worker: SimWorker, seed: int, conversation: int, script: Script, view: dict[str, Any],
               previous_good: bool | None) -> Written:
    """What ``worker`` submits on a turn page whose JSON is ``view``.

    ``conversation`` is the conversation's position in the batch (not its database id, which differs from
    one database to the next); ``previous_good`` is the hidden truth about the turn being rated.
    """
    index = view["turn_index"]
    rng = random.Random(f"{seed}:turn:{conversation}:{index}")
    good = rng.random() < worker.quality
    asked = {q["name"]: q for q in view["questions"]}
    form: dict[str, Any] = {}

    rated_relevant = rated_useful = None
    if "relevant" in asked and previous_good is not None:
        rated_relevant, rated_useful = _rate(worker.profile.rates, previous_good, rng)
        form["relevant"] = "yes" if rated_relevant else "no"
        form["useful"] = "yes" if rated_useful else "no"

    label_name = "intent" if worker.role == Role.student else "action"
    choices = STUDENT_INTENTS if worker.role == Role.student else TEACHER_ACTIONS
    if worker.role == Role.student and script.stops_at(index):
        label = "stop"
    elif worker.profile.writes == "replay":
        label = rng.choices([c for c, _ in choices], weights=[w for _, w in choices])[0]
    else:
        label = rng.choice([c for c, _ in choices])
    form[label_name] = label

    form["response"] = _response(worker, script, index, rng)
    keyboard = random.Random(f"{seed}:typing:{conversation}:{index}")
    form["signals"] = json.dumps(writing_report(worker, form["response"], keyboard, seed))
    if "real_life" in asked:
        form["real_life"] = rng.choice(REAL_LIFE) if worker.profile.writes == "replay" else form["response"]
    if "urls" in asked and label == "answer_external":
        form["urls"] = "https://en.wikipedia.org/wiki/Cooking"
    if "shared" in asked and worker.profile.writes == "replay":
        step = f"step-{index // 2 + 1}"
        form["shared"] = [step] if step in asked["shared"]["options"] else []
    if "danger" in asked:
        form["danger"] = []
    return Written(form=form, good=good, rated_relevant=rated_relevant, rated_useful=rated_useful)


def revise(written: Written, field: str | None) -> Written | None:
    """What a worker does when the page refuses a text answer (too short, say): write it out in full.
    Other refusals are left alone (None): a person could not fix them by rewording either."""
    value = written.form.get(field) if field else None
    if not isinstance(value, str):
        return None
    return replace(written, form={**written.form, field: f"{value}, that is my answer"})


def writing_report(worker: SimWorker, text: str, rng: random.Random, seed: int) -> dict[str, Any]:
    """What the turn page would report of how ``worker`` wrote ``text``: a typist's keystrokes and time, or
    a paster's text arriving with a paste (refused in the teacher's box) and hardly a key pressed."""
    reading_ms = rng.uniform(4_000, 40_000)
    rating_ms = rng.uniform(2_000, 12_000)
    blurs = rng.choices((0, 1, 2), weights=(70, 20, 10))[0]
    if not worker.profile.types:
        keys = rng.choice((0, 0, 1, 2))  # perhaps a space or Enter after the paste
        waiting_ms = rng.uniform(5_000, 30_000)  # for the model, in another window
        return {"page_ms": round(reading_ms + waiting_ms + rating_ms), "first_key_ms":
                round(reading_ms + waiting_ms) if keys else None, "keys": keys,
                "pastes": rng.choice((1, 1, 2)) if worker.role == Role.teacher else 1, "drops": 0,
                "blurs": blurs + 1}
    habits = random.Random(f"{seed}:keyboard:{worker.name}")
    speed = habits.uniform(*TYPING_SPEED)
    keys_per_char = habits.uniform(*(PHONE_KEYS_PER_CHAR if habits.random() < PHONE_SHARE
                                     else DESK_KEYS_PER_CHAR))
    typing_ms = 1000 * len(text) / speed * rng.uniform(1.0, 1.5)  # pauses to think
    return {"page_ms": round(reading_ms + typing_ms + rating_ms), "first_key_ms": round(reading_ms),
            "keys": round(len(text) * keys_per_char * rng.uniform(0.95, 1.05)), "pastes": 0, "drops": 0,
            "blurs": blurs}


def answer_gold(worker: SimWorker, seed: int) -> dict[str, tuple[bool, bool]]:
    """How ``worker`` rates the gold turns of onboarding (``turkflow.quality.gold``): as they rate turns in
    the batch (truthfully with an honest rater's slips, at random, or no/no), each turn's key the truth.
    Drawn per (seed, worker, gold turn), so the live run and the replay give the same answers."""
    return {item.name: _rate(worker.profile.rates, item.good, random.Random(f"{seed}:gold:{worker.name}:{item.name}"))
            for item in gold.gold_for(worker.role)}


EVALUATION_SCORE_NOISE = 0.5  # the spread of a truthful judge's 1-5 score around what the turns were worth


def judge_agent(worker: SimWorker, seed: int, conversation: int, questions: list[dict[str, Any]],
                right: list[bool]) -> dict[str, str]:
    """``worker``'s end-of-dialog evaluation of the agent they talked to (the questions as the survey's JSON
    gives them; ``right``: the hidden truth of each of its turns in the dialog). A truthful judge says the task
    was done with the chance that a turn was right, and scores 1 + 4 x that share, give or take; a random rater
    answers at random; a harsh one says no and 1 to everything."""
    rng = random.Random(f"{seed}:evaluation:{worker.name}:{conversation}")
    share = sum(right) / len(right) if right else 0.0
    rates = worker.profile.rates
    answers = {}
    for question in questions:
        name, kind = question["name"], question["kind"]
        if kind == "yes_no":
            done = rng.random() < (share if rates == "truthful" else 0.5 if rates == "random" else 0.0)
            answers[name] = "yes" if done else "no"
        elif kind == "rating":
            score = (1 + 4 * share + rng.gauss(0, EVALUATION_SCORE_NOISE) if rates == "truthful"
                     else rng.randint(1, 5) if rates == "random" else 1)
            answers[name] = str(min(5, max(1, round(score))))
        else:
            answers[name] = ("Most answers helped me along." if share >= 0.5
                             else "Too many answers were off topic.")
    return answers


def _rate(rates: str, truth: bool, rng: random.Random) -> tuple[bool, bool]:
    if rates == "truthful":
        return (truth if rng.random() >= RATER_ERROR else not truth,
                truth if rng.random() >= RATER_ERROR else not truth)
    if rates == "random":
        return rng.random() < 0.5, rng.random() < 0.5
    return False, False


def _response(worker: SimWorker, script: Script, index: int, rng: random.Random) -> str:
    writes = worker.profile.writes
    if writes == "replay":
        return script.utterance(worker.role, index)
    if writes == "short":
        return rng.choice(LAZY_REPLIES)
    if rng.random() < 0.5:
        return rng.choice(SPAM_PHRASES)
    words = [''.join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 8))) for _ in range(rng.randint(2, 9))]
    return " ".join(words)


def take_first_offered(session: Session, worker: Worker) -> Optional[tuple[Assignment, Turn]]:
    """A simulated worker takes the first turn their queue offers: its assignment and turn, None when they
    are blocked or nothing is left for them."""
    if worker.status != WorkerStatus.active:
        return None
    offered = lifecycle.open_hits_for(session, worker, limit=1)
    if not offered:
        return None
    assignment = lifecycle.take_turn(session, worker, offered[0].id, lease_seconds=600)
    return assignment, session.get(Turn, offered[0].turn_id)
