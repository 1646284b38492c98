"""The Prolific a simulation on Prolific runs against: the fake Prolific (``fake_prolific.py``) on a
loopback port, the started stack's ``TURKFLOW_PROLIFIC_*`` settings pointing at it, and the simulated
participants pre-qualified through hand-made role groups (``TURKFLOW_PROLIFIC_ROLE_GROUPS``) made on the
fake, as a lab that recruits known participants does; the onboarding study is not simulated.

The fake checks every call against Prolific's contract when it can (the file is there and openapi-core
is installed), and the report says whether it did and how many violations it found.
"""

from __future__ import annotations

import importlib.util
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from turkflow.config import Settings
from turkflow.simulator.crowd import SimWorker
from turkflow.simulator.fake_prolific import SPEC_PATH, FakeProlific


def contract_to_check(path: Optional[Path]) -> tuple[Optional[Path], str]:
    """The contract file the fake checks calls against, or None with the reason it checks nothing.

    ``path`` must exist when given; by default it is ``../shared/prolific/publicapi.yaml`` beside the
    checkout, if present.
    """
    if path is not None and not path.is_file():
        raise ValueError(f"Prolific's contract {path} does not exist (--prolific-contract)")
    chosen = path or (SPEC_PATH if SPEC_PATH.is_file() else None)
    if chosen is None:
        return None, f"no contract file ({SPEC_PATH} is missing; pass --prolific-contract)"
    if importlib.util.find_spec("openapi_core") is None:
        return None, "openapi-core is not installed (pip install -e '.[test]')"
    return chosen, ""


def started_fake(contract: Optional[Path]) -> FakeProlific:
    """A fake Prolific whose ids are this run's (``x1a2b3c4d-study-1``), unlike those a simulation run
    before on the same database recorded."""
    return FakeProlific(contract=contract, id_prefix=f"x{uuid.uuid4().hex[:8]}-")


@dataclass(frozen=True)
class ProlificCrowd:
    """A simulation's Prolific: the running fake, and each simulated worker's Prolific participant id."""

    fake: FakeProlific
    participant_ids: dict[str, str]


def crowd_on(fake: FakeProlific, crowd: list[SimWorker]) -> ProlificCrowd:
    """Participant ids of this run (the worker's name and a run tag): a simulation repeated on the same
    database meets new participants, as a local one invites new workers, so it reports the same. The
    report names workers, never participant ids."""
    run = uuid.uuid4().hex[:8]
    return ProlificCrowd(fake, {w.name: f"{w.name}-{run}" for w in crowd})


def settings_for(settings: Settings, on: ProlificCrowd, crowd: list[SimWorker]) -> Settings:
    """``settings`` for a Prolific collection on the fake, each role's participants in a group of their
    role that the role's studies admit (made as a researcher makes one by hand in Prolific's app)."""
    fake = on.fake
    groups = {}
    for role in sorted({w.role for w in crowd}):
        members = [on.participant_ids[w.name] for w in crowd if w.role == role]
        groups[role] = fake.make_group(f"Simulated {role}s", members)
    return settings.model_copy(update={
        "provider": "prolific", "prolific_token": fake.token, "prolific_workspace_id": fake.workspace_id,
        "prolific_base_url": fake.url, "prolific_webhook_secret": "",
        "prolific_role_groups": ",".join(f"{role}={group}" for role, group in groups.items())})


def contract_report(fake: FakeProlific, unchecked_because: str) -> dict[str, Any]:
    """What the fake saw: the calls, whether they were checked against the contract, and the violations."""
    checked = fake.contract is not None
    return {
        "contract": str(fake.contract.path) if checked else None,
        "checked": checked,
        "unchecked_because": None if checked else unchecked_because,
        "calls": len(fake.requests),
        "violations": len(fake.violations) if checked else None,
        "violation_details": list(fake.violations[:20]),
        "submissions": dict(sorted(Counter(s.status for s in fake.submissions.values()).items())),
        "bonus_payments": len(fake.payments),
        "bonus_cents_paid": sum(p.cents for p in fake.payments),
    }

