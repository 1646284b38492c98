"""The suite's own scheduling (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST


def test_the_files_handed_out_first_are_files_of_the_suite():
    """A file renamed or removed would drop out of the head of the queue unnoticed, and a long file handed
    out last keeps one process running alone at the end of every run."""
    here = Path(__file__).parent
    assert [name for name in LONGEST if not (here / f"{name}.py").is_file()] == []
    assert len(set(LONGEST)) == len(LONGEST)
