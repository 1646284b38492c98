"""A canned turn to try an agent on (``turkflow agents test``): a Wizard of Tasks teacher answering a student's
first question about a short recipe written by the turkflow authors, and the check a real turn applies."""

from __future__ import annotations

from typing import Any, Callable

from turkflow.agents.interface import TurnView
from turkflow.agents.views import form_schema, instructions
from turkflow.models import Task
from turkflow.protocols.questions import WIZARD_OF_TASKS, TurnContext, document_items, document_text, validate_answers

RECIPE = Task(key="canned-tea", title="A cup of mint tea", domain="cooking",
              items=["a handful of fresh mint", "boiling water", "honey (optional)"],
              steps=[{"text": "Rinse the mint leaves under cold water."},
                     {"text": "Put the leaves in a cup and pour boiling water over them."},
                     {"text": "Let it steep for five minutes, then sweeten with honey if you like."}])


def teacher_turn() -> tuple[TurnView, Callable[[dict[str, Any]], dict[str, Any]]]:
    items = document_items(RECIPE)
    ctx = TurnContext(index=1, role="teacher", shareable=tuple(i["id"] for i in items),
                      document_text=document_text(RECIPE))
    view = TurnView(protocol=WIZARD_OF_TASKS.name, role="teacher", turn_index=1, conversation_id=0,
                    instructions=instructions(WIZARD_OF_TASKS.form("teacher")),
                    history=[{"role": "student", "text": "Hi! What do I need to make mint tea?"}],
                    sees={"task": RECIPE.title, "document": [{"id": i["id"], "text": i["text"]} for i in items]},
                    schema=form_schema(WIZARD_OF_TASKS, ctx))
    return view, lambda answer: validate_answers(WIZARD_OF_TASKS, ctx, answer)
