"""What a worker posts inside a turn (an action: a query, a search, a click, a label) and what a requester posts
to decide a turn, declared once each: a pydantic model per action, in each protocol's ``actions`` module.

The declaration is what reads the body (``read``, ``parse``): JSON, or the page's form, whose fields arrive as
text (``Whole`` and ``Flag`` take a form's digits and yes/no as JSON takes numbers and booleans). A value of the
wrong type, a field the action does not have, a number that is not finite or out of range is a 400 naming the
field (``form.Genre``, ``fillers[1]``) before any protocol code runs, by construction rather than by a check
somebody remembered; what is left to the protocol is what the dialog says (is this one of the dialog's
APIs, was this item shown). The same declaration documents the action (its docstring and fields' descriptions)
and gives its JSON Schema (``schema``): a model agent asks a model for a role's action as structured output and
checks the answer exactly as a person's post is checked.
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any, Mapping, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError

from turkflow.errors import InvalidInput

MAX_ID = 2**31 - 1  # ids are INTEGER columns: 32 bits on PostgreSQL
MAX_NUMBER = 10**15  # a number a form or a search may hold (a price, a count); beyond it no column has values


class Action(BaseModel):
    """One action's body. Strict: text is text, a list a list, a number a finite number; nothing else is
    turned into what was expected (a form's digits and yes/no aside, see ``Whole`` and ``Flag``)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, hide_input_in_errors=True)


def _digits(value: Any) -> Any:
    """A form sends a number as its digits."""
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() and len(value.strip()) <= 12:
        return int(value.strip())
    return value


def _yes_or_no(value: Any) -> Any:
    """A form's checkbox or choice says yes (``on``, ``yes``, ``true``, ``1``) or no (``off``, ``no``,
    ``false``, ``0``, nothing)."""
    if isinstance(value, str) and value.strip().lower() in YES_WORDS | NO_WORDS:
        return value.strip().lower() in YES_WORDS
    return value


YES_WORDS = frozenset({"on", "yes", "true", "1"})
NO_WORDS = frozenset({"off", "no", "false", "0", ""})

# A whole number from 0 (an id, a position, a count of days): JSON's number or a form's digits, never a bool.
Whole = Annotated[int, BeforeValidator(_digits), Field(ge=0, le=MAX_ID)]
# Yes or no: JSON's true or false, or a form's words for them.
Flag = Annotated[bool, BeforeValidator(_yes_or_no)]
# A value typed into a search or a form field: text, a number (finite, not huge) or yes/no.
Number = Annotated[Union[int, float], Field(ge=-MAX_NUMBER, le=MAX_NUMBER)]
Value = Union[str, bool, Number, None]


# ---- reading a body ------------------------------------------------------------------------------------------

MESSAGES = {
    "string_type": "expected text", "int_type": "expected a whole number", "int_parsing": "expected a whole number",
    "float_type": "expected a number", "bool_type": "expected yes or no", "bool_parsing": "expected yes or no",
    "list_type": "expected a list", "dict_type": "expected an object", "model_type": "expected an object",
    "finite_number": "expected a finite number", "extra_forbidden": "not a field of this action",
    "missing": "this field is required", "literal_error": "not this action's name",
    "union_tag_invalid": "not one of the actions", "int_from_float": "expected a whole number",
}


def parse(declared: type[Action], body: Mapping[str, Any]) -> Action:
    """``body`` read by its declaration; the first thing wrong is an ``InvalidInput`` naming its field."""
    try:
        return declared.model_validate(dict(body))
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        raise InvalidInput(_message(first), _field(first["loc"], body) or "body") from None
    except RecursionError:  # a body nested deeper than the validator goes
        raise InvalidInput("this body is nested too deeply", "body") from None


def read(declared: Mapping[str, type[Action]], body: Mapping[str, Any], who: str) -> Action:
    """A body that names its ``action``, read by that action's declaration (``declared``: a role's actions by
    name); an action ``who`` (``a wizard``) cannot take is refused naming ``action``."""
    name = body.get("action")
    if not isinstance(name, str) or name not in declared:
        raise InvalidInput(f"{who} can: {', '.join(declared)}", "action")
    return parse(declared[name], body)


def typed(roles: Mapping[str, Mapping[str, type[Action]]], role: str, action: Any, fields: Any) -> Any:
    """An action's fields (``action`` aside) as its declaration reads them, the values as declared (a form's
    digits a number); an action the role does not take passes as it came, for the protocol to refuse by name
    in its own words."""
    declared = roles[role].get(action) if isinstance(action, str) else None
    if declared is None or not isinstance(fields, Mapping):
        return dict(fields) if isinstance(fields, Mapping) else fields
    return parse(declared, {**fields, "action": action}).model_dump(exclude_unset=True, exclude={"action"})


def _message(error: Mapping[str, Any]) -> str:
    kind, context = error["type"], error.get("ctx") or {}
    if kind in ("greater_than_equal", "less_than_equal"):
        return f"expected a number from {context.get('ge', '')} to {context.get('le', '')}".replace("from  to", "")
    if kind == "too_long":
        return f"send at most {context.get('max_length')}"
    return MESSAGES.get(kind, str(error["msg"]))


def _field(loc: tuple[Any, ...], body: Any) -> str:
    """The field as the protocols name it (``form.Genre``, ``fillers[1]``), walked through the body itself:
    what pydantic adds to the location (a union member's type) is no field of the body and is left out."""
    path, value = "", body
    for part in loc:
        if isinstance(part, int) and isinstance(value, list) and 0 <= part < len(value):
            path, value = f"{path}[{part}]", value[part]
        elif isinstance(part, str) and isinstance(value, Mapping) and part in value:
            path, value = (f"{path}.{part}" if path else part), value[part]
        elif isinstance(part, str) and isinstance(value, Mapping) and not path and value is body:
            path = part  # a field the body lacks (a required one): named all the same
            break
    return path[:60]


# ---- what a program asks a model for ---------------------------------------------------------------------------


def declared(protocol: str) -> dict[str, dict[str, type[Action]]]:
    """Each role's actions of a protocol by name, from its folder's ``actions`` module (``ROLES``)."""
    return importlib.import_module(f"turkflow.protocols.{protocol}.actions").ROLES


def schema(protocol: str, role: str) -> dict[str, Any]:
    """The JSON Schema of whatever a ``role`` of ``protocol`` may post as an action: one object per action,
    told apart by its ``action`` field."""
    actions = tuple(declared(protocol)[role].values())
    union = actions[0] if len(actions) == 1 else Annotated[Union[actions], Field(discriminator="action")]
    return TypeAdapter(union).json_schema()
