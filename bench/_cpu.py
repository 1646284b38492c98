"""CPU seconds used by the processes of a started stack (each service with all its forked children), so a
benchmark can say what one turn costs each service, not only how long it took on a shared machine."""

from __future__ import annotations

import os
import subprocess

import psutil


def cpu_seconds(processes: dict[str, subprocess.Popen]) -> dict[str, float]:
    """User + system CPU of every service's process tree, children that already exited included."""
    used = {}
    for name, process in processes.items():
        try:
            parent = psutil.Process(process.pid)
            tree = [parent, *parent.children(recursive=True)]
        except psutil.NoSuchProcess:
            used[name] = 0.0
            continue
        total = 0.0
        for member in tree:
            try:
                times = member.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
            except psutil.NoSuchProcess:
                pass
        used[name] = total
    return used


def load() -> str:
    """The machine's load average, printed with every result: this machine is shared."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"
