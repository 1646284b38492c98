"""Rater reliability: raters can be bad too, and a bad rater blocks honest authors.

Two measures live here.

**Trust, per rating (the monitor's).** Each turn is rated once (by the next worker), so no two raters judge
the same turn; they do judge the same *authors*, and each rating holds two answers (relevant, useful) that
an attentive rater gives together. The model is Dawid and Skene's with rater communities (Venanzi et al.
2014, "Community-based Bayesian aggregation"; MACE, Hovy et al. 2013, has the same "spammer" idea), with
the author's record standing in for the several annotations per item those models have. A rater belongs to
one of three communities, each with its confusion matrix over the four answer pairs: *attentive* (the truth
about the turn, with a small slip on each question), *careless* (any pair, evenly: a coin) and *harsh* (no/no
whatever the turn). Whether a turn is good is unknown; its prior is its author's turn-good rate as the
other, trusted ratings of the author show it. Every rating adds, to its rater's record, the log-likelihood
ratio of each bad community against the attentive one (one online E-step), so the cost per rating is
constant; the posterior of the attentive community is the rater's *trust*, the weight their ratings get.
A rater who is careless or harsh with posterior ``identify_at`` (0.99: an attentive rater who happens to
meet only spammers early says no/no too, and stays under it) after ``min_ratings`` ratings is identified:
their ratings stop counting and they earn no bonus until a person trusts them again. Split answers
(relevant but not useful) are the careless rater's tell: an attentive rater gives one for about one turn in
ten, a coin for one in two. ``Model`` holds the constants; the functions are pure and replayed offline by
the simulator (``turkflow.simulator.policies``) exactly as the monitor runs them.

**Gold, at onboarding.** A rater of unknown record gets only the prior, so the first ratings a newcomer
receives are judged as if every rater were attentive, and an honest writer who meets a careless rater
early is blocked. Rating example turns whose answer is known (``turkflow.quality.gold``) gives every rater
a record before the batch starts: ``learn_gold`` is ``learn`` with the turn's quality known (1.0 or 0.0),
counted in ``gold``, not in ``ratings``. Gold answers count towards ``min_ratings``, so a rater whose gold
answers alone make them ``identify_at`` likely careless or harsh starts identified (trust 0: they may
still write, their ratings just do not count).

**Agreement, daily (the dashboard's).** A rater's agreement is the chance that another rater of the same
author gave the same yes/no answer, averaged over both questions and all their ratings: 1.0 agrees with
everyone, 0.5 is a coin, 0.0 says the opposite of everyone else. It reads the most recent ratings only (a
primary-key range and two grouped queries), so a daily run costs the same at a million turns as at a
thousand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import date
from typing import Any, Iterable, Optional

from sqlalchemy import Integer, bindparam, cast, delete, func, insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from turkflow.access import Access, of_workers
from turkflow.config import Settings
from turkflow.db import savepoint
from turkflow.models import RaterAgreement, RaterReliability, Rating, utcnow


# ---- trust: the monitor's online estimate of each rater ------------------------------------------------

# The four answer pairs a rating can hold, (relevant, useful): an index into a community's confusion row.
ANSWERS = ("yes/yes", "yes/no", "no/yes", "no/no")
ATTENTIVE = "attentive"
CARELESS = "careless"
HARSH = "harsh"
VERDICTS = (CARELESS, HARSH)


def answer_of(relevant: bool, useful: bool) -> int:
    return (0 if relevant else 2) + (0 if useful else 1)


@dataclass(frozen=True)
class Model:
    """The constants of the trust model (``Model.of(settings)`` reads the TURKFLOW_RATER_* settings)."""

    slip: float = 0.05  # an attentive rater's chance of answering one question against the truth
    careless_prior: float = 0.15  # the share of raters expected careless (answering at random) ...
    harsh_prior: float = 0.05  # ... and harsh (answering no to nearly everything); the rest are attentive
    typical_quality: float = 0.75  # a new author's turn-good rate ...
    quality_ratings: float = 2.0  # ... held as strongly as this many trusted ratings
    identify_at: float = 0.99  # a rater this likely careless or harsh is identified ...
    min_ratings: int = 6  # ... once they have given this many ratings (gold answers included)
    spammer_quality: float = 0.10  # the sequential test's two writers: a spammer's turn-good rate ...
    honest_quality: float = 0.85  # ... and the lowest an honest writer's is

    @classmethod
    def of(cls, settings: Settings) -> "Model":
        return cls(slip=settings.rater_slip, identify_at=settings.rater_identify_at,
                   min_ratings=settings.rater_min_ratings)

    def answer_chances(self, community: str, good: bool) -> tuple[float, ...]:
        """P(each answer pair | the turn is good or not) for a rater of ``community``."""
        if community == CARELESS:
            return (0.25, 0.25, 0.25, 0.25)
        return tuple(self.attentive_chance(answer, good if community == ATTENTIVE else False)
                     for answer in range(4))

    def attentive_chance(self, answer: int, good: bool) -> float:
        """P(answer | the turn is good or not, the rater attentive): each question right but for a slip (a
        harsh rater answers as an attentive one would of a bad turn, whatever the turn)."""
        relevant, useful = answer < 2, answer % 2 == 0
        right = (relevant == good) + (useful == good)
        return (1 - self.slip) ** right * self.slip ** (2 - right)


@dataclass(frozen=True)
class RaterRecord:
    """What the ratings a rater gave so far say about them: how many, the log-likelihood ratio of being
    careless and of being harsh against being attentive (summed over their ratings), the answer pairs they
    gave, and ``verdict`` once identified (careless, harsh)."""

    ratings: int = 0
    careless: float = 0.0
    harsh: float = 0.0
    answers: tuple[int, int, int, int] = (0, 0, 0, 0)
    verdict: Optional[str] = None
    gold: int = 0  # gold turns rated at onboarding (their answers are not in ``answers``)

    def posterior(self, model: Model) -> dict[str, float]:
        """P(community | their ratings) for attentive, careless and harsh."""
        weights = {ATTENTIVE: 1 - model.careless_prior - model.harsh_prior,
                   CARELESS: model.careless_prior * math.exp(min(self.careless, 700.0)),
                   HARSH: model.harsh_prior * math.exp(min(self.harsh, 700.0))}
        total = sum(weights.values())
        return {name: weight / total for name, weight in weights.items()}

    def trust(self, model: Model) -> float:
        """The chance this rater is attentive; 0 once identified (their ratings stop counting)."""
        return 0.0 if self.verdict else self.posterior(model)[ATTENTIVE]


def answer_chance(model: Model, community: str, answer: int, quality: float) -> float:
    """P(answer | the author's turn-good rate ``quality``, a rater of ``community``)."""
    return (quality * model.answer_chances(community, True)[answer]
            + (1 - quality) * model.answer_chances(community, False)[answer])


def learn(model: Model, record: RaterRecord, answer: int, quality: float) -> RaterRecord:
    """The rater's record after one more rating of an author whose turn-good rate is ``quality`` (as the
    *other* raters show it): each community's likelihood of the answer, against the attentive one's, added
    to the rater's evidence. A rater is identified at most once; a person clears it (``trust_again``)."""
    answers = tuple(n + (i == answer) for i, n in enumerate(record.answers))
    return _learned(model, replace(record, ratings=record.ratings + 1, answers=answers), answer, quality)


def learn_gold(model: Model, record: RaterRecord, answer: int, good: bool) -> RaterRecord:
    """The rater's record after rating a gold turn at onboarding: ``learn`` with the turn's quality known."""
    return _learned(model, replace(record, gold=record.gold + 1), answer, 1.0 if good else 0.0)


def _learned(model: Model, counted: RaterRecord, answer: int, quality: float) -> RaterRecord:
    if counted.verdict:
        return counted
    attentive = answer_chance(model, ATTENTIVE, answer, quality)
    learned = replace(
        counted, careless=counted.careless + math.log(answer_chance(model, CARELESS, answer, quality) / attentive),
        harsh=counted.harsh + math.log(answer_chance(model, HARSH, answer, quality) / attentive))
    return replace(learned, verdict=judge_rater(model, learned))


def judge_rater(model: Model, record: RaterRecord) -> Optional[str]:
    """careless, harsh or None: identified once that community is ``identify_at`` likely, after
    ``min_ratings`` ratings and gold answers."""
    if record.ratings + record.gold < model.min_ratings:
        return None
    posterior = record.posterior(model)
    community = max((CARELESS, HARSH), key=posterior.__getitem__)
    return community if posterior[community] >= model.identify_at else None


def turn_good_chance(model: Model, answer: int) -> float:
    """What an attentive rater's answer says of the turn, from an even prior: 0.997 for yes/yes, 0.5 for a
    split answer, 0.003 for no/no (with a 5% slip)."""
    good, bad = model.attentive_chance(answer, True), model.attentive_chance(answer, False)
    return good / (good + bad)


def spammer_evidence(model: Model, answer: int) -> float:
    """What one attentive rater's answer says of the writer: log P(answer | a spammer's turn) against
    P(answer | an honest writer's), with the turn-good rates ``spammer_quality`` and ``honest_quality``
    (+1.78 for no/no, -2.11 for yes/yes, 0 for a split answer, with the defaults)."""
    return math.log(answer_chance(model, ATTENTIVE, answer, model.spammer_quality)
                    / answer_chance(model, ATTENTIVE, answer, model.honest_quality))


def author_quality(model: Model, rated: Iterable[tuple[int, float]]) -> float:
    """An author's turn-good rate from (answer, the rater's trust) pairs: the typical rate, moved by each
    rating as far as its rater is trusted."""
    weight = model.quality_ratings
    good = model.typical_quality * weight
    for answer, trust in rated:
        weight += trust
        good += trust * turn_good_chance(model, answer)
    return good / weight


def weighted_means(rated: Iterable[tuple[bool, bool, float]]) -> tuple[float, float, float]:
    """(mean relevance, mean usefulness, total weight) of (relevant, useful, trust) ratings, each counted as
    much as its rater is trusted; (0, 0, 0) when no rating counts."""
    total = rel = use = 0.0
    for relevant, useful, trust in rated:
        total += trust
        rel += trust * relevant
        use += trust * useful
    return (rel / total, use / total, total) if total else (0.0, 0.0, 0.0)


def evidence(model: Model, record: RaterRecord) -> dict[str, Any]:
    """What the review page shows of a rater: their ratings, how likely each community is, and the answer
    pairs they gave (a careless rater's are spread evenly, split answers included; a harsh one's are no/no)."""
    unjudged = replace(record, verdict=None)
    return {"ratings": record.ratings, "gold": record.gold, "verdict": record.verdict,
            "trust": round(unjudged.trust(model), 3),
            "posterior": {name: round(p, 3) for name, p in unjudged.posterior(model).items()},
            "answers": dict(zip(ANSWERS, record.answers))}


# ---- agreement: the daily run ----------------------------------------------------------------------

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


def outliers(session: Session, day: date, access: Access, limit: int = 20) -> list[RaterAgreement]:
    """The day's least agreeing raters below the floor that ``access`` may see, worst first (the ``(day,
    agreement)`` index)."""
    return list(session.exec(
        select(RaterAgreement).where(RaterAgreement.day == day, RaterAgreement.outlier,
                                     of_workers(access, RaterAgreement.rater_id))
        .order_by(RaterAgreement.agreement).limit(limit)
    ))


def summary(session: Session, day: date) -> tuple[int, float | None]:
    """How many raters the day's run judged, and their mean agreement (the yardstick for outliers)."""
    count, mean = session.exec(
        select(func.count(), func.avg(RaterAgreement.agreement)).where(RaterAgreement.day == day)
    ).one()
    return count, mean


# ---- trust, stored: one RaterReliability row per rater -------------------------------------------------

_ANSWER_COLUMNS = ("answers_yy", "answers_yn", "answers_ny", "answers_nn")
_COUNTED = ("ratings", "gold", "careless", "harsh", *_ANSWER_COLUMNS)  # what a rating adds to a record

# Built once, on the table rather than the mapped class: every rating runs them, and building a statement
# (or the ORM's bookkeeping around it) cost more than running it. Records are read as plain rows.
_TABLE = RaterReliability.__table__
_RECORDS = select(_TABLE.c.rater_id, *(_TABLE.c[name] for name in _COUNTED), _TABLE.c.verdict).where(
    _TABLE.c.rater_id.in_(bindparam("raters", expanding=True)))
_ADD = update(_TABLE).where(_TABLE.c.rater_id == bindparam("rater")).values(
    updated_at=bindparam("now"), **{name: _TABLE.c[name] + bindparam(f"add_{name}") for name in _COUNTED})
_FIRST = insert(_TABLE)
_IDENTIFY = update(_TABLE).where(_TABLE.c.rater_id == bindparam("rater"), _TABLE.c.verdict.is_(None)).values(
    verdict=bindparam("identified_as"), identified_after=bindparam("after"))


def record_of(row: Optional[RaterReliability]) -> RaterRecord:
    """The record a stored row (a ``RaterReliability`` or a row of its columns) holds."""
    if row is None:
        return RaterRecord()
    return RaterRecord(ratings=row.ratings, careless=row.careless, harsh=row.harsh,
                       answers=tuple(getattr(row, name) for name in _ANSWER_COLUMNS), verdict=row.verdict,
                       gold=row.gold)


def records(session: Session, rater_ids: Iterable[int]) -> dict[int, RaterRecord]:
    """The records of these raters (a fresh one for a rater who never rated), one primary-key read."""
    wanted = set(rater_ids)
    found = {row.rater_id: record_of(row) for row in session.execute(_RECORDS, {"raters": list(wanted)})
             } if wanted else {}
    return {rater: found.get(rater, RaterRecord()) for rater in wanted}


def add_rating(session: Session, rater_id: int, before: RaterRecord, after: RaterRecord) -> bool:
    """Store what one rating (or the gold answers of onboarding) taught about its rater (``after`` minus
    ``before``) as increments, so two reviews at once never lose one; True if this identified the rater
    (their verdict is set once)."""
    deltas = {"ratings": after.ratings - before.ratings, "gold": after.gold - before.gold,
              "careless": after.careless - before.careless, "harsh": after.harsh - before.harsh,
              **{name: a - b for name, a, b in zip(_ANSWER_COLUMNS, after.answers, before.answers)}}
    increments = {"rater": rater_id, "now": utcnow(), **{f"add_{name}": delta for name, delta in deltas.items()}}
    if session.execute(_ADD, increments).rowcount == 0:
        try:
            with savepoint(session):
                session.execute(_FIRST, {"rater_id": rater_id, "updated_at": increments["now"], **deltas})
        except IntegrityError:  # the rater's first two ratings were reviewed at once
            session.execute(_ADD, increments)
    if after.verdict is None or before.verdict is not None:
        return False
    return session.execute(_IDENTIFY, {"rater": rater_id, "identified_as": after.verdict,
                                       "after": after.ratings}).rowcount == 1


def trust_again(session: Session, rater_id: int) -> None:
    """A person decided the rater's ratings count: a fresh record."""
    session.execute(delete(RaterReliability).where(RaterReliability.rater_id == rater_id))


def identified(session: Session, access: Access, limit: int = 500) -> list[RaterReliability]:
    """Raters identified as careless or harsh that ``access`` may see, most recently first (the verdict index)."""
    return list(session.exec(
        select(RaterReliability).where(col(RaterReliability.verdict).is_not(None),
                                       of_workers(access, RaterReliability.rater_id))
        .order_by(col(RaterReliability.updated_at).desc()).limit(limit)
    ))
