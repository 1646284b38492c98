"""The fake Prolific (``turkflow.simulator.fake_prolific``) as the tests use it: the ``fake_prolific``
fixture, which always checks every call against Prolific's contract and fails the test on any violation.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from turkflow.simulator.fake_prolific import SPEC_PATH, ApiError, FakeProlific, Payment, Refused

__all__ = ["SPEC_PATH", "ApiError", "FakeProlific", "Payment", "Refused", "fake_prolific"]


@pytest.fixture
def fake_prolific() -> Iterator[FakeProlific]:
    """A running fake Prolific; the test fails if any request or response broke Prolific's contract."""
    with FakeProlific(contract=SPEC_PATH) as fake:
        yield fake
    assert not fake.violations, "Prolific's contract was broken:\n" + "\n".join(fake.violations)
