"""How turkflow words what it tells people, on its pages and in its commands alike."""

from __future__ import annotations

from typing import Optional


def counted(n: int, thing: str, things: Optional[str] = None) -> str:
    """``1 open HIT``, ``2 open HITs``: a number with its noun in the number's form."""
    return f"{n} {thing if n == 1 else things or thing + 's'}"
