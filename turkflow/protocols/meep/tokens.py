"""The user's message as the agent's page shows it: words to click, each with its place in the text.

A click on a word is logged as (message, token index); executing the log years later must find the same
word at the same index, so the tokenizer is ours, small and frozen (``TOKENIZER`` names its version, and a
log records it), rather than spaCy's, whose rules move between releases and whose import only the review
workers pay for. Every token knows its character span, so the words clicked can be put back as the user
wrote them ("5th St." rather than "5th St .").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

TOKENIZER = "turkflow-words-1"

# a number with its decimal or time separators (3.5, 10:30), a word with its apostrophes (Joe's, isn't),
# or any single other visible character
_TOKEN = re.compile(r"\d+(?:[.,:]\d+)+|\w+(?:['’]\w+)*|[^\w\s]")


@dataclass(frozen=True)
class Token:
    index: int
    text: str
    start: int
    end: int


def tokenize(text: str) -> tuple[Token, ...]:
    """Every visible character of ``text`` lies in exactly one token; only whitespace lies between."""
    return tuple(Token(n, m.group(), m.start(), m.end()) for n, m in enumerate(_TOKEN.finditer(text)))


def span_text(text: str, tokens: Sequence[Token]) -> str:
    """The words clicked, as the user wrote them when they are adjacent, else joined by spaces (MEEP's
    ``u1_5 + " " + u1_7``)."""
    if not tokens:
        return ""
    indexes = [t.index for t in tokens]
    if indexes == list(range(indexes[0], indexes[0] + len(indexes))):
        return text[tokens[0].start:tokens[-1].end]
    return " ".join(t.text for t in tokens)


def words(text: str) -> list[str]:
    """The lowercased words of ``text`` (punctuation left out), for matching a query against a table."""
    return [t.text.lower() for t in tokenize(text) if t.text[0].isalnum()]
