"""The one small interface every crowd platform implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Optional

from sqlmodel import Session

from turkflow.config import Settings
from turkflow.models import Assignment, Batch, Bonus, Hit, Worker


class CrowdProvider(ABC):
    """A crowd platform as turkflow sees it. Methods must be safe to call twice (retries)."""

    name: str

    @abstractmethod
    def publish_turn(self, session: Session, hit: Hit, batch: Batch) -> str:
        """Make the HIT visible to workers; return the platform's id for it."""

    @abstractmethod
    def expire(self, session: Session, hit: Hit) -> None:
        """Stop the HIT from being taken (batch cancelled or turn reopened elsewhere)."""

    @abstractmethod
    def approve(self, session: Session, assignment: Assignment) -> None:
        """Accept the work so the worker is paid."""

    @abstractmethod
    def pay_bonus(self, session: Session, bonus: Bonus, worker: Worker, assignment: Assignment) -> None:
        """Pay a recorded bonus; the bonus' request token makes a retried payment a no-op."""

    @abstractmethod
    def block(self, session: Session, worker: Worker, reason: str, permanent: bool) -> None:
        """Keep the worker from taking turns (temporary: reversible quietly; permanent: platform block)."""

    @abstractmethod
    def unblock(self, session: Session, worker: Worker) -> None:
        """Reverse every kind of block."""

    def notify(self, session: Session, workers: list[Worker], subject: str, message: str) -> None:
        """Message workers; providers without messaging ignore it."""


class Providers:
    """The providers of one process, built on first use; ``mturk_client`` lets tests pass a stubbed client."""

    def __init__(self, settings: Settings, mturk_client: Optional[object] = None):
        self.settings = settings
        self.mturk_client = mturk_client
        self._built: dict[str, CrowdProvider] = {}

    def get(self, name: str) -> CrowdProvider:
        if name not in self._built:
            self._built[name] = self._build(name)
        return self._built[name]

    def _build(self, name: str) -> CrowdProvider:
        if name == "local":
            from turkflow.hits.local import LocalProvider

            return LocalProvider()
        if name == "mturk":
            from turkflow.hits.mturk import MTurkProvider

            return MTurkProvider(self.settings, client=self.mturk_client)
        if name == "prolific":
            from turkflow.hits.prolific.provider import ProlificProvider

            return ProlificProvider(self.settings)
        raise ValueError(f"unknown crowd provider {name!r}; use local, mturk or prolific")
