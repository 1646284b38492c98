"""Signed, dated tokens that any web machine of a deployment reads: a local worker's cookie and the
dashboard's session cookie. Machines' clocks drift apart a little (NTP keeps them within a second or so, a
machine that lost its time source drifts further), and a token one machine signed a moment "in the future"
for another must still sign its browser in: a clock up to ``CLOCK_SKEW_SECONDS`` ahead is tolerated.
"""

from __future__ import annotations

from typing import Any

from itsdangerous import SignatureExpired, TimestampSigner

CLOCK_SKEW_SECONDS = 60


class SkewTolerantSigner(TimestampSigner):
    """itsdangerous's dated signer, except that a signature up to ``CLOCK_SKEW_SECONDS`` younger than now
    (signed by a machine whose clock is ahead) is good; itsdangerous refuses any age below 0."""

    def unsign(self, signed_value: str | bytes, max_age: int | None = None,  # type: ignore[override]
               return_timestamp: bool = False) -> Any:
        value, signed_at = super().unsign(signed_value, return_timestamp=True)
        if max_age is not None:
            age = self.get_timestamp() - int(signed_at.timestamp())
            if age > max_age or age < -CLOCK_SKEW_SECONDS:
                raise SignatureExpired(f"signed {age} s ago, outside -{CLOCK_SKEW_SECONDS}..{max_age} s",
                                       payload=value, date_signed=signed_at)
        return (value, signed_at) if return_timestamp else value

