"""The code has no unused imports, undefined names or syntax errors (ruff's pyflakes rules, as `make lint`
runs them): an undefined name is a crash waiting on the one path no test takes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_no_mistakes():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "turkflow", "workers", "tests",
                           "bench", "scripts"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
