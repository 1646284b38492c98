"""What a requester's files can do to the loaders: be read, or be refused at once in one line naming the file
and the field (issue 21, items 8-11). Every loader (task documents, STAR folders, a Frames domain, a MEEP
folder) reads through ``turkflow.protocols.files``; these tests give each one real hostile files: an alias
bomb, a FIFO, a symlink to ``/dev/zero``, references out of the folder, JSON that is not plain JSON.

A loader that hangs or fills memory must fail its test, not the machine running it: each hostile load runs in
a forked child with a memory ceiling and a deadline (``in_child``) that only keeps a regression from hanging
the suite.
"""

from __future__ import annotations

import ast
import json
import os
import resource
import select
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from click.testing import CliRunner
from sqlmodel import select as query

from turkflow.cli.main import main
from turkflow.db import session_scope
from turkflow.errors import InvalidDocument
from turkflow.models import Task
from turkflow.protocols.frames.dialog import read_tasks as read_frames
from turkflow.protocols.frames.domain import load_domain
from turkflow.protocols.meep.dialog import read_tasks as read_meep
from turkflow.protocols.star.dialog import read_tasks as read_star
from turkflow.protocols.wot import read_documents

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "turkflow" / "samples"
# Only keeps a hanging loader (a FIFO read, /dev/zero) from hanging the suite: a test asserts the refusal,
# never its speed (a busy machine makes any bound a coin toss).
DEADLINE = 120.0
HEADROOM = 768 * 1024 * 1024  # memory a child may take beyond what the test process holds

DOC = {"id": "tea", "title": "Brew tea", "domain": "cooking", "ingredients": ["tea"], "steps": ["Boil water"]}


def alias_bomb(levels: int = 8) -> str:
    """A YAML flow list of a few hundred bytes whose last item expands to 10**(levels + 1) strings."""
    names = [chr(97 + n) for n in range(levels + 1)]
    items = ["&a [" + ", ".join(["lol"] * 10) + "]"]
    items += [f"&{name} [" + ", ".join([f"*{previous}"] * 10) + "]" for previous, name in zip(names, names[1:])]
    return "[" + ", ".join(items) + "]"


def in_child(call: Callable[[], Any]) -> dict[str, Any]:
    """Run ``call`` in a forked child with at most ``HEADROOM`` more memory and ``DEADLINE`` seconds: what
    it raised (``raised``, ``message``), or returned (``returned``), and in how many ``seconds``;
    ``raised == "hung"`` when the deadline passed."""
    size = next(int(line.split()[1]) * 1024 for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith("VmSize:"))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_end)
            resource.setrlimit(resource.RLIMIT_AS, (size + HEADROOM, size + HEADROOM))
            started = time.monotonic()
            try:
                found = {"raised": None, "returned": repr(call())[:2000]}
            except BaseException as exc:  # noqa: BLE001 - reported to the parent, whatever it is
                found = {"raised": type(exc).__name__, "message": str(exc)[:4000]}
            found["seconds"] = time.monotonic() - started
            os.write(write_end, json.dumps(found).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    chunks, deadline = [], time.monotonic() + DEADLINE
    try:
        while True:
            ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                return {"raised": "hung", "seconds": DEADLINE}
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    data = b"".join(chunks)
    return json.loads(data) if data else {"raised": "died", "seconds": 0}


def refused_at_once(call: Callable[[], Any], *words: str) -> str:
    """The message of the ``InvalidDocument`` that ``call`` raised at once: one line holding ``words``."""
    found = in_child(call)
    assert found["raised"] == "InvalidDocument", found
    message = found["message"]
    assert "\n" not in message and len(message) < 400, message
    for word in words:
        assert word in message, message
    return message


def cli_in_child(args: list[str], env: dict[str, str]) -> Callable[[], Any]:
    """``turkflow ARGS`` through the real CLI wrapper, as a call for ``in_child``: a refusal (exit 1, one
    line ``error: ...``) raises ``InvalidDocument`` with that line; anything else fails."""

    def run() -> None:
        result = CliRunner().invoke(main, args, env=env)
        lines = result.output.splitlines()
        if result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: "):
            raise InvalidDocument(lines[0])
        raise AssertionError(f"exit {result.exit_code}: {result.output[:2000]}")

    return run


def cli_refuses(args: list[str], tmp_path: Path, *words: str) -> str:
    """``turkflow ARGS`` exits 1 at once, printing one line ``error: ...`` holding ``words``."""
    env = {"TURKFLOW_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}", "TURKFLOW_DATA_DIR": str(tmp_path / "var")}
    return refused_at_once(cli_in_child(args, env), *words)


@pytest.fixture
def frames(tmp_path: Path) -> Path:
    """A copy of the sample Frames domain folder; returns its domain file."""
    shutil.copytree(SAMPLES / "frames", tmp_path / "frames")
    return tmp_path / "frames" / "frames.yaml"


@pytest.fixture
def meep(tmp_path: Path) -> Path:
    shutil.copytree(SAMPLES / "meep", tmp_path / "meep")
    return tmp_path / "meep"


@pytest.fixture
def star(tmp_path: Path) -> Path:
    """A copy of the sample STAR folder; returns its tasks folder (the knowledge base is ../apis)."""
    shutil.copytree(SAMPLES / "star", tmp_path / "star")
    return tmp_path / "star" / "tasks"


def first_template(path: Path, key: str, value: str) -> None:
    """Give the Frames domain file's first template ``key: value`` (the sample's first template has
    ``probability: 0.5``)."""
    text = path.read_text()
    assert "    probability: 0.5\n" in text
    path.write_text(text.replace("    probability: 0.5\n", f"    {key}: {value}\n", 1))


# ---- 8. YAML without aliases, everywhere; values in errors shortened ------------------------------------


def test_a_yaml_alias_bomb_in_a_frames_domain_is_refused_at_once_without_expanding(frames):
    assert len(alias_bomb()) < 700  # 10**9 strings once expanded
    first_template(frames, "probability", alias_bomb())
    refused_at_once(lambda: load_domain(frames), str(frames), "anchors and aliases")
    refused_at_once(lambda: read_frames(frames), "anchors and aliases")


def test_a_yaml_alias_bomb_is_refused_by_turkflow_tasks_load_in_one_line(frames, tmp_path):
    first_template(frames, "probability", alias_bomb())
    cli_refuses(["tasks", "load", "--protocol", "frames", str(frames)], tmp_path, str(frames),
                "anchors and aliases")


def test_a_long_wrong_value_is_shown_shortened_in_the_error(frames):
    first_template(frames, "probability", "[" + ", ".join(["12345"] * 5000) + "]")
    message = refused_at_once(lambda: load_domain(frames), "template 1 (budget_trip): probability")
    assert "12345, 12345" in message and "..." in message


def test_every_yaml_reader_refuses_anchors_deep_nesting_and_infinite_numbers(tmp_path):
    from turkflow.protocols import files

    for text, words in [("a: &x 1\nb: *x\n", "anchors and aliases"),
                        ("a: " + "[" * 200 + "]" * 200 + "\n", "nested more than"),
                        ("a: .inf\n", "not a finite number"), ("a: 1.0e+999\n", "not a finite number")]:
        (tmp_path / "t.yaml").write_text(text)
        with pytest.raises(InvalidDocument) as raised:
            files.read_yaml(tmp_path / "t.yaml")
        assert raised.value.message.startswith(str(tmp_path / "t.yaml")) and words in raised.value.message


# ---- 9. only regular files, and the size limit while reading --------------------------------------------


def special(path: Path, kind: str) -> None:
    """Replace ``path`` by a FIFO or by a symlink to ``/dev/zero``."""
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


LOADERS = {  # which file of a copied sample becomes special, and the load that must refuse it
    "task documents": (lambda tmp: tmp / "tasks.yaml", lambda tmp: read_documents(tmp / "tasks.yaml")),
    "frames domain file": (lambda tmp: tmp / "frames" / "frames.yaml",
                           lambda tmp: read_frames(tmp / "frames" / "frames.yaml")),
    "frames database": (lambda tmp: tmp / "frames" / "trips.csv",
                        lambda tmp: read_frames(tmp / "frames" / "frames.yaml")),
    "meep apis": (lambda tmp: tmp / "meep" / "apis.json", lambda tmp: read_meep(tmp / "meep")),
    "meep table": (lambda tmp: tmp / "meep" / "places.jsonl", lambda tmp: read_meep(tmp / "meep")),
    "meep templates": (lambda tmp: tmp / "meep" / "templates.json", lambda tmp: read_meep(tmp / "meep")),
    "meep scenarios": (lambda tmp: tmp / "meep" / "scenarios.json", lambda tmp: read_meep(tmp / "meep")),
    "star schema": (lambda tmp: tmp / "star" / "tasks" / "cinema_search" / "cinema_search.json",
                    lambda tmp: read_star(tmp / "star" / "tasks")),
    "star api": (lambda tmp: tmp / "star" / "apis" / "apis" / "cinema_search.json",
                 lambda tmp: read_star(tmp / "star" / "tasks")),
    "star database": (lambda tmp: tmp / "star" / "apis" / "dbs" / "cinema.json",
                      lambda tmp: read_star(tmp / "star" / "tasks")),
}


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_a_fifo_or_a_symlink_to_dev_zero_is_refused_at_once_by_every_loader(frames, meep, star, tmp_path,
                                                                             loader, kind):
    which, load = LOADERS[loader]
    special(which(tmp_path), kind)
    message = refused_at_once(lambda: load(tmp_path))
    assert "not a regular file" in message or "outside the folder" in message, message


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_turkflow_tasks_load_refuses_a_special_file_in_one_line(frames, tmp_path, kind):
    special(tmp_path / "tasks.yaml", kind)
    cli_refuses(["tasks", "load", str(tmp_path / "tasks.yaml")], tmp_path, str(tmp_path / "tasks.yaml"),
                "not a regular file")
    special(frames.parent / "trips.csv", kind)
    cli_refuses(["tasks", "load", "--protocol", "frames", str(frames)], tmp_path, "trips.csv")


def test_the_size_limit_holds_while_reading_not_from_the_size_the_file_claims(tmp_path):
    from turkflow.protocols import files

    path = tmp_path / "t.json"
    path.write_bytes(b"[" + b"1," * 48 + b"1] ")
    assert len(path.read_bytes()) == 100 and files.read_bytes(path, limit=100) == path.read_bytes()
    path.write_bytes(path.read_bytes() + b" ")
    with pytest.raises(InvalidDocument, match="larger than 100 bytes"):
        files.read_bytes(path, limit=100)
    # /proc files say they are empty and are not: the limit still holds
    (tmp_path / "maps.yaml").symlink_to("/proc/self/maps")
    with pytest.raises(InvalidDocument, match="larger than 10 bytes"):
        files.read_bytes(tmp_path / "maps.yaml", limit=10)


# ---- 10. references stay in the folder ------------------------------------------------------------------


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A readable CSV outside every sample folder."""
    path = tmp_path / "secret.csv"
    path.write_text("id,password\n1,hunter2\n")
    return path


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_a_frames_database_outside_the_domain_folder_is_refused_naming_the_field(frames, secret, how):
    if how == "symlink":
        (frames.parent / "inside.csv").symlink_to(secret)
    reference = {"dotdot": "../secret.csv", "absolute": str(secret), "symlink": "inside.csv"}[how]
    frames.write_text(frames.read_text().replace("file: trips.csv", f"file: {reference}"))
    message = refused_at_once(lambda: read_frames(frames), str(frames), "database.file", "outside the folder")
    assert "hunter2" not in message


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_a_meep_table_outside_the_folder_is_refused_naming_the_table(meep, tmp_path, how):
    shutil.copy(meep / "places.jsonl", tmp_path / "elsewhere.jsonl")
    if how == "symlink":
        (meep / "linked.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    reference = {"dotdot": "../elsewhere.jsonl", "absolute": "/etc/passwd", "symlink": "linked.jsonl"}[how]
    apis = json.loads((meep / "apis.json").read_text())
    apis["tables"]["places"] = reference
    (meep / "apis.json").write_text(json.dumps(apis))
    refused_at_once(lambda: read_meep(meep), str(meep / "apis.json"), "tables.places", "outside the folder")


def test_a_meep_file_that_is_a_symlink_out_of_the_folder_is_refused(meep, tmp_path):
    shutil.move(meep / "templates.json", tmp_path / "templates.json")
    (meep / "templates.json").symlink_to(tmp_path / "templates.json")
    refused_at_once(lambda: read_meep(meep), "templates.json", "outside the folder")


def test_a_reference_that_stays_inside_the_folder_still_loads(frames):
    (frames.parent / "data").mkdir()
    shutil.move(frames.parent / "trips.csv", frames.parent / "data" / "trips.csv")
    (frames.parent / "trips-link.csv").symlink_to(frames.parent / "data" / "trips.csv")
    for reference in ("data/trips.csv", "data/../data/trips.csv", "trips-link.csv"):
        frames.write_text(SAMPLES.joinpath("frames", "frames.yaml").read_text()
                          .replace("file: trips.csv", f"file: {reference}"))
        assert len(read_frames(frames)) >= 6


def test_turkflow_tasks_load_refuses_a_reference_out_of_the_folder_in_one_line(frames, meep, secret, tmp_path):
    frames.write_text(frames.read_text().replace("file: trips.csv", "file: ../secret.csv"))
    cli_refuses(["tasks", "load", "--protocol", "frames", str(frames)], tmp_path, str(frames), "database.file",
                "outside the folder")
    apis = json.loads((meep / "apis.json").read_text())
    apis["tables"]["places"] = "/etc/passwd"
    (meep / "apis.json").write_text(json.dumps(apis))
    cli_refuses(["tasks", "load", "--protocol", "meep", str(meep)], tmp_path, "tables.places",
                "outside the folder")


# ---- 11. JSON as JSON, no duplicate keys, no infinite numbers; type errors name the field ---------------


@pytest.mark.parametrize("text, words", [
    ('[{"id": "tea", "title": 1e999, "domain": "cooking", "steps": ["Boil"]}]', "not a finite number"),
    ('[{"id": "tea", "title": NaN, "domain": "cooking", "steps": ["Boil"]}]', "NaN is not a number"),
    ('[{"id": "tea", "id": "cake", "title": "Tea", "domain": "cooking", "steps": ["Boil"]}]',
     "key 'id' appears twice"),
    ("[{id: tea, title: Tea, domain: cooking, steps: [Boil]}]", "not valid JSON"),
], ids=["1e999", "NaN", "duplicate key", "YAML in a .json file"])
def test_a_json_task_file_is_parsed_as_json(tmp_path, text, words):
    (tmp_path / "tasks.json").write_text(text)
    refused_at_once(lambda: read_documents(tmp_path / "tasks.json"), str(tmp_path / "tasks.json"), words)


def test_a_yaml_task_file_with_a_key_twice_is_refused(tmp_path):
    (tmp_path / "tasks.yaml").write_text("- {id: tea, title: Tea, domain: cooking, steps: [Boil], id: cake}\n")
    refused_at_once(lambda: read_documents(tmp_path / "tasks.yaml"), "line 1", "key 'id' appears twice")


def test_turkflow_tasks_load_refuses_json_that_is_not_plain_json_in_one_line(tmp_path):
    (tmp_path / "tasks.json").write_text(json.dumps([DOC]).replace('"Brew tea"', "1e999"))
    cli_refuses(["tasks", "load", str(tmp_path / "tasks.json")], tmp_path, str(tmp_path / "tasks.json"),
                "'1e999' is not a finite number")


JSON_FILES = {  # a JSON file of each loader, and the load that reads it
    "meep/apis.json": lambda tmp: read_meep(tmp / "meep"),
    "meep/scenarios.json": lambda tmp: read_meep(tmp / "meep"),
    "meep/templates.json": lambda tmp: read_meep(tmp / "meep"),
    "meep/places.jsonl": lambda tmp: read_meep(tmp / "meep"),
    "star/tasks/cinema_search/cinema_search.json": lambda tmp: read_star(tmp / "star" / "tasks"),
    "star/apis/apis/cinema_search.json": lambda tmp: read_star(tmp / "star" / "tasks"),
    "star/apis/dbs/cinema.json": lambda tmp: read_star(tmp / "star" / "tasks"),
    "frames/trips.jsonl": lambda tmp: read_frames(tmp / "frames" / "frames.yaml"),
}


def first_object(value: Any) -> dict:
    return value if isinstance(value, dict) else first_object(value[0])


@pytest.mark.parametrize("how", ["duplicate key", "infinite number"])
@pytest.mark.parametrize("name", sorted(JSON_FILES))
def test_every_json_loader_refuses_duplicate_keys_and_non_finite_numbers(frames, meep, star, tmp_path, name,
                                                                         how):
    if name == "frames/trips.jsonl":  # the database as JSON Lines: one object per row
        rows = [{"id": n, "price": 100 + n, "origin": "Paris"} for n in range(3)]
        (tmp_path / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
        frames.write_text(frames.read_text().replace("file: trips.csv", "file: trips.jsonl")
                          .replace("types: {departure: date, return: date, price: integer, category: number}",
                                   "types: {}"))
    path = tmp_path / name
    text = path.read_text()
    first = first_object(json.loads(text.splitlines()[0] if name.endswith(".jsonl") else text))
    key = next(iter(first))
    added = f"{json.dumps(key)}: {json.dumps(first[key])}" if how == "duplicate key" else '"extra": 1e999'
    path.write_text(text.replace("{", "{" + added + ", ", 1))
    words = f"key {key!r} appears twice" if how == "duplicate key" else "'1e999' is not a finite number"
    refused_at_once(lambda: JSON_FILES[name](tmp_path), name.split("/")[-1], words)


def test_a_frames_slot_field_given_as_a_list_names_the_slot_and_the_field(frames, tmp_path):
    text = frames.read_text()
    assert "start: {field: departure," in text
    frames.write_text(text.replace("start: {field: departure,", "start: {field: [departure],", 1))
    refused_at_once(lambda: read_frames(frames), str(frames), "template 1 (budget_trip): slot 'start': field")
    message = cli_refuses(["tasks", "load", "--protocol", "frames", str(frames)], tmp_path, "slot 'start': field")
    assert "TypeError" not in message


@pytest.mark.parametrize("protocol, change, words", [
    ("meep", lambda d: d["apis"]["find_place"].update(function=["search"]), "API 'find_place': function"),
    ("meep", lambda d: d.update(tables=["places.jsonl"]), "tables: expected an object"),
    ("star", lambda d: d[0].update(Categories=7), "Categories: expected a list"),
], ids=["meep function as a list", "meep tables as a list", "star categories as a number"])
def test_a_value_of_the_wrong_type_names_its_field_in_every_loader(meep, star, tmp_path, protocol, change, words):
    path = meep / "apis.json" if protocol == "meep" else star.parent / "apis" / "dbs" / "cinema.json"
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))
    folder = meep if protocol == "meep" else star
    refused_at_once(lambda: (read_meep if protocol == "meep" else read_star)(folder), str(path), words)
    message = cli_refuses(["tasks", "load", "--protocol", protocol, str(folder)], tmp_path, words)
    assert "unexpected" not in message


# ---- what still loads -----------------------------------------------------------------------------------


def test_the_sample_tasks_of_every_protocol_still_load(sqlite_url, tmp_path):
    env = {"TURKFLOW_DATABASE_URL": sqlite_url, "TURKFLOW_DATA_DIR": str(tmp_path / "var")}
    for args in (["tasks.yaml"], ["--protocol", "frames", "frames/frames.yaml"], ["--protocol", "meep", "meep"],
                 ["--protocol", "star", "star/tasks"]):
        result = CliRunner().invoke(main, ["tasks", "load", *args[:-1], str(SAMPLES / args[-1])], env=env)
        assert result.exit_code == 0 and "loaded" in result.output, result.output
    with session_scope(sqlite_url) as session:
        protocols = {task.protocol for task in session.exec(query(Task)).all()}
    assert {"frames", "meep", "star"} <= protocols and len(protocols) == 4


def test_the_file_reader_imports_only_the_standard_library_yaml_and_errors():
    tree = ast.parse((ROOT / "turkflow" / "protocols" / "files.py").read_text())
    names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    names += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
    assert [n for n in names if n.split(".")[0] not in sys.stdlib_module_names
            and n not in ("__future__", "yaml", "turkflow.errors")] == []
