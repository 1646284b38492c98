"""MEEP's APIs: what an agent can call by clicks, defined by the requester over their own table.

MEEP called Google's place APIs live, so a replayed log could only show that the world had changed. Here
a requester's ``apis.json`` defines each API as one of a few functions over a table they ship
(``search``, ``lookup``, ``distance``, ``drive``): the same call gives the same answer on every run, so
executing a log checks the log, and a difference means the table or the definitions changed. The sample
in ``turkflow/samples/meep/`` follows MEEP's trip-destination domain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols.files import cut, inside, json_lines, read_json, shown
from turkflow.protocols.meep.tokens import words

TEXT, NUMBER = "text", "number"
ROAD_FACTOR = 1.3  # roads are longer than the straight line between two points
MILES_PER_HOUR = 25.0  # city driving
EARTH_RADIUS_MILES = 3958.8
MAX_TABLE_BYTES = 200 * 1024 * 1024  # a table, like a Frames database, may be large


@dataclass(frozen=True)
class Api:
    """One API of the knowledge base: its function, arguments (name -> type) and the fields it returns."""

    name: str
    description: str
    function: str
    arguments: Mapping[str, str]
    described: Mapping[str, str]
    returns: tuple[str, ...]
    table: Optional[str] = None
    limit: int = 1
    within_miles: Optional[float] = None
    match: tuple[str, ...] = ()
    key: Optional[str] = None


def _search_arguments(spec: Mapping[str, Any]) -> dict[str, str]:
    return {"query": TEXT, "latitude": NUMBER, "longitude": NUMBER}


def _lookup_arguments(spec: Mapping[str, Any]) -> dict[str, str]:
    return {str(spec.get("key")): TEXT}


def _distance_arguments(spec: Mapping[str, Any]) -> dict[str, str]:
    return {name: NUMBER for name in ("origin_latitude", "origin_longitude", "destination_latitude",
                                      "destination_longitude")}


def _drive_arguments(spec: Mapping[str, Any]) -> dict[str, str]:
    return {"latitude": NUMBER, "longitude": NUMBER}


# function -> the arguments it takes, given the API's definition
FUNCTIONS: dict[str, Callable[[Mapping[str, Any]], dict[str, str]]] = {
    "search": _search_arguments, "lookup": _lookup_arguments, "distance": _distance_arguments,
    "drive": _drive_arguments,
}
COMPUTED = {"search": ("distance_miles", "duration_minutes"),  # from the point searched from
            "distance": ("distance_miles", "duration_minutes"), "drive": ("latitude", "longitude", "status")}


def straight_miles(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance (haversine)."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_MILES * math.asin(math.sqrt(a))


def drive(lat1: float, lon1: float, lat2: float, lon2: float) -> dict[str, Any]:
    """Road miles (one decimal) and whole minutes between two points."""
    road = straight_miles(lat1, lon1, lat2, lon2) * ROAD_FACTOR
    return {"distance_miles": round(road, 1), "duration_minutes": round(road / MILES_PER_HOUR * 60)}


@dataclass
class KnowledgeBase:
    apis: dict[str, Api]
    tables: dict[str, list[dict[str, Any]]]
    start: dict[str, Any]
    ignore: frozenset[str] = frozenset()
    synonyms: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> "KnowledgeBase":
        """``folder/apis.json`` and the table files it names (each inside ``folder``); anything wrong is one
        ``InvalidDocument`` naming the file and what is wrong."""
        path = folder / "apis.json"
        document = read_json(inside(folder, "apis.json", "apis.json", folder))
        if not isinstance(document, dict) or not isinstance(document.get("apis"), dict):
            raise InvalidDocument(f"{path}: expected an object with 'apis'")
        files = document.get("tables") or {}
        if not isinstance(files, dict):
            raise InvalidDocument(f"{path}: tables: expected an object of table name -> file in {folder}")
        tables = {name: _read_table(inside(folder, file, f"tables.{cut(name)}", path))
                  for name, file in files.items()}
        start = document.get("start") or {}
        if not _is_point(start):
            raise InvalidDocument(f"{path}: start: needs a latitude and a longitude, each a number")
        apis = {name: _parse_api(path, name, spec, tables) for name, spec in document["apis"].items()}
        synonyms = document.get("synonyms") or {}
        ignore = document.get("ignore") or []
        if not isinstance(synonyms, dict) or not isinstance(ignore, list):
            raise InvalidDocument(f"{path}: 'synonyms' must be an object and 'ignore' a list")
        return cls(apis, tables, dict(start), frozenset(str(w).lower() for w in ignore),
                   {str(k).lower(): str(v).lower() for k, v in synonyms.items()})

    def api(self, name: Any) -> Api:
        if not isinstance(name, str) or name not in self.apis:
            raise InvalidInput(f"choose one of: {', '.join(self.apis)}", "api")
        return self.apis[name]

    def call(self, name: str, arguments: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The records the API returns for these argument values (perhaps none), each holding exactly the
        API's ``returns`` fields. A missing, unknown or wrongly typed argument is an ``InvalidInput`` naming
        it (``arguments.query``)."""
        api = self.api(name)
        for argument in arguments:
            if argument not in api.arguments:
                raise InvalidInput(f"{name} takes no such argument", f"arguments.{argument}")
        for argument, kind in api.arguments.items():
            if argument not in arguments:
                raise InvalidInput("click a value for it", f"arguments.{argument}")
            value = arguments[argument]
            if kind == NUMBER and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise InvalidInput("expected a number", f"arguments.{argument}")
            if kind == TEXT and not isinstance(value, str):
                raise InvalidInput("expected text", f"arguments.{argument}")
        if api.function == "search":
            records = self._search(api, arguments)
        elif api.function == "lookup":
            records = [r for r in self.tables[api.table] if r.get(api.key) == arguments[api.key]][:1]
        elif api.function == "distance":
            records = [drive(arguments["origin_latitude"], arguments["origin_longitude"],
                             arguments["destination_latitude"], arguments["destination_longitude"])]
        else:  # drive
            records = [{"latitude": arguments["latitude"], "longitude": arguments["longitude"],
                        "status": "driving"}]
        return [{name: record.get(name) for name in api.returns} for record in records]

    def query_words(self, text: str) -> set[str]:
        return {self.synonyms.get(w, w) for w in words(text)} - self.ignore

    def _search(self, api: Api, arguments: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Rows holding the most query words first, then the nearest, then in table order."""
        wanted = self.query_words(arguments["query"])
        if not wanted:
            raise InvalidInput("no word to search for in it", "arguments.query")
        lat, lon = arguments["latitude"], arguments["longitude"]
        found = []
        for position, row in enumerate(self.tables[api.table]):
            have = set()
            for column in api.match:
                have |= self.query_words(str(row.get(column) or ""))
            score = len(wanted & have)
            if not score:
                continue
            miles = straight_miles(lat, lon, row["latitude"], row["longitude"])
            if api.within_miles is not None and miles > api.within_miles:
                continue
            found.append((-score, miles, position, row))
        found.sort(key=lambda entry: entry[:3])
        return [{**row, **drive(lat, lon, row["latitude"], row["longitude"])}
                for *_, row in found[:api.limit]]


def _is_point(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(value.get(k), (int, float)) and not isinstance(value.get(k), bool)
        for k in ("latitude", "longitude"))


def _read_table(path: Path) -> list[dict[str, Any]]:
    """A JSON Lines file: one row (an object) per line."""
    rows = []
    for number, row in json_lines(path, MAX_TABLE_BYTES):
        if not isinstance(row, dict):
            raise InvalidDocument(f"{path}: line {number}: expected an object")
        rows.append(row)
    return rows


def _parse_api(path: Path, name: str, spec: Any, tables: Mapping[str, list]) -> Api:
    where = f"{path}: API {shown(name)}"
    if not isinstance(spec, dict):
        raise InvalidDocument(f"{where}: expected an object")
    function = spec.get("function")
    if not isinstance(function, str) or function not in FUNCTIONS:
        raise InvalidDocument(f"{where}: function must be one of {', '.join(FUNCTIONS)}")
    table = spec.get("table")
    if function in ("search", "lookup"):
        if not isinstance(table, str) or table not in tables:
            raise InvalidDocument(f"{where}: table must be one of the tables: {', '.join(tables) or 'none'}")
        columns = set().union(*(row.keys() for row in tables[table])) if tables[table] else set()
        if function == "search" and not {"latitude", "longitude"} <= columns:
            raise InvalidDocument(f"{where}: a searched table needs latitude and longitude columns")
        if function == "search":
            unplaced = next((n for n, row in enumerate(tables[table], 1) if not _is_point(row)), None)
            if unplaced is not None:
                raise InvalidDocument(f"{where}: table {shown(table)} row {unplaced}: latitude and longitude "
                                      "must be numbers")
        if function == "lookup" and (not isinstance(spec.get("key"), str) or spec["key"] not in columns):
            raise InvalidDocument(f"{where}: key must be a column of table {shown(table)}")
    else:
        columns = set()
    arguments = FUNCTIONS[function](spec)
    described = spec.get("arguments") or {}
    if not isinstance(described, dict) or set(described) != set(arguments):
        raise InvalidDocument(f"{where}: arguments must describe exactly: {', '.join(arguments)}")
    returns = spec.get("returns")
    known = columns | set(COMPUTED.get(function, ()))
    if not isinstance(returns, list) or not returns or not all(isinstance(r, str) for r in returns):
        raise InvalidDocument(f"{where}: returns must list the fields a result shows")
    unknown = [r for r in returns if r not in known]
    if unknown:
        raise InvalidDocument(f"{where}: returns names {shown(unknown[0])}, which it cannot give")
    limit = spec.get("limit", 1)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidDocument(f"{where}: limit must be a whole number of at least 1")
    within = spec.get("within_miles")
    if within is not None and (isinstance(within, bool) or not isinstance(within, (int, float))):
        raise InvalidDocument(f"{where}: within_miles must be a number")
    match = spec.get("match", ["name"] if function == "search" else [])
    if (not isinstance(match, list) or not all(isinstance(m, str) for m in match)
            or (function == "search" and not set(match) <= columns)):
        raise InvalidDocument(f"{where}: match must list columns of table {shown(table)}")
    return Api(name=name, description=str(spec.get("description", "")), function=function,
               arguments=arguments, described={k: str(v) for k, v in described.items()},
               returns=tuple(returns), table=table, limit=limit, within_miles=within, match=tuple(match),
               key=spec.get("key"))
