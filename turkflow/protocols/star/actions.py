"""What STAR's workers post inside a turn, one declaration per action (``turkflow.protocols.actions``): the
body ``dialog.take_action`` reads, documented, with its JSON Schema."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import Field

from turkflow.protocols.actions import Action, Value, Whole

# STAR's logged constraints: a list of {field: condition} (one entry each), or one object of them; a condition
# is STAR's expression text ('"Novel"', 'api.is_at_most(900)').
Constraints = Union[list[dict[str, str]], dict[str, str]]
# The knowledge-base form's value of a field: a value, the values chosen, or conditions {"op", "value"}
# (``dialog.form_constraints`` reads them, naming the field of what does not fit the API).
FormValue = Union[Value, list[Union[Value, dict[str, Any]]], dict[str, Any]]


class Utter(Action):
    """Say something: the user's message, or the wizard's reply in their own words."""

    action: Literal["utter"]
    text: str = Field(description="the message, as typed")


class Complete(Action):
    """The user ends the dialog (after their last message)."""

    action: Literal["complete"]


class SelectTask(Action):
    """Open one of the dialog's tasks (its flow chart and knowledge-base form)."""

    action: Literal["select_task"]
    task: str = Field(description="the task's name, one of the dialog's")


class Query(Action):
    """Ask the knowledge base: an API of the dialog's tasks, with STAR's constraints or the form's values."""

    action: Literal["query"]
    api: str = Field(description="the API, one of the dialog's tasks'")
    constraints: Optional[Constraints] = Field(None, description="STAR's constraints: [{field: condition}]")
    form: Optional[dict[str, FormValue]] = Field(
        None, description="the form's values by field; `<field>.op` names a condition, `<field>.to` ends a range")


class SelectItem(Action):
    """Select an item among a query's matches as the primary item (the one replies describe) or the
    secondary one (to compare)."""

    action: Literal["select_primary", "select_secondary"]
    query: Whole = Field(description="the query's event id")
    position: Whole = Field(0, description="the match's position among the query's matches, from 0")


class RequestSuggestions(Action):
    """Rank the task's replies again for a draft."""

    action: Literal["request_suggestions"]
    text: Optional[str] = Field(None, description="the draft reply")


class PickSuggestion(Action):
    """Reply with one of the task's replies, filled with the selected item."""

    action: Literal["pick_suggestion"]
    label: str = Field(description="the reply's label")
    options: Optional[list[str]] = Field(None, description="the reply labels the page offered, best first")
    text: Optional[str] = Field(None, description="the reply's text as shown; none: filled here")


ROLES: dict[str, dict[str, type[Action]]] = {
    "user": {"utter": Utter, "complete": Complete},
    "wizard": {"select_task": SelectTask, "query": Query, "select_primary": SelectItem,
               "select_secondary": SelectItem, "request_suggestions": RequestSuggestions,
               "pick_suggestion": PickSuggestion, "utter": Utter},
}
