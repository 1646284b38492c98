"""What a turn page saw of how the response was written, as the worker's browser reports it.

``turkflow/web/static/worker.js`` fills a hidden ``signals`` field on submit: time on the page, time to
the first keystroke in the response box, keystrokes, paste and drop attempts, and how often the window
lost focus. It is evidence for a reviewer (``quality.checks.typing_flags`` reads it), never a reason to
refuse a turn: a worker without JavaScript sends none, and anyone who reads worker.js can forge one.
"""

from __future__ import annotations

import json
import math
from typing import Any

FIELD = "signals"
DAY_MS = 86_400_000
LIMITS = {  # milliseconds since the page opened, or counts of events
    "page_ms": DAY_MS, "first_key_ms": DAY_MS, "keys": 100_000, "pastes": 10_000, "drops": 10_000,
    "blurs": 10_000,
}
LONGEST = 500  # characters of a report; a real one is about 100
ABSENT = {"unknown": "absent"}
MALFORMED = {"unknown": "malformed"}


def writing_signals(raw: dict[str, Any]) -> dict[str, Any]:
    """The report in submitted answers (a form field or a JSON value), checked and bounded; never raises.

    Returns the six numbers (``first_key_ms`` is null when no key was pressed), or ``{"unknown":
    "absent"}`` / ``{"unknown": "malformed"}``, which is what gets stored.
    """
    value = raw.get(FIELD)
    if isinstance(value, (list, tuple)) and len(value) == 1:  # form fields arrive as lists
        value = value[0]
    if value is None or (isinstance(value, (str, list, tuple)) and not value):
        return dict(ABSENT)
    if isinstance(value, str):
        if len(value) > LONGEST:
            return dict(MALFORMED)
        try:
            value = json.loads(value)
        except ValueError:
            return dict(MALFORMED)
    if not isinstance(value, dict):
        return dict(MALFORMED)
    clean: dict[str, Any] = {}
    for name, limit in LIMITS.items():
        number = value.get(name)
        if name == "first_key_ms" and number is None:
            clean[name] = None
        elif (isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number)
              and 0 <= number <= limit):
            clean[name] = int(number)
        else:
            return dict(MALFORMED)
    if clean["first_key_ms"] is not None and clean["first_key_ms"] > clean["page_ms"]:
        return dict(MALFORMED)
    return clean


def recorded(signals: dict[str, Any]) -> bool:
    """Whether a stored report holds numbers (turns written before reports began hold ``{}``)."""
    return bool(signals) and "unknown" not in signals
