"""Prolific's business rules for a study, checked before anything is created or paid.

Prolific refuses a study that breaks them, but only when it is created or published, which for a batch
happens inside a Celery task after ``batch launch`` said it had launched. Checked here first, each broken
rule is one line naming the setting or option to change. The rules, as Prolific documents them:

- **Pay.** At least GBP 6 / USD 8 an hour at the study's estimated completion time (researcher help,
  "Prolific's payment principles"); ``MIN_HOURLY`` by the workspace's currency. A lab may ask more of itself
  with ``TURKFLOW_PROLIFIC_MIN_HOURLY_CENTS``; the higher of the two applies.
- **Maximum time.** "The min value is calculated as two minutes plus two times the estimated time plus two
  times the square root of the estimated time" (the API's description of ``maximum_allowed_time``), and it is
  always under 24 hours (``LONGEST_MAXIMUM_MINUTES``).
- **Estimated time and places.** A study takes at least one minute and at least one place.
- **Funds.** A study is published, or its places grow, only if the workspace's balance covers them.

Plain values in, problems out: no Flask, Celery, click or HTTP here (the fake Prolific refuses the same
studies with these functions, so a test finds a broken rule before a lab does).
"""

from __future__ import annotations

import math
from typing import Optional

from turkflow.errors import InvalidInput
from turkflow.hits.money import least_reward_cents, percent_cents, shown

# Prolific's least reward per hour, in the minor unit of the workspace's currency.
MIN_HOURLY = {"GBP": 600, "USD": 800}
# A currency Prolific does not name: the stricter of the two.
MIN_HOURLY_OTHER = max(MIN_HOURLY.values())
# Prolific's maximum allowed time is under 24 hours.
LONGEST_MAXIMUM_MINUTES = 24 * 60 - 1


def least_hourly_cents(currency: Optional[str], own_floor: int = 0) -> int:
    """Prolific's minimum an hour in ``currency``, or the lab's own floor when that is higher."""
    return max(MIN_HOURLY.get((currency or "").upper(), MIN_HOURLY_OTHER), own_floor)


def least_maximum_minutes(estimated_minutes: float) -> int:
    """Prolific's least ``maximum_allowed_time``: 2 + 2 x estimate + 2 x sqrt(estimate), in whole minutes."""
    return math.ceil(2 + 2 * estimated_minutes + 2 * math.sqrt(estimated_minutes) - 1e-9)


def study_problems(*, reward_cents: int, estimated_minutes: float, maximum_minutes: Optional[float],
                   places: int, hourly_cents: int) -> list[str]:
    """What Prolific would refuse about a study, each as Prolific's rule (the caller names the setting)."""
    problems = []
    if estimated_minutes < 1:
        problems.append("estimated: a study takes at least 1 minute")
    elif reward_cents < int(least_reward_cents(hourly_cents, estimated_minutes)):
        problems.append(f"reward: at least {int(least_reward_cents(hourly_cents, estimated_minutes))} at "
                        f"{estimated_minutes:g} minutes ({hourly_cents} an hour)")
    if maximum_minutes is not None and estimated_minutes >= 1 \
            and maximum_minutes < least_maximum_minutes(estimated_minutes):
        problems.append(f"maximum: at least {least_maximum_minutes(estimated_minutes)} minutes")
    if maximum_minutes is not None and maximum_minutes > LONGEST_MAXIMUM_MINUTES:
        problems.append(f"maximum: at most {LONGEST_MAXIMUM_MINUTES} minutes (under 24 hours)")
    if places < 1:
        problems.append("places: at least 1")
    return problems


def check_turn_study(*, reward_cents: int, estimated_minutes: int, maximum_minutes: int, hourly_cents: int,
                     currency: str) -> None:
    """A batch's turn studies, as ``batch launch`` would make them: refused in one line naming the option or
    setting to change, amounts in the workspace's ``currency``."""
    least = least_reward_cents(hourly_cents, estimated_minutes)
    if reward_cents < least:
        raise InvalidInput(f"{shown(reward_cents, currency)} is below Prolific's minimum pay: at least "
                           f"{shown(least, currency)} a turn ({shown(hourly_cents, currency)} an hour at "
                           f"TURKFLOW_PROLIFIC_ESTIMATED_MINUTES={estimated_minutes} minutes a turn)", "--reward")
    check_maximum(maximum_minutes, estimated_minutes)


def check_session_study(*, reward_cents: int, session_minutes: int, hourly_cents: int, currency: str) -> None:
    """A batch's session places (``--session-minutes``): the reward pays the session at Prolific's least an
    hour, on the session's minutes (its estimated time on Prolific). Refused in one line naming the option."""
    least = least_reward_cents(hourly_cents, session_minutes)
    if reward_cents < least:
        raise InvalidInput(f"{shown(reward_cents, currency)} is below Prolific's minimum pay for a place of "
                           f"--session-minutes {session_minutes}: at least {shown(least, currency)} a session "
                           f"({shown(hourly_cents, currency)} an hour); raise --reward, or shorten the session",
                           "--reward")
    if session_minutes > LONGEST_MAXIMUM_MINUTES:
        raise InvalidInput(f"{session_minutes} minutes is longer than a Prolific study may take", "--session-minutes")


def check_maximum(maximum_minutes: int, estimated_minutes: int) -> None:
    """A turn study's maximum time (TURKFLOW_PROLIFIC_MAX_MINUTES): at least Prolific's least for the
    estimate, and under 24 hours."""
    longest = least_maximum_minutes(estimated_minutes)
    if maximum_minutes < longest:
        raise InvalidInput(f"{maximum_minutes} minutes is below Prolific's least maximum time for "
                           f"TURKFLOW_PROLIFIC_ESTIMATED_MINUTES={estimated_minutes}: at least {longest} "
                           f"(2 + 2 x {estimated_minutes} + 2 x sqrt({estimated_minutes}) minutes)",
                           "TURKFLOW_PROLIFIC_MAX_MINUTES")
    if maximum_minutes > LONGEST_MAXIMUM_MINUTES:
        raise InvalidInput(f"{maximum_minutes} minutes is more than Prolific allows: a maximum time is under 24 "
                           f"hours, at most {LONGEST_MAXIMUM_MINUTES} minutes", "TURKFLOW_PROLIFIC_MAX_MINUTES")


def check_funds(*, available_cents: int, first_places: int, reward_cents: int, fee_percent: float,
                currency: str) -> None:
    """Prolific publishes a study, or grows its places, only when the workspace's balance covers them
    (researcher help, "Finance"): the first turns' rewards with the fee must fit the available balance."""
    first = first_places * reward_cents
    first += percent_cents(first, fee_percent)
    if available_cents < first:
        raise InvalidInput(f"the workspace's available balance, {shown(available_cents, currency)}, does not cover "
                           f"the first {first_places} turns ({shown(first, currency)} with Prolific's fee): add "
                           "money to the workspace in Prolific's app (Finance), or launch fewer --conversations")
