"""A batch's Prolific studies as the lab watches them: test or real, Prolific's status, who paused them, and
how long turns take at the median against the estimate and against Prolific's minimum pay.

Prolific judges a study's pay at the median completion time of its submissions and, when the reward then
pays under its hourly minimum (GBP 6 / USD 8), pauses the study and asks for adjustment payments (researcher
help, "Underpaying studies"). turkflow times every stored turn from the moment its participant opened it to
the moment it was stored (``Assignment.accepted_at`` to ``submitted_at``), or, where a place lasts a session,
every ended session (``ProlificPlace.started_at`` to ``ended_at``); Prolific's clock also counts the
way from Prolific to our page and back, a few seconds more. ``warning`` speaks up well before Prolific would:
at ``WARN_AT`` of the time at which the reward stops paying Prolific's minimum. Read from our records only:
no call to Prolific.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime
from typing import Optional

from sqlmodel import Session, col, select

from turkflow.hits import money
from turkflow.hits.prolific import rules
from turkflow.hits.prolific.terms import StudyTerms
from turkflow.models import Assignment, Batch, Hit, ProlificPlace, ProlificStudy

WARN_AT = 0.8  # of the median time at which Prolific would find the study underpaying
TIMED_ENOUGH = 3  # stored turns before a median says anything


@dataclass(frozen=True)
class StudyView:
    role: str
    study_id: Optional[str]
    test: bool
    status: Optional[str]  # Prolific's, when turkflow last looked
    paused_elsewhere: bool  # paused, and not by turkflow: by Prolific (underpaying) or a person
    ended: bool
    turns_timed: int
    median_minutes: Optional[float]
    estimated_minutes: int
    underpaid_after_minutes: float  # the median at which the reward pays under Prolific's minimum an hour
    reward_cents: int
    currency: str

    @property
    def warning(self) -> Optional[str]:
        """What the lab should hear about the study's timing now (None: nothing)."""
        if self.paused_elsewhere:
            return ("paused on Prolific, not by turkflow (Prolific pauses a study that pays under its minimum at "
                    "its median time, and asks for adjustment payments); turkflow leaves it paused: look in "
                    "Prolific's app, and resume it there once settled")
        if self.median_minutes is None:
            return None
        at = f"{self.median_minutes:.1f} minutes a turn at the median"
        if self.median_minutes >= self.underpaid_after_minutes:
            return (f"{at}: {money.shown(self.reward_cents, self.currency)} pays under Prolific's minimum then; "
                    "Prolific pauses such a study and asks for adjustment payments")
        if self.median_minutes >= WARN_AT * self.underpaid_after_minutes:
            return (f"{at}, near the {self.underpaid_after_minutes:.1f} at which "
                    f"{money.shown(self.reward_cents, self.currency)} pays under Prolific's minimum, when Prolific "
                    "pauses the study: raise the reward of the next batch, or shorten the turns")
        if self.median_minutes > self.estimated_minutes:
            return f"{at}, above the {self.estimated_minutes} minutes participants were told"
        return None


def study_views(session: Session, batch: Batch) -> list[StudyView]:
    """Each role's study of a Prolific batch, with its turns' median time (our records only)."""
    terms = StudyTerms.from_json(batch.platform_terms)
    hourly = rules.least_hourly_cents(batch.currency)
    views = []
    for row in session.exec(select(ProlificStudy).where(ProlificStudy.batch_id == batch.id)
                            .order_by(ProlificStudy.id)):
        timed = select(ProlificPlace.started_at, ProlificPlace.ended_at).where(
            ProlificPlace.study_id == row.study_id, col(ProlificPlace.ended_at).is_not(None)) \
            if terms and terms.sessions else \
            select(Assignment.accepted_at, Assignment.submitted_at).join(Hit, Hit.id == Assignment.hit_id).where(
                Hit.external_id == row.study_id, col(Assignment.submitted_at).is_not(None))
        taken = [_minutes(start, end) for start, end in session.exec(timed)]
        views.append(StudyView(
            role=row.role, study_id=row.study_id, test=bool(terms and terms.test), status=row.seen_status,
            paused_elsewhere=row.seen_status == "PAUSED" and row.paused_at is None and row.ended_at is None,
            ended=row.ended_at is not None, turns_timed=len(taken),
            median_minutes=statistics.median(taken) if len(taken) >= TIMED_ENOUGH else None,
            estimated_minutes=terms.study_minutes[0] if terms else 0,
            underpaid_after_minutes=batch.reward_cents * 60 / hourly, reward_cents=batch.reward_cents,
            currency=batch.currency))
    return views


def _minutes(start: datetime, end: datetime) -> float:
    return max((end - start).total_seconds(), 0.0) / 60


@dataclass(frozen=True)
class SpendApart:
    """Prolific's spend, real studies apart from test studies (whose charges Prolific refunds within 24
    hours): each kind's batches and their sum."""

    real: money.Spend
    test: money.Spend
    real_batches: list[int]
    test_batches: list[int]
    currency: str


def spend_apart(session: Session) -> SpendApart:
    """Every Prolific batch's spend, summed apart for real and test studies (as each batch was launched)."""
    sums = {True: [0, 0, 0, 0], False: [0, 0, 0, 0]}
    batches: dict[bool, list[int]] = {True: [], False: []}
    currency = "GBP"
    for batch in session.exec(select(Batch).where(Batch.provider == "prolific").order_by(Batch.id)):
        test = bool((StudyTerms.from_json(batch.platform_terms) or _REAL_TERMS).test)
        spent = money.spend(session, batch_id=batch.id)
        for n, cents in enumerate((spent.rewards_cents, spent.bonuses_cents, spent.fees_cents, spent.pending_cents)):
            sums[test][n] += cents
        batches[test].append(batch.id)
        currency = batch.currency
    return SpendApart(money.Spend(*sums[False]), money.Spend(*sums[True]), batches[False], batches[True], currency)


# A batch launched before its terms were stored: real studies (test ones needed a setting turned on).
_REAL_TERMS = StudyTerms(test=False, public_url="")
