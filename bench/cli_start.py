"""How long the ``turkflow`` command takes to start and finish a command that loads no spaCy model, before
and after a change, side by side in one run (issue 36: ``--help`` took 4.5 s and ``admin create`` 7.5 s,
nearly all of it imports).

The "before" is another commit's ``turkflow`` package (``git archive`` of it into a temporary folder, put
first on ``PYTHONPATH``); the "after" is this checkout's. Both run with this virtual environment's
packages, each command in a fresh process, before and after alternated, each on a database of its own
migrated by its own code. Reported per command: the median wall time and the median CPU time (user +
system) of the process, with the machine's load (wall times grow with it; CPU much less).

    python -m bench cli_start
    python -m bench cli_start --before cadbc90 --runs 9
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from bench._cpu import load

ROOT = Path(__file__).resolve().parents[1]
# The last commit before the CLI imported the domain lazily.
BEFORE = "cadbc90"
RUN = "import sys; from turkflow.cli.main import main; main(sys.argv[1:], prog_name='turkflow')"
COMMANDS = [
    ("--help",),
    ("batch", "--help"),
    ("batch", "launch", "--help"),
    ("simulate", "--help"),
    ("settings",),
    ("admin", "create", "{n}", "--password-stdin"),
    ("worker", "invite", "--role", "student", "--name", "{n}"),
    ("tasks", "list"),
    ("batch", "status"),
]


def checkout(commit: str, into: Path) -> Path:
    """The commit's turkflow package (and the workers folder its link points at) under ``into``."""
    archive = subprocess.run(["git", "archive", "--format=tar", commit, "turkflow", "workers"], cwd=ROOT,
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="tar")
    return into


def run(code: Path, data: Path, command: tuple[str, ...], n: int) -> tuple[float, float]:
    """Wall and CPU seconds of one ``turkflow COMMAND`` run with the package at ``code``."""
    args = [part.replace("{n}", f"user{n}") for part in command]
    env = {**os.environ, "PYTHONPATH": str(code), "TURKFLOW_DATA_DIR": str(data)}
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", RUN, *args], env=env, cwd=data, stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    process.stdin.write(b"a long enough password\n")
    process.stdin.close()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    errors = process.stderr.read().decode()
    process.stderr.close()
    if process.returncode != 0:
        raise SystemExit(f"turkflow {' '.join(args)} failed with {code}: {errors}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help=f"The commit to compare with (default {BEFORE}).")
    parser.add_argument("--runs", type=int, default=7, help="Runs of each command with each version.")
    args = parser.parse_args()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    changed = subprocess.run(["git", "status", "--porcelain", "turkflow", "workers"], cwd=ROOT,
                             capture_output=True, text=True).stdout.strip()
    after_label = f"{head}{' + uncommitted changes' if changed else ''}"
    with tempfile.TemporaryDirectory(prefix="turkflow-cli-start-") as tmp:
        versions = {"before": checkout(args.before, Path(tmp) / "before"), "after": ROOT}
        data = {name: Path(tmp) / f"data-{name}" for name in versions}
        for name, code in versions.items():
            data[name].mkdir()
            run(code, data[name], ("db", "upgrade"), 0)
            run(code, data[name], ("tasks", "load", str(ROOT / "turkflow" / "samples" / "tasks.yaml")), 0)
        print(f"before: {args.before}; after: {after_label}; {args.runs} runs of each; {load()}")
        print(f"{'command':<44} {'wall before':>11} {'after':>7} {'ratio':>6}   {'CPU before':>10} {'after':>7} "
              f"{'ratio':>6}")
        for command in COMMANDS:
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in versions}
            for n in range(1, args.runs + 1):
                for name in (("before", "after") if n % 2 else ("after", "before")):
                    times[name].append(run(versions[name], data[name], command, n))
            wall = {name: statistics.median(t[0] for t in times[name]) for name in versions}
            cpu = {name: statistics.median(t[1] for t in times[name]) for name in versions}
            shown = " ".join(command).replace("{n}", "NAME")
            print(f"turkflow {shown:<35} {wall['before']:>9.2f} s {wall['after']:>5.2f} s "
                  f"{wall['after'] / wall['before']:>5.2f}x   {cpu['before']:>8.2f} s {cpu['after']:>5.2f} s "
                  f"{cpu['after'] / cpu['before']:>5.2f}x", flush=True)
        print(load())


if __name__ == "__main__":
    main()
