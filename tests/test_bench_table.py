"""The docs' table of benchmarks (docs/benchmarks.md) names every benchmark `python -m bench` runs."""

from __future__ import annotations

import re

from bench.__main__ import modules
from tests.test_cli import ROOT


def test_the_docs_list_every_benchmark_and_no_other():
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    table = page[page.index("| Benchmark | Measures |"):]
    table = table[:table.index("\n\n")]
    listed = re.findall(r"^\| `(\w+)` \|", table, flags=re.M)
    assert listed == sorted(listed)
    assert listed == modules()
