"""The copy of a turn's answers our page leaves at MTurk, and reading it back: if our record of a
submission were ever lost, the reconciler stores the turn from MTurk's."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from typing import Any

ANSWERS_FIELD = "turkflow_answers"  # the externalSubmit field that keeps a copy of the answers at MTurk


def form_answers(answers: dict[str, Any]) -> dict[str, Any]:
    """Stored answers back in the form's own terms (yes/no rather than booleans), as the turn page posts
    them: the copy kept at MTurk must pass the protocol's validation again if it is ever needed."""
    return {name: ("yes" if value is True else "no" if value is False else value) for name, value in answers.items()}


def parse_answers(answer_xml: str) -> dict[str, Any]:
    """The answers our turn page copied into its externalSubmit form, from MTurk's QuestionFormAnswers."""
    try:
        root = ElementTree.fromstring(answer_xml or "")
    except ElementTree.ParseError as exc:
        raise ValueError(f"MTurk's answer is not XML: {exc}") from None
    for answer in root.iter():
        if _local(answer.tag) != "Answer":
            continue
        fields = {_local(child.tag): (child.text or "") for child in answer}
        if fields.get("QuestionIdentifier") == ANSWERS_FIELD:
            try:
                answers = json.loads(fields.get("FreeText", ""))
            except json.JSONDecodeError:
                raise ValueError(f"MTurk's copy of the answers ({ANSWERS_FIELD}) is not JSON") from None
            if not isinstance(answers, dict):
                raise ValueError(f"MTurk's copy of the answers ({ANSWERS_FIELD}) is not an object")
            return answers
    raise ValueError(f"MTurk's answer has no {ANSWERS_FIELD} field")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
