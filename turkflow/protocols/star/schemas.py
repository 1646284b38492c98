"""STAR task schemas: the flow chart a wizard follows and the reply templates it can pick.

A task folder (``tasks/<task>/``) holds ``<task>.json`` with ``task``, ``replies`` (action label -> template
text with ``{slot:s}``/``{slot:d}`` fields) and ``graph`` (node -> the one node that follows it), plus the
flow-chart image ``<task>.jpg``. Schemas are read at run time from the shared data folder; a bad file is one
:class:`~turkflow.errors.InvalidDocument` naming the file and what is wrong, so an operator can fix it.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Optional

from turkflow.errors import InvalidDocument
from turkflow.protocols.files import cut, read_json, shown

QUERY_PREFIX = "query"


def is_query_label(label: str) -> bool:
    """Nodes like ``query`` or ``query_book`` stand for a knowledge-base call, not something to say."""
    return label == QUERY_PREFIX or label.startswith(QUERY_PREFIX + "_")


@dataclass(frozen=True)
class Slot:
    """A ``{name:spec}`` field of a template; ``spec`` is ``s`` or ``d`` in STAR (text or integer)."""

    name: str
    spec: str


@dataclass(frozen=True)
class Template:
    """One reply the wizard can pick: ``label`` is STAR's ActionLabel, ``text`` may hold slots."""

    label: str
    text: str
    slots: tuple[Slot, ...]

    @property
    def is_query(self) -> bool:
        return is_query_label(self.label)


@dataclass(frozen=True)
class Graph:
    """The flow chart: every node has at most one successor; ``start`` is the node nothing leads to first."""

    edges: Mapping[str, str]
    nodes: tuple[str, ...]
    start: str

    def successor(self, node: str) -> Optional[str]:
        return self.edges.get(node)

    def predecessors(self, node: str) -> tuple[str, ...]:
        return tuple(source for source, target in self.edges.items() if target == node)


@dataclass(frozen=True)
class TaskSchema:
    """One STAR task: its folder name (which is also the API name), graph, templates and image."""

    name: str
    declared_name: str
    graph: Graph
    templates: Mapping[str, Template]
    image: Optional[Path]
    source: Path

    @property
    def api(self) -> str:
        """STAR names each task's knowledge-base API after the task folder (``apis/<task>.json``)."""
        return self.name

    def replies(self) -> Iterator[Template]:
        """The templates a wizard could say (not the query or query-outcome nodes)."""
        return (t for t in self.templates.values() if not t.is_query)


def _slots(path: Path, label: str, text: str) -> tuple[Slot, ...]:
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise InvalidDocument(f"{path}: reply {shown(label)} is not a valid template: {exc}") from None
    found = []
    for _, name, spec, _ in parsed:
        if name is None:
            continue
        if not name.isidentifier():
            raise InvalidDocument(f"{path}: reply {shown(label)} has a slot {{{cut(name)}}} that is not a "
                                  "plain name")
        found.append(Slot(name, spec or "s"))
    return tuple(found)


def _start(path: Path, edges: Mapping[str, str]) -> str:
    """STAR graphs begin at ``hello``; otherwise the first source node no edge leads to."""
    if "hello" in edges:
        return "hello"
    targets = set(edges.values())
    roots = [node for node in edges if node not in targets]
    if not roots:
        raise InvalidDocument(f"{path}: graph has no start node (every node has a predecessor)")
    return roots[0]


def parse_schema(path: Path, document: object, name: Optional[str] = None) -> TaskSchema:
    """Check one schema document and build its model; every error names ``path`` and the bad part."""
    if not isinstance(document, dict):
        raise InvalidDocument(f"{path}: expected a JSON object with task, replies and graph")
    for key, kind in (("task", str), ("replies", dict), ("graph", dict)):
        if not isinstance(document.get(key), kind):
            raise InvalidDocument(f"{path}: {key!r} is missing or not a {kind.__name__}")
    replies: dict = document["replies"]
    templates = {}
    for label, text in replies.items():
        if not isinstance(text, str):
            raise InvalidDocument(f"{path}: reply {shown(label)} is not text")
        templates[label] = Template(label, text, _slots(path, label, text))
    edges: dict = document["graph"]
    for source, target in edges.items():
        if not isinstance(target, str):
            raise InvalidDocument(f"{path}: graph edge from {shown(source)} does not name one node")
        for node in (source, target):
            if node not in templates:
                raise InvalidDocument(f"{path}: graph node {shown(node)} has no reply")
    nodes = tuple(dict.fromkeys([*edges, *edges.values()]))
    graph = Graph(dict(edges), nodes, _start(path, edges))
    folder = name or path.parent.name
    image = path.parent / f"{folder}.jpg"
    return TaskSchema(folder, document["task"], graph, templates, image if image.exists() else None, path)


def load_schema(folder: Path) -> TaskSchema:
    """Load ``<folder>/<folder name>.json``."""
    path = folder / f"{folder.name}.json"
    if not path.exists() and not path.is_symlink():
        raise InvalidDocument(f"{path}: no schema file for task {shown(folder.name)}")
    return parse_schema(path, read_json(path))


def load_schemas(tasks_dir: Path) -> dict[str, TaskSchema]:
    """Every task folder under ``tasks_dir`` by name, in name order."""
    if not tasks_dir.is_dir():
        raise InvalidDocument(f"{tasks_dir}: not a directory of STAR tasks")
    return {p.name: load_schema(p) for p in sorted(tasks_dir.iterdir()) if p.is_dir()}
