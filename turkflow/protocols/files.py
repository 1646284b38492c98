"""Reading a requester's files: the one way every loader (task documents, STAR folders, a Frames domain, a
MEEP folder) opens, parses and follows the files a requester gives.

A requester's file is input, not code, and it is read by a command an operator runs, so it must not be able
to hang that command, exhaust its memory or read what it should not:

- only a regular file is read (a FIFO would block forever, ``/dev/zero`` never ends): the file is opened
  with ``O_NONBLOCK`` and checked with ``fstat`` on the open descriptor, so a swap after a check cannot
  slip through;
- the size limit holds while reading (at most ``limit + 1`` bytes are read), not from a ``stat`` beforehand;
- YAML has no anchors or aliases (a few hundred bytes of nested aliases expand to gigabytes), a bounded
  depth, no duplicate keys and no infinite numbers; JSON is parsed as JSON (a ``.json`` file is not YAML),
  with the same refusals;
- a file a document names is resolved (symlinks too) and must lie inside the document's folder.

Every failure is one :class:`~turkflow.errors.InvalidDocument` naming the file, and a value shown in it is
shortened. This module imports only the standard library, PyYAML and ``turkflow.errors``, so the plain
domain packages (``frames/``, ``meep/``) may use it.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any, Iterator

import yaml

from turkflow.errors import InvalidDocument

MAX_BYTES = 20 * 1024 * 1024  # a task file, a schema, a domain file; a database passes its own limit
MAX_DEPTH = 50  # nesting of lists and mappings; a task file needs a handful
SHOWN = 60  # characters of a value an error message shows


def cut(text: str, limit: int = SHOWN) -> str:
    """``text`` cut to ``limit`` characters: enough to recognise, never a page of input."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def shown(value: Any, limit: int = SHOWN) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    return cut(repr(value), limit)


def _megabytes(limit: int) -> str:
    return f"{limit / (1024 * 1024):g} MB" if limit >= 1024 * 1024 else f"{limit} bytes"


def read_bytes(path: Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise InvalidDocument(f"{path}: no such file") from None
    except OSError as exc:
        raise InvalidDocument(f"{path}: cannot read ({exc.strerror})") from None
    except ValueError:  # a NUL byte in the name
        raise InvalidDocument(f"{shown(str(path))}: not a file name") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InvalidDocument(f"{path}: is a folder, not a file")
        if not stat.S_ISREG(mode):
            raise InvalidDocument(f"{path}: not a regular file (a device, a pipe or a socket is not read)")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1024 * 1024, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise InvalidDocument(f"{path}: larger than {_megabytes(limit)}")
        return b"".join(chunks)
    except OSError as exc:
        raise InvalidDocument(f"{path}: cannot read ({exc.strerror})") from None
    finally:
        os.close(fd)


def read_text(path: Path, limit: int = MAX_BYTES) -> str:
    """The file as UTF-8 text (a leading byte-order mark dropped, as spreadsheets write one)."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidDocument(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                              f"{exc.start})") from None


# ---- JSON -----------------------------------------------------------------------------------------------


class _Refused(ValueError):
    """A JSON value the parser read but a requester's file may not hold."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Refused(f"key {shown(key)} appears twice in one object")
        found[key] = value
    return found


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _Refused(f"{shown(text)} is not a finite number")
    return number


def _no_constant(text: str) -> Any:
    raise _Refused(f"{text} is not a number JSON allows")


def parse_json(text: str, where: str) -> Any:
    """One JSON value; ``where`` (the file, perhaps a line) starts the error."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_float=_finite,
                          parse_constant=_no_constant)
    except _Refused as exc:
        raise InvalidDocument(f"{where}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InvalidDocument(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column "
                              f"{exc.colno})") from None
    except RecursionError:
        raise InvalidDocument(f"{where}: not usable JSON (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise InvalidDocument(f"{where}: not usable JSON ({_first_line(exc)})") from None


def read_json(path: Path, limit: int = MAX_BYTES) -> Any:
    return parse_json(read_text(path, limit), str(path))


def json_lines(path: Path, limit: int = MAX_BYTES) -> Iterator[tuple[int, Any]]:
    """Each non-blank line of a JSON Lines file as (line number, value); a bad line names its number."""
    for number, line in enumerate(read_text(path, limit).splitlines(), 1):
        if line.strip():
            yield number, parse_json(line, f"{path}: line {number}")


# ---- YAML -----------------------------------------------------------------------------------------------


class _SafeLoader(yaml.SafeLoader):
    """``yaml.safe_load`` without anchors and aliases, nested at most ``MAX_DEPTH`` deep, with each key once
    per mapping and only finite numbers."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise yaml.MarkedYAMLError(problem="anchors and aliases (& and *) are not allowed",
                                       problem_mark=event.start_mark)
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            if self._depth >= MAX_DEPTH:
                raise yaml.MarkedYAMLError(problem=f"nested more than {MAX_DEPTH} deep",
                                           problem_mark=event.start_mark)
            self._depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    twice = key in seen
                except TypeError:  # an unhashable key: the constructor below names it
                    continue
                if twice:
                    raise yaml.constructor.ConstructorError(
                        problem=f"key {shown(key)} appears twice in one mapping",
                        problem_mark=key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)

    def construct_yaml_float(self, node: Any) -> float:
        number = super().construct_yaml_float(node)
        if not math.isfinite(number):
            raise yaml.constructor.ConstructorError(problem=f"{shown(node.value)} is not a finite number",
                                                    problem_mark=node.start_mark)
        return number


_SafeLoader.add_constructor("tag:yaml.org,2002:float", _SafeLoader.construct_yaml_float)


def parse_yaml(text: str, where: str) -> Any:
    try:
        return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - a SafeLoader, stricter
    except yaml.MarkedYAMLError as exc:
        line = f" line {exc.problem_mark.line + 1}:" if exc.problem_mark else ""
        raise InvalidDocument(f"{where}:{line} not valid YAML ({_first_line(exc.problem or exc)})") from None
    except (yaml.YAMLError, RecursionError, ValueError, OverflowError) as exc:
        raise InvalidDocument(f"{where}: not valid YAML ({_first_line(exc)})") from None


def read_yaml(path: Path, limit: int = MAX_BYTES) -> Any:
    return parse_yaml(read_text(path, limit), str(path))


def read_data(path: Path, limit: int = MAX_BYTES) -> Any:
    """A document file: ``.json`` as JSON, anything else as YAML."""
    if Path(path).suffix.lower() == ".json":
        return read_json(path, limit)
    return read_yaml(path, limit)


# ---- files a document names -----------------------------------------------------------------------------


def inside(folder: Path, reference: Any, field: str, where: Any) -> Path:
    """The file ``reference`` (relative to ``folder``) names, resolved with its symlinks; it must lie inside
    ``folder``. ``field`` is the document's field that holds the reference, ``where`` the document."""
    if not isinstance(reference, str) or not reference.strip():
        raise InvalidDocument(f"{where}: {field}: expected the name of a file in {folder}, got "
                              f"{shown(reference)}")
    if "\0" in reference:
        raise InvalidDocument(f"{where}: {field}: {shown(reference)} is not a file name")
    root = Path(folder).resolve()
    target = (root / reference).resolve()
    if Path(reference).is_absolute() or not target.is_relative_to(root):
        plain = Path(reference).is_absolute() or ".." in Path(reference).parts
        how = "is" if plain else "leads (by a symlink)"
        raise InvalidDocument(f"{where}: {field}: {shown(reference)} {how} outside the folder {root}; name a "
                              "file inside it")
    return target


def _first_line(exc: Any) -> str:
    return next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
