"""Agents that need no server: STAR's suggestion model as a wizard, and simulated agents of known quality.

- ``star-suggest``: a STAR wizard that queries the knowledge base with the choices the user named (each form
  field's choice found in the user's messages) and sends the shipped next-action model's first suggestion
  the page offers filled, as a person clicking it would; a baseline for STAR's next-action models.
- ``sim-good``, ``sim-poor`` and ``sim-NN``: answer right with probability 0.9, 0.5 and NN/100, drawn from the
  conversation and the turn (the same run gives the same answers). Right is what the role's page asks for (a
  Wizard of Tasks teacher gives the next step and shares it; a student asks for it, and stops once every
  step was shown); wrong is one of ``OFF_TOPIC``, so a simulated judge can tell which turns were bad.
"""

from __future__ import annotations

import random
import re
from typing import Any, Optional

from turkflow.agents.interface import Reply, TurnView

QUALITIES = {"sim-good": 0.9, "sim-poor": 0.5}
_SIM = re.compile(r"^sim-(\d{1,3})$")
OFF_TOPIC = (
    "I am not sure about that, but the weather is lovely today.",
    "Let us talk about something else: have you seen any good films lately?",
    "Sorry, I was thinking about my holidays.",
)
STUDENT_STOP_AFTER = 12  # turns: a simulated student stops here at the latest


def names() -> list[str]:
    return ["star-suggest", *QUALITIES, "sim-NN"]


def quality_of(name: str) -> Optional[float]:
    """The chance a simulated agent answers right, or None when ``name`` is no simulated agent."""
    if name in QUALITIES:
        return QUALITIES[name]
    found = _SIM.match(name)
    return min(int(found.group(1)), 100) / 100 if found else None


def build(name: str) -> Any:
    """The built-in named ``name``; ``ValueError`` naming the known ones otherwise."""
    if name == "star-suggest":
        return StarSuggest()
    quality = quality_of(name)
    if quality is None:
        raise ValueError(f"no built-in agent {name!r}; built-ins: {', '.join(names())}")
    return Simulated(name, quality)


class Simulated:
    def __init__(self, name: str, quality: float):
        self.name, self.quality = name, quality

    def right(self, view: TurnView) -> bool:
        return random.Random(f"{self.name}:{view.conversation_id}:{view.turn_index}").random() < self.quality

    def answer(self, view: TurnView) -> Reply:
        right = self.right(view)
        off = OFF_TOPIC[(view.conversation_id + view.turn_index) % len(OFF_TOPIC)]
        if view.protocol == "wizard_of_tasks":
            return Reply(answer=self._wizard_of_tasks(view, right, off))
        if view.role == "user":
            said = sum(1 for h in view.history if h["role"] == "user")
            text = (f"I would like help with {view.sees.get('task', 'my task')}." if said == 0 else
                    "Thank you, that is all I needed." if said >= 2 else "Can you tell me more, please?")
            done = said >= 2 and view.protocol != "meep"
            return Reply(answer={"action": "utter", "text": text if right else off,
                                 **({"complete": True} if done else {})})
        closing = view.closing[-1] if view.closing else "utter"
        return Reply(answer={"action": closing, "text": "Certainly, I can help you with that." if right else off})

    def _wizard_of_tasks(self, view: TurnView, right: bool, off: str) -> dict[str, Any]:
        ratings = {name: "yes" for name in ("relevant", "useful") if name in view.schema["properties"]}
        if view.role == "teacher":
            shared = set(view.sees.get("shared_so_far", []))
            steps = [item for item in view.sees.get("document", []) if re.fullmatch(r"step-\d+", item["id"])]
            step = next((item for item in steps if item["id"] not in shared), None)
            if not right or step is None:
                return {**ratings, "action": "chit_chat", "shared": [],
                        "response": off if not right else "That was the last step: well done!"}
            return {**ratings, "action": "return_step", "shared": [step["id"]],
                    "response": f"Here is what to do next. {step['text']}"}
        shown = {text for h in view.history for text in h.get("shared", [])}
        if view.turn_index > 0 and (not any(h.get("shared") for h in view.history[-1:])
                                    or view.turn_index >= STUDENT_STOP_AFTER) and right:
            return {**ratings, "intent": "stop", "response": "Thank you, I have everything I need. Goodbye!",
                    **_student_extras(view)}
        text = "What is the next step?" if shown else f"How do I start with {view.sees.get('task', 'this')}?"
        return {**ratings, "intent": "request_step" if right else "chit_chat", "response": text if right else off,
                **_student_extras(view)}


def _student_extras(view: TurnView) -> dict[str, Any]:
    props = view.schema["properties"]
    return {**({"danger": []} if "danger" in props else {}),
            **({"real_life": "I would follow the step at my table."} if "real_life" in props else {})}


class StarSuggest:
    """STAR's wizard as its suggestion model would play it (``turkflow.protocols.star.suggestions``)."""

    def answer(self, view: TurnView) -> Reply:
        if view.protocol != "star" or view.role != "wizard":
            raise ValueError("star-suggest plays STAR's wizard only")
        sees = view.sees
        if not view.steps:
            form = self._form(view)
            if form and not any(asked_already(entry, form) for entry in sees.get("kb_log", [])):
                return Reply(answer={"action": "query", "api": sees["task"]["api"], "form": form})
        pickable = [s for s in sees.get("suggestions", []) if not s["missing"]]
        if pickable:
            return Reply(answer={"action": "pick_suggestion", "label": pickable[0]["label"]})
        return Reply(answer={"action": "utter", "text": "Could you tell me a little more about what you need?"})

    @staticmethod
    def _form(view: TurnView) -> dict[str, Any]:
        """Each form field whose choice the user named (the longest one found), as the form posts it."""
        said = " ".join(h["text"] or "" for h in view.history if h["role"] == "user").lower()
        form: dict[str, Any] = {}
        for field in view.sees.get("form", []):
            named = [c for c in field.get("choices", []) if re.search(rf"\b{re.escape(c.lower())}\b", said)]
            if named:
                form[field["name"]] = max(named, key=len)
        return form


def asked_already(entry: dict[str, Any], form: dict[str, Any]) -> bool:
    """Whether a logged query (``star.dialog._kb_log``'s entry: its STAR constraints, ``{field: condition}``)
    asked the fields of ``form`` for the same values."""
    logged = {name: str(condition) for constraint in entry.get("constraints", []) for name, condition in
              constraint.items()}
    return set(logged) == set(form) and all(str(value) in logged[name] for name, value in form.items())
