"""What Frames' workers post inside a turn, one declaration per action (``turkflow.protocols.actions``): the
body ``dialog.take_action`` reads, documented, with its JSON Schema."""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import Field

from turkflow.protocols.actions import Action, Flag, Value, Whole


class Utter(Action):
    """Say something: the user's message, or the wizard's reply."""

    action: Literal["utter"]
    text: str = Field(description="the message, as typed")


class Complete(Action):
    """The user ends the dialog (after their last message)."""

    action: Literal["complete"]


class Search(Action):
    """Search the database: every condition must hold. ``constraints`` as JSON, or the page's ``form``."""

    action: Literal["search"]
    constraints: Optional[dict[str, Union[Value, dict[str, Value]]]] = Field(
        None, description="{field: value} for 'is', {field: {at_least, at_most, is: value}} for a range")
    form: Optional[dict[str, Value]] = Field(
        None, description="the search form's fields: `field` for 'is', `field.at_least` and `field.at_most`")
    sort: Optional[str] = Field(None, description="the field results are sorted by (default: price)")
    descending: Flag = Field(False, description="sort from the largest")
    flexible: Whole = Field(0, description="days every date condition is widened by each way (the domain's "
                                           "flexible_days at most)")


class Book(Action):
    """Book a package one of the dialog's searches showed; the turn then ends the dialog."""

    action: Literal["book"]
    id: Union[str, int] = Field(description="the package's id")


ROLES: dict[str, dict[str, type[Action]]] = {
    "user": {"utter": Utter, "complete": Complete},
    "wizard": {"search": Search, "book": Book, "utter": Utter},
}
