"""The one interface every crowd platform implements, and the registry that holds one process's providers.

``CrowdProvider`` names every capability the pipeline, the web app and the CLI use; a platform with
nothing to do for one implements it as a no-op that says why. This module imports no implementation:
``turkflow.hits.registry`` (used by the web app factory, the CLI and the Celery app) tells ``Providers``
how to build each platform's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from turkflow.config import Settings

if TYPE_CHECKING:
    from sqlmodel import Session

    from turkflow.models import Assignment, Batch, Bonus, Hit, Worker


# The provider of the turns an agent plays (``turkflow.hits.agent``): its HITs are answered by the agents queue,
# never published on a platform, never paid (counted in no budget and no spend).
AGENT = "agent"


@dataclass
class HitCheck:
    """What comparing one HIT with the platform's records found; our records are repaired already, and the
    pipeline runs the steps that follow (reviewing a stored turn, publishing a new attempt) after commit."""

    stored_turn_id: Optional[int] = None  # a submission the platform had and we did not, stored now
    reopened_hit_id: Optional[int] = None  # a new attempt at the turn, still to publish
    settled: list[int] = field(default_factory=list)  # assignments whose verdict we took from the platform
    abandoned: list[int] = field(default_factory=list)  # assignments returned or abandoned there
    unreadable: bool = False  # the platform has a submission we cannot store (the turn was reopened)


class CrowdProvider(ABC):
    """A crowd platform as turkflow sees it. Methods must be safe to call twice (retries); a platform's own
    failures reach callers as ``turkflow.errors.ProviderError``."""

    name: str
    # Whether publishing calls the platform over the network. One that does not (the local provider: the
    # queue reads open HITs from our database) publishes in the transaction that opens the turn.
    calls_platform: bool = True

    # -- HITs --

    @abstractmethod
    def publish_turn(self, session: Session, hit: Hit, batch: Batch) -> str:
        """Make the HIT visible to workers; return the platform's id for it."""

    @abstractmethod
    def expire(self, session: Session, hit: Hit) -> None:
        """Stop the HIT from being taken (batch cancelled or turn reopened elsewhere)."""

    @abstractmethod
    def verify_submission(self, session: Session, hit: Hit, assignment_id: str, worker_id: str) -> None:
        """Check with the platform that this assignment of this HIT is this worker's; raise ``Forbidden`` if not."""

    # -- the reconciler: the platform's records are the truth about work done there --

    @abstractmethod
    def hits_to_check(self, session: Session, limit: int = 500) -> list[int]:
        """Open HITs whose state the platform holds and may know better than we do."""

    @abstractmethod
    def check_hit(self, session: Session, hit: Hit, now: datetime) -> HitCheck:
        """Compare one HIT with the platform's records and repair ours in ``session`` (the caller commits)."""

    @abstractmethod
    def approvals_due(self, session: Session, settings: Settings, now: datetime, limit: int = 500) -> list[int]:
        """Ids of submitted assignments whose review delay (in this run's ``settings``) has passed."""

    # -- assignments and money --

    @abstractmethod
    def approve(self, session: Session, assignment: Assignment) -> None:
        """Accept the work so the worker is paid."""

    @abstractmethod
    def pay_bonus(self, session: Session, bonus: Bonus, worker: Worker, assignment: Assignment) -> list[int]:
        """Pay a recorded bonus, never twice (a retry is a no-op); returns the ids of the bonuses the call
        paid: this one, and any other pending ones a platform paying in bulk took along."""

    @abstractmethod
    def balance_cents(self, live: bool) -> Optional[int]:
        """What the requester's account can still spend; None when the platform keeps no account."""

    # -- workers --

    @abstractmethod
    def check_onboarding_gate(self, session: Session, live: bool) -> None:
        """Raise ``ProviderError`` saying what is missing if the platform cannot yet keep workers who have not
        passed their role's onboarding quiz away from its turns."""

    @abstractmethod
    def soft_block(self, session: Session, worker: Worker, reason: str) -> None:
        """Keep the worker from taking turns until review, quietly (their standing on the platform unhurt)."""

    @abstractmethod
    def block_permanently(self, session: Session, worker: Worker, reason: str) -> None:
        """Keep the worker out for good, on the platform too (only after a person's review)."""

    @abstractmethod
    def unblock(self, session: Session, worker: Worker) -> None:
        """Reverse every kind of block."""

    @abstractmethod
    def notify(self, session: Session, workers: list[Worker], subject: str, message: str) -> None:
        """Message workers."""


ProviderFactory = Callable[[Settings, Optional[Any]], CrowdProvider]


class Providers:
    """The providers of one process, each built on first use by its platform's factory.

    ``clients`` hands a platform a ready API client by name (tests pass a stubbed MTurk client).
    """

    def __init__(self, settings: Settings, factories: Mapping[str, ProviderFactory],
                 clients: Optional[Mapping[str, Any]] = None):
        self.settings = settings
        self.factories = dict(factories)
        self.clients = dict(clients or {})
        self._built: dict[str, CrowdProvider] = {}

    def get(self, name: str) -> CrowdProvider:
        if name not in self._built:
            if name not in self.factories:
                raise ValueError(f"unknown crowd provider {name!r}; use {' or '.join(self.factories)}")
            self._built[name] = self.factories[name](self.settings, self.clients.get(name))
        return self._built[name]
