"""Known-answer pairs: comparisons whose answer is not a matter of taste, to tell judges who read both dialogs
from those who do not (ACUTE-Eval's check).

At onboarding a judge compares the written pairs below (``ONBOARDING``, part of the judge's quiz in
``turkflow.hits.onboarding``); in the work, a finished dialog of the batch is shown beside a copy of itself in
which one of the assistant's turns is replaced by a planted bad one (``PLANTED``: off topic, or no answer at
all). Half the time the good dialog is on the left, so a judge who always picks one side fails half of them.
Everything here was written for turkflow (no corpus text, no license to carry).
"""

from __future__ import annotations

from dataclasses import dataclass

Dialog = tuple[tuple[str, str], ...]  # (speaker, text), oldest first


@dataclass(frozen=True)
class KnownPair:
    name: str
    task: str  # the task's title, as the judge sees it
    left: Dialog
    right: Dialog
    answer: str  # left or right: the dialog whose assistant a reading judge prefers
    why: str  # what makes it plain, for the requester who reads the quiz


def _dialog(*turns: str) -> Dialog:
    """Turns alternating between the user (first) and the assistant."""
    return tuple(("user" if n % 2 == 0 else "assistant", text) for n, text in enumerate(turns))


_TOAST = _dialog(
    "Hi! I want to make French toast. What do I need?",
    "Two eggs, half a cup of milk, a pinch of cinnamon, butter and four slices of bread.",
    "Got them. What first?",
    "Whisk the eggs, milk and cinnamon in a shallow bowl, then heat a little butter in a pan.",
    "How long does each slice stay in the egg?",
    "A few seconds on each side, so it soaks up the mixture without falling apart.",
    "Thanks, that was easy!",
)
_TOAST_OFF_TOPIC = _TOAST[:5] + (("assistant", "My favourite football team won yesterday, what a match."),) + _TOAST[6:]
_PLANT = _dialog(
    "My basil plant looks sad. Should I repot it?",
    "If roots come out of the drainage hole, yes: pick a pot a few centimetres wider.",
    "Roots are coming out. What soil do I use?",
    "A light potting mix for herbs; put a layer at the bottom, set the plant in and fill around it.",
    "Should I water it right away?",
    "Yes, water it well and keep it out of strong sun for a couple of days.",
)
_PLANT_NO_ANSWER = _PLANT[:3] + (("assistant", "I cannot help with that."),) + _PLANT[4:]
_TRAIN = _dialog(
    "I need a train from Lyon to Geneva on Friday morning.",
    "There is one at 7:04 arriving at 8:56, and one at 9:30 arriving at 11:20. Which suits you?",
    "The 9:30, please. How much is it?",
    "It is 34 euros in second class. Shall I book it?",
    "Yes, please.",
    "Done: Friday, 9:30 from Lyon Part-Dieu, arriving in Geneva at 11:20.",
)
_TRAIN_WRONG = _TRAIN[:5] + (("assistant", "Done: Sunday, 18:10 from Paris, arriving in Brussels at 19:32."),)
_BREAD = _dialog(
    "How do I keep bread fresh for longer?",
    "Keep it in a paper or cloth bag at room temperature; slice and freeze what you will not eat in two days.",
    "Can I put it in the fridge?",
    "Better not: the fridge makes bread go stale faster than the counter.",
)
_BREAD_GIBBERISH = _BREAD[:3] + (("assistant", "qwe rtz uiop asdf ghjk"),)

ONBOARDING: tuple[KnownPair, ...] = (
    KnownPair("pair-1", "Make French toast", _TOAST_OFF_TOPIC, _TOAST, "right",
              "the left assistant answers a question about soaking with football"),
    KnownPair("pair-2", "Repot a basil plant", _PLANT, _PLANT_NO_ANSWER, "left",
              "the right assistant refuses to say which soil"),
    KnownPair("pair-3", "Book a train to Geneva", _TRAIN, _TRAIN_WRONG, "left",
              "the right assistant books another day, town and train than the user asked for"),
    KnownPair("pair-4", "Keep bread fresh", _BREAD_GIBBERISH, _BREAD, "right",
              "the left assistant's last answer is random letters"),
)

# What a planted bad turn says instead of the assistant's turn (one of them, drawn per pair).
PLANTED: tuple[str, ...] = (
    "My favourite football team won yesterday, what a match.",
    "I cannot help with that.",
    "qwe rtz uiop asdf ghjk",
    "Sorry, I was thinking about my lunch. What was the question?",
    "ok ok ok ok ok",
    "Please ask someone else.",
    "The weather on Mars is cold and dusty this time of year.",
    "lorem ipsum dolor sit amet",
)
