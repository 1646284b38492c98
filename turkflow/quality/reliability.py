"""Rater reliability: raters can be bad too, and a bad rater blocks honest authors.

Each turn is rated once (by the next worker), so raters cannot be compared on the same turn; they can on
the same *author*. A rater's agreement is the chance that another rater of the same author gave the same
yes/no answer, averaged over both questions and all their ratings: 1.0 agrees with everyone, 0.5 is a coin,
0.0 says the opposite of everyone else. It reads the most recent ratings only (a primary-key range and
two grouped queries), so a daily run costs the same at a million turns as at a thousand.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from sqlalchemy import Integer, cast, delete, func
from sqlmodel import Session, select

from turkflow.models import RaterAgreement, Rating


@dataclass(frozen=True)
class Tally:
    """How many ratings, and how many said relevant and useful."""

    count: int
    relevant: int
    useful: int


def agreement_scores(pairs: dict[tuple[int, int], Tally], authors: dict[int, Tally]) -> dict[int, tuple[int, float]]:
    """(compared ratings, agreement) per rater from tallies per (rater, author) and per author."""
    agreeing: dict[int, float] = {}
    compared: dict[int, int] = {}
    for (rater, author), mine in pairs.items():
        total = authors[author]
        others = total.count - mine.count
        if others == 0:
            continue
        for said_yes, all_yes in ((mine.relevant, total.relevant), (mine.useful, total.useful)):
            others_yes = (all_yes - said_yes) / others
            agreeing[rater] = agreeing.get(rater, 0.0) + said_yes * others_yes + (mine.count - said_yes) * (1 - others_yes)
        compared[rater] = compared.get(rater, 0) + mine.count
    return {rater: (n, agreeing[rater] / (2 * n)) for rater, n in compared.items()}


def recent_tallies(session: Session, ratings: int) -> tuple[dict[tuple[int, int], Tally], dict[int, Tally]]:
    newest = session.exec(select(func.max(Rating.id))).one() or 0
    in_window = Rating.id > newest - ratings
    relevant = func.sum(cast(Rating.relevant, Integer))
    useful = func.sum(cast(Rating.useful, Integer))
    pairs = {
        (rater, author): Tally(n, r, u)
        for rater, author, n, r, u in session.exec(
            select(Rating.rater_id, Rating.author_id, func.count(), relevant, useful)
            .where(in_window).group_by(Rating.rater_id, Rating.author_id)
        )
    }
    authors: dict[int, Tally] = {}
    for (_, author), tally in pairs.items():
        seen = authors.get(author, Tally(0, 0, 0))
        authors[author] = Tally(seen.count + tally.count, seen.relevant + tally.relevant, seen.useful + tally.useful)
    return pairs, authors


def record_agreements(session: Session, day: date, *, ratings: int, min_ratings: int,
                      floor: float) -> list[RaterAgreement]:
    """Store the day's agreement of every rater with enough comparable ratings; rerunning replaces it."""
    scores = agreement_scores(*recent_tallies(session, ratings))
    session.execute(delete(RaterAgreement).where(RaterAgreement.day == day))
    rows = [
        RaterAgreement(day=day, rater_id=rater, compared=n, agreement=round(score, 4), outlier=score < floor)
        for rater, (n, score) in sorted(scores.items())
        if n >= min_ratings
    ]
    session.add_all(rows)
    session.flush()
    return rows


def latest_day(session: Session) -> date | None:
    return session.exec(select(func.max(RaterAgreement.day))).one()


def outliers(session: Session, day: date, limit: int = 20) -> list[RaterAgreement]:
    """The day's least agreeing raters below the floor, worst first (the ``(day, agreement)`` index)."""
    return list(session.exec(
        select(RaterAgreement).where(RaterAgreement.day == day, RaterAgreement.outlier)
        .order_by(RaterAgreement.agreement).limit(limit)
    ))


def summary(session: Session, day: date) -> tuple[int, float | None]:
    """How many raters the day's run judged, and their mean agreement (the yardstick for outliers)."""
    count, mean = session.exec(
        select(func.count(), func.avg(RaterAgreement.agreement)).where(RaterAgreement.day == day)
    ).one()
    return count, mean
