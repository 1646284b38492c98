"""The Prolific a simulation on Prolific runs against: the fake Prolific (``fake_prolific.py``) on a
loopback port, the started stack's ``TURKFLOW_PROLIFIC_*`` settings pointing at it, and the simulated
participants pre-qualified through hand-made role groups (``TURKFLOW_PROLIFIC_ROLE_GROUPS``) made on the
fake, as a lab that recruits known participants does; the onboarding study is not simulated. As in a
rehearsal (``turkflow prolific rehearse``), the studies point at a rehearsal address that the public URL
check is told to trust (``REHEARSAL_URL``, ``TURKFLOW_PROLIFIC_REHEARSAL_HOST``), and the simulated
participants follow a study's link to the stack's own web process.

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
from turkflow.hits.prolific import rules
from turkflow.hits.money import least_reward_cents
from turkflow.hits.prolific.terms import StudyTerms, session_minutes_of_launch
from turkflow.simulator.crowd import SimWorker

REHEARSAL_HOST = "rehearsal.turkflow.invalid"  # .invalid never resolves: nothing real can point at it
REHEARSAL_URL = f"https://{REHEARSAL_HOST}"
QUALIFIED_BY = ("hand-made role groups (TURKFLOW_PROLIFIC_ROLE_GROUPS) made on the fake: no onboarding study is "
                "simulated, and a group stands for STAR's first qualification stage only, so STAR's simulated "
                "dialogs on Prolific have one task each")
from turkflow.simulator.fake_prolific import SPEC_PATH, FakeProlific


def contract_to_check(path: Optional[Path]) -> tuple[Optional[Path], str]:
    """The contract file the fake checks calls against, or None with the reason it checks nothing.

    ``path`` must exist when given; by default it is the copy shipped in the package (``SPEC_PATH``).
    """
    if path is not None and not path.is_file():
        raise ValueError(f"Prolific's contract {path} does not exist (--prolific-contract)")
    if importlib.util.find_spec("openapi_core") is None:
        return None, "openapi-core is not installed (pip install 'turkflow[test]')"
    return path or SPEC_PATH, ""


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
        "prolific_base_url": fake.url, "prolific_webhook_secret": "", "prolific_rehearsal_host": REHEARSAL_HOST,
        "prolific_role_groups": ",".join(f"{role}={group}" for role, group in groups.items()),
        # A session place's waiting page asks every few seconds; a simulated participant asks when served, once
        # in two rounds, so they count present as long as a one-turn participant who goes back to Prolific.
        "presence_seconds": max(settings.presence_seconds, settings.prolific_presence_seconds)})


def study_terms(settings: Settings, keep_rule: str) -> dict[str, Any]:
    """What a simulated batch's studies are made with, stored with it as ``turkflow batch launch`` does (its places
    last a session by the same rule: ``terms.session_minutes_of_launch``)."""
    return StudyTerms.of_settings(settings, session_minutes_of_launch(settings, "prolific", keep_rule)).as_json()


def session_reward_cents(settings: Settings, currency: str, reward_cents: int, keep_rule: str) -> int:
    """A simulated batch's reward: ``reward_cents`` (the simulation's, a turn's by default), raised for places that
    last a session to Prolific's least on the session's minutes (or the lab's own hourly floor,
    TURKFLOW_PROLIFIC_MIN_HOURLY_CENTS), which ``batch launch`` requires of a lab."""
    minutes = session_minutes_of_launch(settings, "prolific", keep_rule)
    if not minutes:
        return reward_cents
    return max(reward_cents, least_reward_cents(rules.least_hourly_cents(currency, settings.prolific_min_hourly_cents),
                                                minutes))


def room_for_a_session(settings: Settings, batch_id: int, role: str) -> bool:
    """Whether the role's study has a free place for a newcomer, counted as the provider keeps its places
    (``provider.places_wanted``): the fake's places follow only when the provider next looks."""
    from turkflow.db import session_scope
    from turkflow.hits.prolific.provider import places_wanted
    from turkflow.models import utcnow

    with session_scope(settings.database_url) as session:
        return places_wanted(session, batch_id, role, utcnow(), sessions=True) > 0


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
        "qualified_by": QUALIFIED_BY,
    }



def settle(settings: Settings, on: ProlificCrowd, outcome: Any, rounds: int = 10) -> dict[str, Any]:
    """Once the crowd is done: the poller's rounds (what beat runs, with no review delay, and the payments
    it asks for), until nothing changes; then whether every stored turn was paid exactly once, and every
    bonus paid once or left for a person (as ``turkflow prolific bonuses`` lists them once
    TURKFLOW_PROLIFIC_BONUS_UNKNOWN_AFTER_SECONDS has passed), with the reasons. Counts only: the same seed
    gives the same numbers; the bonus ids and reasons in full are in ``left_for_a_person``."""
    from datetime import timedelta

    from sqlmodel import select

    from turkflow import pipeline
    from turkflow.db import session_scope
    from turkflow.hits import registry
    from turkflow.hits.prolific import places, sync
    from turkflow.hits.prolific.provider import BonusOutcomeUnknown
    from turkflow.models import (Assignment, Bonus, BonusKind, Conversation, Hit, ProlificPlace, Turn, TurnStatus,
                                 utcnow)

    now_due = settings.model_copy(update={"prolific_approve_after_seconds": 0})
    providers = registry.providers(now_due)
    provider = providers.get("prolific")
    used = 0
    for used in range(1, rounds + 1):
        found = sync.poll(now_due, provider)
        for bonus_id in found.reward_bonuses:
            pipeline.pay_bonus(now_due, providers, bonus_id)
        for bonus_id in found.claimed_bonuses:
            try:
                pipeline.pay_bonus(now_due, providers, bonus_id)
            except BonusOutcomeUnknown:
                pass
        if not found and not found.approvals_asked:
            break
    fake, batch_id = on.fake, outcome.batch_id
    with session_scope(settings.database_url) as session:
        turns = session.exec(
            select(Turn.id, places.SUBMISSION, Assignment.status).join(Hit, Hit.turn_id == Turn.id)
            .join(Assignment, Assignment.hit_id == Hit.id).join(Conversation, Conversation.id == Turn.conversation_id)
            .outerjoin(ProlificPlace, ProlificPlace.id == Assignment.place_id)
            .where(Conversation.batch_id == batch_id, Turn.status == TurnStatus.submitted,
                   Assignment.worker_id == Turn.worker_id, Assignment.status != "abandoned")).all()
        bonuses = session.exec(
            select(Bonus, places.SUBMISSION).join(Assignment, Assignment.id == Bonus.assignment_id)
            .outerjoin(ProlificPlace, ProlificPlace.id == Assignment.place_id)
            .join(Turn, Turn.id == Bonus.turn_id).join(Conversation, Conversation.id == Turn.conversation_id)
            .where(Conversation.batch_id == batch_id)).all()
        sessions = len(session.exec(select(ProlificPlace.id).where(ProlificPlace.batch_id == batch_id)).all())
    paid = Counter((p.bulk_id, p.submission_id) for p in fake.payments)
    # a submission's reward: approved on Prolific, or paid as a bonus (a session place's, once for all its turns)
    reward_paid = Counter(submission_id for bonus, submission_id in bonuses if bonus.kind == BonusKind.reward
                          for _ in range(paid[(bonus.external_id, submission_id)]))
    ways: Counter[str] = Counter()
    times_paid: Counter[int] = Counter()
    for _, submission_id, status in turns:
        approved = fake.submissions[submission_id].status == "APPROVED"
        count = int(approved) + reward_paid[submission_id]
        times_paid[count] += 1
        ways["approved after timing out" if approved and status == "approved" and submission_id in outcome.timed_out_after_writing
             else "approved" if approved else "reward paid as a bonus" if count else str(status)] += 1
    stuck = sync.stuck_bonuses(settings, provider, batch_id=batch_id,
                               now=utcnow() + timedelta(seconds=settings.prolific_bonus_unknown_after_seconds))
    left = {s.bonus_id: s for s in stuck}
    bonus_paid: Counter[str] = Counter()
    for bonus, submission_id in bonuses:
        times = paid[(bonus.external_id, submission_id)] if bonus.external_id else 0
        bonus_paid["left for a person" if bonus.id in left and times == 0 else
                   "paid once" if times == 1 else "paid more than once" if times > 1 else "unpaid"] += 1
    return {
        "rounds": used,
        "turns_stored": len(turns),
        "session_places": sessions,  # 0: each submission was one turn
        "submissions_with_turns": len({submission_id for _, submission_id, _ in turns}),
        "turns_timed_out_after_writing": len(outcome.timed_out_after_writing),
        "turns_paid_once": times_paid[1],
        "turns_paid_more_than_once": sum(n for times, n in times_paid.items() if times > 1),
        "turns_unpaid": times_paid[0],
        "turns_by_way": dict(sorted(ways.items())),
        "bonuses": len(bonuses),
        "bonuses_by_outcome": dict(sorted(bonus_paid.items())),
        "left_for_a_person_by_cause": dict(sorted(Counter(s.cause for s in stuck).items())),
        "left_for_a_person": [{"bonus": s.bonus_id, "kind": s.kind, "amount_cents": s.amount_cents,
                               "reason": s.reason, "prolific_payments": s.prolific_payments} for s in stuck],
    }

