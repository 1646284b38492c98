"""What an annotator posts inside a turn, one declaration per click (``turkflow.protocols.actions``), and the
requester's decision on a turn whose annotators disagree: the bodies ``dialog.record_action`` and the
dashboard read, documented, with their JSON Schema."""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import Field

from turkflow.protocols.actions import Action, Flag, Whole


class Label(Action):
    """Add a dialog act to the turn, perhaps with a slot and its value: words of the turn or a listed value."""

    action: Literal["label"]
    act: str = Field(description="the act, one of the scheme's for the turn's speaker")
    slot: Optional[str] = Field(None, description="the slot type")
    words: Optional[Union[Whole, list[Whole]]] = Field(None, description="the clicked words' numbers, one run")
    value: Optional[str] = Field(None, description="a listed value of the slot type")


class Frame(Action):
    """Say which frame the turn creates, refers to, reads from or writes to."""

    action: Literal["frame"]
    relation: str = Field(description="creates, refers, reads or writes")
    frame: Whole = Field(description="the frame's number, from 1")


class Clear(Action):
    """Take back every label clicked so far in this turn."""

    action: Literal["clear"]


class Decision(Action):
    """The requester's final labels of a turn: one of its annotations, and whether it is gold from now on."""

    chosen: Whole = Field(description="the chosen annotation's turn id")
    gold: Flag = Field(False, description="judge later annotations of this turn against it")


ROLES: dict[str, dict[str, type[Action]]] = {"annotator": {"label": Label, "frame": Frame, "clear": Clear}}
