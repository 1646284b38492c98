"""Utterance templates: the only things a MEEP agent says, each ``{}`` a blank the agent fills by a click.

MEEP's agents grew the list themselves ("+" adds a template every agent then sees), so a template is text
a worker wrote: it is filled by plain substitution, never ``str.format`` (``{0.__class__}`` would reach
into Python), and the only placeholder is ``{}``; ``{{`` and ``}}`` stand for braces.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols.files import inside, read_json, shown

MAX_TEMPLATE = 300


def parts(text: str, field: str = "template") -> list[str]:
    """The template's literal pieces: ``len(parts) - 1`` blanks sit between them. Anything in braces
    but ``{}``, or a lone brace, is an ``InvalidInput`` naming ``field``."""
    pieces, current, n = [], [], 0
    while n < len(text):
        pair = text[n:n + 2]
        if pair in ("{{", "}}"):
            current.append(pair[0])
            n += 2
        elif pair == "{}":
            pieces.append("".join(current))
            current = []
            n += 2
        elif text[n] in "{}":
            raise InvalidInput("a blank is written {} (and a brace {{ or }})", field)
        else:
            current.append(text[n])
            n += 1
    pieces.append("".join(current))
    return pieces


def blanks(text: str) -> int:
    return len(parts(text)) - 1


def show(value: Any) -> str:
    """How a clicked value reads in an utterance: 10 rather than 10.0, yes/no for a truth value."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value)


def render(text: str, values: Sequence[Any], field: str = "fillers") -> str:
    """The template with its blanks filled in order; the wrong number of values names ``field``."""
    pieces = parts(text)
    if len(values) != len(pieces) - 1:
        raise InvalidInput(f"this template has {len(pieces) - 1} blank(s), got {len(values)} filler(s)",
                           field)
    out = [pieces[0]]
    for value, piece in zip(values, pieces[1:]):
        out += [show(value), piece]
    return "".join(out)


def check_text(text: Any) -> str:
    """A new template as an agent typed it: one line of text with well-formed blanks."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("write the template's text", "template")
    text = " ".join(text.split())
    if len(text) > MAX_TEMPLATE:
        raise InvalidInput(f"write at most {MAX_TEMPLATE} characters", "template")
    parts(text)
    return text


def add_template(templates: Mapping[str, str], text: Any) -> tuple[str, dict[str, str]]:
    """MEEP's "+": the template's id and the templates with it. The same text twice keeps one id, so two
    agents adding the same sentence do not split the data between two templates."""
    text = check_text(text)
    for template_id, known in templates.items():
        if known == text:
            return template_id, dict(templates)
    numbers = [int(t[1:]) for t in templates if t.startswith("t") and t[1:].isdigit()]
    template_id = f"t{max(numbers, default=0) + 1}"
    return template_id, {**templates, template_id: text}


def load_templates(path: Path) -> dict[str, str]:
    """A JSON object of template id -> text (a file in its folder, read as every requester's file is)."""
    document = read_json(inside(path.parent, path.name, path.name, path.parent))
    if not isinstance(document, dict):
        raise InvalidDocument(f"{path}: expected an object of template id -> text")
    for template_id, text in document.items():
        try:
            if check_text(text) != text:
                raise InvalidInput("write it on one line without doubled spaces", "template")
        except InvalidInput as exc:
            raise InvalidDocument(f"{path}: template {shown(template_id)}: {exc.reason}") from None
    return dict(document)
