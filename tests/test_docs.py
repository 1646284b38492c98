"""The documentation site builds in MkDocs' strict mode, as `make docs` builds it: no broken link or anchor, no
page left out of the nav, and reference pages equal to what the code says now (scripts/docs.py); the make
commands the docs name exist."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=root, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_docs_build_in_strict_mode_with_the_readme_as_home_and_the_benchmark_results(tmp_path):
    done = build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    home = (tmp_path / "site" / "index.html").read_text()
    assert "collects task-oriented dialog datasets" in home
    assert 'href="prolific/"' in home  # the README's docs/prolific.md, as a link between the site's pages
    assert "Benchmark results" in (tmp_path / "site" / "benchmarks" / "results" / "index.html").read_text()
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "<code>turkflow batch launch --tasks FILE | --all" in cli  # GitHub's `\|` in a table cell, bare


def test_a_broken_link_a_page_outside_the_nav_or_a_stale_reference_fails_the_build(tmp_path):
    copy = tmp_path / "repo"
    for part in ("docs", "scripts"):
        shutil.copytree(ROOT / part, copy / part)
    for part in ("mkdocs.yml", "README.md", "bench/RESULTS.md"):
        (copy / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / part, copy / part)
    with (copy / "README.md").open("a") as readme:
        readme.write("\nSee [the guide](docs/no-such-page.md).\n")
    with (copy / "docs" / "security.md").open("a") as page:
        page.write("\nSee [operations](operations.md#no-such-heading).\n")
    (copy / "docs" / "stray.md").write_text("# A page nobody put in the nav\n")
    cli = copy / "docs" / "reference" / "cli.md"
    cli.write_text(cli.read_text().replace("Show the full traceback when a command fails.", "Show more."))

    done = build(copy, tmp_path / "site")

    assert done.returncode != 0
    assert "README.md links to docs/no-such-page.md, which is not in the repository" in done.stderr, done.stderr
    assert "contains a link 'operations.md#no-such-heading'" in done.stderr, done.stderr
    assert "not included in the \"nav\" configuration:\n  - stray.md" in done.stderr, done.stderr
    assert "docs/reference/cli.md is not what the code says now: run `make docs`" in done.stderr, done.stderr


def test_the_quick_start_and_every_make_command_the_docs_name_exist():
    """The README's quick start is `make demo` and `make test`, and every `make X` the docs name is a target of
    the Makefile (the guides say `make docs`, `make bench`, `make lint` too)."""
    readme = (ROOT / "README.md").read_text()
    quick_start = readme[readme.index("## Quick start"):]
    assert "```sh\nmake demo\nmake test\n```" in quick_start[:quick_start.index("\n## ")]
    targets = set(re.findall(r"^([a-z]+):", (ROOT / "Makefile").read_text(), flags=re.M))
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    named = {(page.name, target) for page in pages for target in re.findall(r"`make ([a-z]+)", page.read_text())}
    assert {(page, target) for page, target in named if target not in targets} == set()
