"""What an agent's role sees of its turn, per protocol, and the answer's JSON Schema: built from the same
functions the role's page is (``lifecycle.turn_view``, the logged protocols' ``wizard_view``/``user_view``), so
an agent sees what a person in its place would, and nothing a person would not.

The schema is built here, in one place, from the protocol's own declarations: the role's questions (Wizard of
Tasks' form), the role's typed action bodies (``turkflow.protocols.actions``) for the logged protocols.
"""

from __future__ import annotations

from typing import Any, Optional

from sqlmodel import Session

from turkflow.agents.interface import TurnView
from turkflow.hits import lifecycle
from turkflow.models import Turn
from turkflow.protocols import actions, registry
from turkflow.protocols.questions import Protocol, Question, RoleForm, TurnContext

# The action that says a logged protocol's turn's text and ends it (the page's submit), by protocol and role;
# any other action of the role is taken inside the turn first (a STAR wizard's query, a Frames booking).
CLOSING: dict[tuple[str, str], tuple[str, ...]] = {
    ("star", "user"): ("utter",), ("star", "wizard"): ("pick_suggestion", "utter"),
    ("frames", "user"): ("utter",), ("frames", "wizard"): ("utter",),
    ("meep", "user"): ("utter", "judge"), ("meep", "wizard"): ("send",),
}
# What a role's page shows beside the chat, by the dialog module's function (``wizard_view``, ``agent_view``)
PAGE_VIEWS = {"user": ("user_view",), "wizard": ("wizard_view", "agent_view")}
def closing(protocol: str, role: str) -> tuple[str, ...]:
    return CLOSING.get((protocol, role), ())


def instructions(form: RoleForm) -> str:
    return "\n".join([form.title, *(f"- {line}" for line in form.guidelines)])


def question_schema(question: Question, ctx: TurnContext) -> dict[str, Any]:
    """One question of a form as JSON Schema, its choices as the page offers them."""
    described = {"description": question.label + (f" ({question.help})" if question.help else "")}
    if question.kind == "yes_no":
        return {"type": "string", "enum": ["yes", "no"], **described}
    if question.kind == "choice":
        return {"type": "string", "enum": [key for key, _ in question.options], **described}
    if question.kind == "multi_items":
        allowed = list(ctx.shareable if question.items == "shareable" else ctx.shared_so_far)
        items: dict[str, Any] = {"type": "string", "enum": allowed} if allowed else {"type": "string"}
        return {"type": "array", "items": items, **described}
    if question.kind == "urls":
        return {"type": "array", "items": {"type": "string"}, **described}
    return {"type": "string", **described}


def form_schema(protocol: Protocol, ctx: TurnContext) -> dict[str, Any]:
    """The answers of a turn form (Wizard of Tasks) as one JSON object; lists may be empty."""
    asked = protocol.form(ctx.role).questions_for(ctx)
    return {"type": "object", "properties": {q.name: question_schema(q, ctx) for q in asked},
            "required": [q.name for q in asked if q.kind not in ("multi_items", "urls")],
            "additionalProperties": False}


def action_schema(protocol: str, form: RoleForm) -> dict[str, Any]:
    """One action of a logged protocol's role: the protocol's own declarations (``protocols.actions.schema``),
    the message that says the turn's text taking ``complete`` where the role ends the dialog with it, as the
    role's page submits both at once."""
    schema = actions.schema(protocol, form.role)
    if "complete" in form.actions:
        for variant in [schema, *schema.get("$defs", {}).values()]:
            if variant.get("properties", {}).get("action", {}).get("const") in closing(protocol, form.role):
                variant["properties"]["complete"] = {"type": "boolean",
                                                     "description": "end the dialog with this message"}
    return schema


def turn_view(session: Session, turn: Turn, worker_id: int, *, steps: Optional[list[dict[str, Any]]] = None,
              refused: Optional[str] = None) -> TurnView:
    """The role's view of ``turn`` as ``worker_id`` (the agent's worker) would see its page now."""
    seen = lifecycle.turn_view(session, turn)
    protocol, role = seen.protocol, turn.role
    form = protocol.form(role)
    history = [{"role": h["role"], "text": h["text"], **({"shared": [i["text"] for i in h["shared"]]}
                                                         if h["shared"] else {})} for h in seen.history]
    sees: dict[str, Any] = {"task": seen.task.title}
    if registry.logged(protocol.name) is None:
        if form.sees_document:
            sees["document"] = [{"id": item["id"], "text": item["text"]} for item in seen.items]
        if seen.context.shared_so_far:
            sees["shared_so_far"] = list(seen.context.shared_so_far)
        schema = form_schema(protocol, seen.context)
    else:
        sees.update(page_view(session, protocol.name, turn, worker_id))
        schema = action_schema(protocol.name, form)
    return TurnView(protocol=protocol.name, role=role, turn_index=turn.index, conversation_id=turn.conversation_id,
                    instructions=instructions(form), history=history, sees=sees, schema=schema,
                    closing=closing(protocol.name, role), steps=list(steps or []), refused=refused)


def page_view(session: Session, protocol: str, turn: Turn, worker_id: int) -> dict[str, Any]:
    """A logged protocol's role page data (``wizard_view``, ``agent_view``, ``user_view``)."""
    parts = registry.parts(protocol)
    for name in PAGE_VIEWS.get(turn.role, ()):
        view = getattr(parts, name, None)
        if view is not None:
            return view(session, turn, worker_id=worker_id) if name != "user_view" else view(session, turn)
    return {}
