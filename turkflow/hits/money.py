"""Money: what a batch will cost before launch, and what turkflow actually spent, in integer cents.

MTurk charges a fee on every reward and every bonus: 20% of the amount, another 20% on rewards of HITs
with 10 or more assignments (turn HITs have one), at least $0.01 per assignment or bonus payment
(mturk.com/pricing). Prolific charges a service fee on every reward and bonus at the rate of
TURKFLOW_PROLIFIC_FEE_PERCENT (an assumption to check on Prolific's pricing page), kept on each batch as
launched (``Batch.fee_percent``), and counted in a Prolific batch's budget. The local provider has no
fees. Fractions of a cent are rounded half up, which is an assumption: neither platform documents its
rounding.

Spend comes from our own records, which the MTurk reconciler settles against MTurk's (an assignment
approved or rejected on MTurk is approved or rejected here), so a reward counts once its assignment is
approved and a bonus once it is paid; submitted work and recorded bonuses are shown as pending. A kept
turn whose Prolific submission ended unpaid has its reward paid as a bonus (``BonusKind.reward``), which
counts as a reward. A Prolific session place is paid its reward once, not each turn written in it: it
counts once approved (pending once finished), or as its reward bonus.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Optional

from sqlalchemy import func
from sqlmodel import Session, col, select

from turkflow.hits.provider import AGENT
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    Bonus,
    BonusKind,
    BonusStatus,
    Conversation,
    Hit,
    PlaceStatus,
    ProlificPlace,
    Turn,
)

MTURK_FEE = Decimal("0.20")
MTURK_LARGE_HIT_FEE = Decimal("0.20")  # extra, on rewards of HITs with this many assignments or more:
MTURK_LARGE_HIT_ASSIGNMENTS = 10
MTURK_MIN_FEE_CENTS = 1


def fee_cents(provider: str, amount_cents: int, assignments: int = 1, fee_percent: float = 0.0) -> int:
    """The platform's fee on one reward (of a HIT with ``assignments`` assignments) or one bonus;
    ``fee_percent`` is Prolific's rate."""
    if amount_cents <= 0:
        return 0
    if provider == "prolific":
        return percent_cents(amount_cents, fee_percent)
    if provider != "mturk":
        return 0
    rate = MTURK_FEE + (MTURK_LARGE_HIT_FEE if assignments >= MTURK_LARGE_HIT_ASSIGNMENTS else 0)
    fee = (Decimal(amount_cents) * rate).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return max(int(fee), MTURK_MIN_FEE_CENTS)


def percent_cents(amount_cents: int, percent: float) -> int:
    """``percent`` of an amount, to the cent, half up."""
    share = Decimal(amount_cents) * Decimal(str(percent)) / 100
    return int(share.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def fee_with_vat(fee_percent: float, vat_percent: float) -> float:
    """Prolific's service fee with the VAT charged on it, as one rate on rewards and bonuses (33.33% with 20%
    VAT on it is 39.996%): a batch keeps it as ``Batch.fee_percent``, so it is counted wherever the fee is."""
    return float(Decimal(str(fee_percent)) * (1 + Decimal(str(vat_percent)) / 100))


def least_reward_cents(hourly_cents: int, minutes: int) -> int:
    """The smallest reward for a task of ``minutes`` that pays ``hourly_cents`` an hour (Prolific's rule)."""
    return -(-hourly_cents * minutes // 60)


def usd(cents: int) -> str:
    """Cents as MTurk's CurrencyAmount string: 20 → "0.20"."""
    if cents < 0:
        raise ValueError("an amount of money cannot be negative")
    return f"{cents // 100}.{cents % 100:02d}"


SYMBOLS = {"USD": "$", "GBP": "£", "EUR": "€"}


def shown(cents: int, currency: str = "USD") -> str:
    """An amount as people read it in its currency: 1234 in GBP is "£12.34", in USD "$12.34"; a currency
    without a symbol here is named after the amount ("12.34 CHF"). Prolific pays in its workspace's currency,
    MTurk and the local queue in USD."""
    sign, cents = ("-" if cents < 0 else ""), abs(cents)
    text = f"{cents // 100:,}.{cents % 100:02d}"
    symbol = SYMBOLS.get(currency.upper())
    return f"{sign}{symbol}{text}" if symbol else f"{sign}{text} {currency.upper()}"


def cents_from_usd(amount: str) -> int:
    """MTurk's CurrencyAmount string back to cents: "10000.00" → 1000000."""
    return int((Decimal(amount) * 100).to_integral_value(rounding=ROUND_HALF_UP))


# ---- before launch -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CostEstimate:
    provider: str
    conversations: int
    turns: int  # turn HITs paid for
    bonuses: int  # bonuses paid
    rewards_cents: int
    bonuses_cents: int
    fees_cents: int
    assumptions: list[str] = field(default_factory=list)

    @property
    def total_cents(self) -> int:
        return self.rewards_cents + self.bonuses_cents + self.fees_cents


def estimate(provider: str, conversations: int, max_turns: int, reward_cents: int, bonus_cents: int, *,
             turns_per_conversation: Optional[int] = None, bonus_share: float = 1.0,
             budget_cents: Optional[int] = None, fee_percent: float = 0.0, currency: str = "USD",
             no_bonus: Optional[str] = None) -> CostEstimate:
    """The cost of a batch, by default the most it can cost: every conversation runs to ``max_turns`` and
    every turn earns a bonus. A budget caps rewards plus bonuses (MTurk's fees come on top; Prolific's
    service fee, ``fee_percent`` with its VAT, is inside the budget, as the running batch counts it, so the
    estimate never exceeds the budget). Prolific's fee is rounded once on the total, MTurk's per payment.
    ``no_bonus``: why the batch pays no bonus (a protocol without ratings, such as STAR); none is budgeted."""
    if not 0.0 <= bonus_share <= 1.0:
        raise ValueError("bonus share must be between 0 and 1")
    per_conversation = min(turns_per_conversation or max_turns, max_turns)
    turns = conversations * per_conversation
    assumptions = [
        f"{per_conversation} turns per conversation"
        + (" (the maximum; a conversation may end earlier)" if per_conversation == max_turns else ""),
        no_bonus or f"{bonus_share:.0%} of turns earn the {shown(bonus_cents, currency)} bonus",
    ]
    if no_bonus:
        bonus_cents, bonus_share = 0, 0.0

    def cost(turns: int) -> CostEstimate:
        bonuses = int(Decimal(turns) * Decimal(str(bonus_share)))
        if provider == "prolific":
            fees = percent_cents(turns * reward_cents + bonuses * bonus_cents, fee_percent)
        else:
            fees = (turns * fee_cents(provider, reward_cents) + bonuses * fee_cents(provider, bonus_cents))
        return CostEstimate(provider=provider, conversations=conversations, turns=turns, bonuses=bonuses,
                            rewards_cents=turns * reward_cents, bonuses_cents=bonuses * bonus_cents,
                            fees_cents=fees, assumptions=assumptions)

    def counted(estimate: CostEstimate) -> int:  # what the running batch holds against the budget
        inside = estimate.fees_cents if provider == "prolific" else 0
        return estimate.rewards_cents + estimate.bonuses_cents + inside

    found = cost(turns)
    if budget_cents is not None and counted(found) > budget_cents:
        low, high = 0, turns  # the most turns the budget pays for
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if counted(cost(middle)) <= budget_cents else (low, middle - 1)
        found = cost(low)
        assumptions.append(f"the budget of {shown(budget_cents, currency)} stops the batch after about "
                           f"{low} turns")
    if provider == "mturk":
        assumptions.append("MTurk fee: 20% of each reward and bonus, at least $0.01 each (one-assignment HITs)")
    elif provider == "prolific":
        assumptions.append(f"Prolific service fee: {fee_percent:g}% of each reward and bonus, with its VAT "
                           "(TURKFLOW_PROLIFIC_FEE_PERCENT, TURKFLOW_PROLIFIC_VAT_PERCENT; check Prolific's "
                           "pricing page for your rate)")
    else:
        assumptions.append(f"the {provider} provider charges no fees")
    return found


# ---- after the fact ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spend:
    rewards_cents: int = 0  # rewards of approved assignments
    bonuses_cents: int = 0  # bonuses paid
    fees_cents: int = 0  # the platform's fees on both
    pending_cents: int = 0  # submitted, not yet approved, and recorded bonuses not yet paid (with fees)

    @property
    def total_cents(self) -> int:
        return self.rewards_cents + self.bonuses_cents + self.fees_cents


def spend(session: Session, *, batch_id: Optional[int] = None, worker_id: Optional[int] = None,
          turn_id: Optional[int] = None, currency: Optional[str] = None) -> Spend:
    """Money spent (and pending) on a batch, a worker or a turn, in batches paid in ``currency`` if given; no
    filter means everything."""
    rewards = fees = pending = bonuses = 0
    reward_rows = session.exec(
        _scoped(select(Assignment.status, Batch.provider, Batch.fee_percent, Batch.reward_cents, func.count())
                .select_from(Assignment).join(Hit, Hit.id == Assignment.hit_id)
                .join(Turn, Turn.id == Hit.turn_id), batch_id, turn_id, currency)
        .where(col(Assignment.status).in_([AssignmentStatus.approved, AssignmentStatus.submitted]),
               Hit.provider != AGENT,  # an agent's turn is never paid
               col(Assignment.place_id).is_(None),  # a turn of a session place: the place is paid
               *([Assignment.worker_id == worker_id] if worker_id is not None else []))
        .group_by(Assignment.status, Batch.provider, Batch.fee_percent, Batch.reward_cents)
    ).all()
    for status, provider, fee_percent, reward, count in reward_rows:
        fee = _fees(provider, reward, count, fee_percent)
        if status == AssignmentStatus.approved:
            rewards += count * reward
            fees += fee
        else:
            pending += count * reward + fee
    place_rows = [] if turn_id is not None else session.exec(
        _scoped_places(select(ProlificPlace.status, Batch.fee_percent, Batch.reward_cents, func.count())
                       .select_from(ProlificPlace).join(Batch, Batch.id == ProlificPlace.batch_id), batch_id, currency)
        .where(col(ProlificPlace.status).in_([PlaceStatus.approved, PlaceStatus.finished]),
               *([ProlificPlace.worker_id == worker_id] if worker_id is not None else []))
        .group_by(ProlificPlace.status, Batch.fee_percent, Batch.reward_cents)
    ).all()
    for status, fee_percent, reward, count in place_rows:  # a session place's reward (one left is owed: a bonus)
        fee = _fees("prolific", reward, count, fee_percent)
        if status == PlaceStatus.approved:
            rewards += count * reward
            fees += fee
        else:
            pending += count * reward + fee
    bonus_rows = session.exec(
        _scoped(select(Bonus.status, Bonus.kind, Batch.provider, Batch.fee_percent, Bonus.amount_cents,
                       func.count())
                .select_from(Bonus).join(Turn, Turn.id == Bonus.turn_id), batch_id, turn_id, currency)
        .where(*([Bonus.worker_id == worker_id] if worker_id is not None else []))
        .group_by(Bonus.status, Bonus.kind, Batch.provider, Batch.fee_percent, Bonus.amount_cents)
    ).all()
    for status, kind, provider, fee_percent, amount, count in bonus_rows:
        fee = _fees(provider, amount, count, fee_percent)
        if status == BonusStatus.paid and kind == BonusKind.reward:  # a kept turn's reward, paid as a bonus
            rewards += count * amount
            fees += fee
        elif status == BonusStatus.paid:
            bonuses += count * amount
            fees += fee
        else:
            pending += count * amount + fee
    return Spend(rewards_cents=rewards, bonuses_cents=bonuses, fees_cents=fees, pending_cents=pending)


def _fees(provider: str, amount_cents: int, count: int, fee_percent: float) -> int:
    """The fee on ``count`` payments of one amount: Prolific's rounded once on their total (33.33% of 12
    bonuses of 8 cents is 32 cents, not 12 x 3), MTurk's per payment (each has its one-cent minimum)."""
    if provider == "prolific":
        return percent_cents(count * amount_cents, fee_percent)
    return count * fee_cents(provider, amount_cents, fee_percent=fee_percent)


@dataclass(frozen=True)
class ChargedFees:
    """What Prolific said it charges on a batch's bonus payments (its set-up answer's ``fees`` and ``vat``)
    beside what turkflow counts for the same amounts at the batch's fee rate."""

    amount_cents: int
    charged_cents: int  # Prolific's fees and VAT
    counted_cents: int  # Batch.fee_percent of the amount, as turkflow's estimates, budget and spend count


def charged_bonus_fees(session: Session, batch_id: int) -> Optional[ChargedFees]:
    """Prolific's own fees on the batch's bonus payments so far (None: none paid through Prolific yet)."""
    from turkflow.models import Event

    batch = session.get(Batch, batch_id)
    sent = session.exec(select(Event.data).where(Event.kind == "prolific_bonus_sent",
                                                 Event.batch_id == batch_id)).all()
    sent = [data for data in sent if "fees_cents" in data]
    if not sent:
        return None
    amount = sum(int(data["amount_cents"]) for data in sent)
    return ChargedFees(amount_cents=amount,
                       charged_cents=sum(int(data["fees_cents"]) + int(data["vat_cents"]) for data in sent),
                       counted_cents=sum(percent_cents(int(data["amount_cents"]), batch.fee_percent)
                                         for data in sent))


@dataclass(frozen=True)
class SentBonus:
    """A bonus handed to a platform's non-idempotent pay call whose payment the platform does not show yet."""

    bonus_id: int
    amount_cents: int
    payment_id: Optional[str]  # the platform's id of the (bulk) payment
    sent_at: datetime


def sent_bonuses(session: Session, batch_id: int) -> list[SentBonus]:
    """Prolific pays within minutes, and the poller settles each of these from the submission then; one
    that stays means a lost request, for a person to look up by its payment id (it is never paid again)."""
    rows = session.exec(
        _scoped(select(Bonus.id, Bonus.amount_cents, Bonus.external_id, Bonus.pay_claimed_at).select_from(Bonus)
                .join(Turn, Turn.id == Bonus.turn_id), batch_id, None)
        .where(Bonus.status == BonusStatus.pending, col(Bonus.pay_claimed_at).is_not(None)).order_by(Bonus.id)
    ).all()
    return [SentBonus(*row) for row in rows]


def _scoped_places(query, batch_id: Optional[int], currency: Optional[str]):  # noqa: ANN001, ANN202 - a Select
    """A query over session places and their batch, narrowed to a batch or a currency."""
    if batch_id is not None:
        query = query.where(ProlificPlace.batch_id == batch_id)
    if currency is not None:
        query = query.where(Batch.currency == currency)
    return query


def _scoped(query, batch_id: Optional[int], turn_id: Optional[int],  # noqa: ANN001, ANN202 - a Select
            currency: Optional[str] = None):
    """Join a query that already reaches ``Turn`` on to its batch and apply the batch, turn and currency
    filters."""
    query = (query.join(Conversation, Conversation.id == Turn.conversation_id)
             .join(Batch, Batch.id == Conversation.batch_id))
    if batch_id is not None:
        query = query.where(Batch.id == batch_id)
    if turn_id is not None:
        query = query.where(Turn.id == turn_id)
    if currency is not None:
        query = query.where(Batch.currency == currency)
    return query
