"""An annotation scheme: the dialogue acts, slot types and (for Frames) frame relations annotators label a turn
with. ``frames`` is Frames' own (``frames.yaml``, the paper's Tables 9 and 10); a requester may write another
in the same shape and give its path. Launch snapshots the scheme into each unit's task, so a file edited
later never changes what earlier labels meant.

A scheme file (YAML or JSON)::

    name: my_scheme
    frames: false            # optional: annotators also say which frame a turn creates, refers to, reads, writes
    database_slots: false    # optional: every column of the annotated Frames batch's database is a slot type
    acts: [{name: inform, speakers: [user, wizard], description: ...}, ...]
    slots: [{name: intent, description: ..., values: [book]}, ...]   # values: a fixed choice; else words

A bad file is one ``InvalidDocument`` naming the file and the field (``acts[2].name``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from turkflow.errors import InvalidDocument
from turkflow.protocols.files import read_data, shown

BUILT_IN = {"frames": Path(__file__).with_name("frames.yaml")}
# What a turn does to a frame, and the Frames corpus' slot for it (Table 10): a new frame's ``id``, ``ref``,
# ``read`` and ``write``.
RELATIONS = {"creates": "id", "refers": "ref", "reads": "read", "writes": "write"}
MAX_FRAMES = 20  # frame numbers an annotator can pick from
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,59}$")


@dataclass(frozen=True)
class Act:
    name: str
    speakers: tuple[str, ...] = ()  # empty: any speaker
    description: str = ""


@dataclass(frozen=True)
class SlotType:
    name: str
    description: str = ""
    values: tuple[str, ...] = ()  # a fixed choice (Frames' intent and action: book); empty: picked words
    database: bool = False  # a column of the annotated batch's database: its values may be picked too


@dataclass(frozen=True)
class Scheme:
    name: str
    acts: dict[str, Act]
    slots: dict[str, SlotType]
    frames: bool = False
    database_slots: bool = False
    columns: tuple[str, ...] = field(default=())  # the database columns added as slot types at launch

    def acts_for(self, speaker: str) -> list[Act]:
        """The acts a turn by ``speaker`` (user, wizard, student, ...) may carry."""
        return [a for a in self.acts.values() if not a.speakers or speaker in a.speakers]

    def with_columns(self, columns: Iterable[str]) -> "Scheme":
        """The scheme with a slot type per database column (``database_slots``); a column named like one of
        the scheme's own slot types keeps the scheme's."""
        columns = tuple(c for c in columns if c not in self.slots)
        added = {c: SlotType(c, f"the database's {c}", database=True) for c in columns}
        return Scheme(self.name, self.acts, {**self.slots, **added}, self.frames, self.database_slots, columns)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "frames": self.frames, "database_slots": self.database_slots,
                "columns": list(self.columns),
                "acts": [{"name": a.name, "speakers": list(a.speakers), "description": a.description}
                         for a in self.acts.values()],
                "slots": [{"name": s.name, "description": s.description, "values": list(s.values)}
                          for s in self.slots.values() if not s.database]}


def scheme_from_dict(data: Mapping[str, Any], where: str = "scheme") -> Scheme:
    """A scheme from its file's contents (or a task's snapshot); ``where`` names the file in refusals."""
    if not isinstance(data, Mapping):
        raise _bad(where, "", "expected a mapping with name, acts and slots")
    unknown = sorted(set(data) - {"name", "frames", "database_slots", "columns", "acts", "slots"})
    if unknown:
        raise _bad(where, unknown[0], "not a field of a scheme")
    name = _name(data.get("name"), where, "name")
    acts = _entries(data.get("acts"), where, "acts", ("name", "speakers", "description"))
    if not acts:
        raise _bad(where, "acts", "list at least one dialogue act")
    slots = _entries(data.get("slots", []), where, "slots", ("name", "description", "values"))
    flags = {}
    for flag in ("frames", "database_slots"):
        value = data.get(flag, False)
        if not isinstance(value, bool):
            raise _bad(where, flag, f"expected true or false, got {shown(value)}")
        flags[flag] = value
    scheme = Scheme(
        name,
        {e["name"]: Act(e["name"], _words(e, "speakers", where), _text(e, where)) for e in acts.values()},
        {e["name"]: SlotType(e["name"], _text(e, where), _words(e, "values", where)) for e in slots.values()},
        **flags)
    return scheme.with_columns(_words(data, "columns", where)) if data.get("columns") else scheme


def load_scheme(reference: str) -> Scheme:
    """The built-in scheme of that name (``frames``) or the scheme in the file at that path."""
    path = BUILT_IN.get(reference) or Path(reference)
    return scheme_from_dict(read_data(path), str(path))


def _bad(where: str, field_name: str, reason: str) -> InvalidDocument:
    error = InvalidDocument(f"{where}: field {field_name!r}: {reason}" if field_name else f"{where}: {reason}")
    error.field = field_name or None
    return error


def _name(value: Any, where: str, field_name: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise _bad(where, field_name, f"expected a lower-case name (letters, digits, _), got {shown(value)}")
    return value


def _entries(value: Any, where: str, field_name: str, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    if not isinstance(value, list):
        raise _bad(where, field_name, f"expected a list, got {shown(value)}")
    entries: dict[str, dict[str, Any]] = {}
    for n, entry in enumerate(value):
        at = f"{field_name}[{n}]"
        if not isinstance(entry, Mapping):
            raise _bad(where, at, f"expected a mapping with {', '.join(keys)}")
        unknown = sorted(set(entry) - set(keys))
        if unknown:
            raise _bad(where, f"{at}.{unknown[0]}", "not a field here")
        name = _name(entry.get("name"), where, f"{at}.name")
        if name in entries:
            raise _bad(where, f"{at}.name", f"{name!r} is listed twice")
        entries[name] = {**entry, "at": at}
    return entries


def _words(entry: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise _bad(where, f"{entry.get('at', '')}.{key}".lstrip("."), f"expected a list of names, got {shown(value)}")
    return tuple(v.strip() for v in value)


def _text(entry: Mapping[str, Any], where: str) -> str:
    value = entry.get("description", "")
    if not isinstance(value, str):
        raise _bad(where, f"{entry['at']}.description", f"expected text, got {shown(value)}")
    return value.strip()
