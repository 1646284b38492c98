"""What MEEP's workers post inside a turn, one declaration per click (``turkflow.protocols.actions``): the body
``dialog.record_action`` reads (the page's slots made into fillers by ``dialog.form_click`` first),
documented, with its JSON Schema."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import Field

from turkflow.protocols.actions import Action, Flag, Whole

# A clicked value, in MEEP's terms (``clicks`` reads it): words of a user message {"message": n, "tokens":
# [i, ...]}, or a field of a result {"result": "v1", "field": "name"}.
Filler = dict[str, Union[str, Whole, list[Whole]]]
# A word of the "+" composer: {"message": n, "token": i}, {"template": "t3", "token": i} or {"blank": true}.
Piece = dict[str, Union[str, Whole, bool]]


class Utter(Action):
    """The user's message."""

    action: Literal["utter"]
    text: str = Field(description="the message, as typed")


class Judge(Action):
    """The user approves or disapproves the destination the agent drives to."""

    action: Literal["judge"]
    approved: Flag = Field(description="yes: this is where I want to go")


class Complete(Action):
    """The user ends the dialog (after their last message or verdict)."""

    action: Literal["complete"]


class CallApi(Action):
    """Call one of the APIs, each argument clicked."""

    action: Literal["call_api"]
    api: str = Field(description="the API's name")
    arguments: dict[str, Filler] = Field(description="each argument's clicked value, by name")


class AddTemplate(Action):
    """Make a new reply template from clicked words and blanks; every agent of the batch sees it."""

    action: Literal["add_template"]
    words: list[Piece] = Field(description="the template's words and blanks, in order")


class PickTemplate(Action):
    """Add a reply template to the message, each blank clicked."""

    action: Literal["pick_template"]
    template: str = Field(description="the template's id (t1, ...)")
    fillers: list[Filler] = Field(description="one clicked value per blank, in order")


class Send(Action):
    """Send the message the picked templates make."""

    action: Literal["send"]


ROLES: dict[str, dict[str, type[Action]]] = {
    "user": {"utter": Utter, "judge": Judge, "complete": Complete},
    "wizard": {"call_api": CallApi, "add_template": AddTemplate, "pick_template": PickTemplate, "send": Send},
}
