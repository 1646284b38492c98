"""The one interface every agent implements: it gets what its role sees of the turn and returns the protocol's
answer. The pipeline reaches an agent only through ``registry.player``; nothing here imports a kind."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Protocol


@dataclass(frozen=True)
class TurnView:
    """What the role's page shows a person, as data: the instructions, the dialog so far, what the role sees
    besides (the task document, STAR's chart and knowledge-base results, Frames' searches, MEEP's API
    results), and ``schema``, the JSON Schema its answer must match. ``steps``: what the agent did earlier
    in this turn (a STAR wizard's query before its reply), each with what it gave."""

    protocol: str
    role: str
    turn_index: int
    conversation_id: int
    instructions: str
    history: list[dict[str, Any]]
    sees: dict[str, Any]
    schema: dict[str, Any]
    closing: tuple[str, ...] = ()  # the actions that end the turn (the logged protocols'; none: one form)
    steps: list[dict[str, Any]] = field(default_factory=list)
    refused: Optional[str] = None  # why the protocol refused this agent's last answer to this turn

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Reply:
    """An agent's answer: the form's answers (Wizard of Tasks), or one action with its fields (``action``
    names it) for the protocols whose turn is a log of actions; tokens where the agent counts them, and the
    structured-output mode the answer came in."""

    answer: dict[str, Any]
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    structured: Optional[str] = None


class Player(Protocol):
    """An agent ready to answer turns. Raise ``turkflow.errors.AgentError`` for a call that gave nothing usable;
    what the protocol refuses of an answer is judged after (as a person's answer is)."""

    def answer(self, view: TurnView) -> Reply: ...
