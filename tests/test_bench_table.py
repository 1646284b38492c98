"""The README's table of benchmarks names every benchmark `python -m bench` runs."""

from __future__ import annotations

import re

from bench.__main__ import modules
from tests.test_cli import ROOT


def test_the_readme_lists_every_benchmark_and_no_other():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| Benchmark | Measures |"):]
    table = table[:table.index("\n\n")]
    listed = re.findall(r"^\| `(\w+)` \|", table, flags=re.M)
    assert listed == sorted(listed)
    assert listed == modules()
