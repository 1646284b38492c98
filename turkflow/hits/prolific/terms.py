"""What a batch, or an onboarding study, publishes on Prolific: fixed when it is launched and stored with it.

Whether a batch's studies are test studies, which hand-made groups stand for its roles' onboarding, the
public address its studies send participants to, their texts and times: all of it is read from the
``TURKFLOW_PROLIFIC_*`` settings of the process that launches the batch (``turkflow batch launch``) and
stored on the batch (``Batch.platform_terms``), and every process (the web process, each Celery worker, beat,
the CLI) reads it from there. A setting changed afterwards, or a worker started with other settings, never
changes what a running batch publishes. An onboarding study keeps what it was published with the same way
(``ProlificOnboarding.terms``).

To change a running batch deliberately, end it (``turkflow batch cancel``) and launch a new one: its
studies are made from the settings of that launch. A batch made without terms (one launched before they
were stored, or by code that calls ``lifecycle.launch_batch`` itself) takes those of the first process that
publishes for it, recorded once, so from then on every process agrees.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping, Optional
from urllib.parse import urlsplit

from turkflow.config import Settings
from turkflow.errors import InvalidInput
from turkflow.hits.prolific import public, rules
from turkflow.models import KeepRule


def role_groups(text: str) -> dict[str, str]:
    """``student=<id>,teacher=<id>`` (TURKFLOW_PROLIFIC_ROLE_GROUPS) as a mapping."""
    pairs = [part.split("=", 1) for part in text.split(",") if part.strip()]
    if any(len(pair) != 2 or not pair[0].strip() or not pair[1].strip() for pair in pairs):
        raise InvalidInput(f"TURKFLOW_PROLIFIC_ROLE_GROUPS must read role=<group id>,..., not {text!r}")
    return {role.strip(): group.strip() for role, group in pairs}


def rehearsal_host_of(settings: Settings, url: str) -> str:
    """The rehearsal host, if ``url`` is on it and the check honours it now (Prolific is the fake on this
    machine); else ""."""
    host = settings.prolific_rehearsal_host.lower()
    if host and urlsplit(url).hostname == host and public.on_this_machine(settings.prolific_base_url):
        return host
    return ""


def session_minutes_of_launch(settings: Settings, provider: str, keep_rule: str) -> int:
    """How long a batch's places last when launched without ``--session-minutes``: on Prolific, a batch that keeps
    people for their session (``--keep session``) publishes places of TURKFLOW_PROLIFIC_SESSION_MINUTES; any
    other, one turn a place (0). ``batch launch`` and the simulator both launch by it."""
    return settings.prolific_session_minutes if provider == "prolific" and keep_rule == KeepRule.session else 0


@dataclass(frozen=True)
class StudyTerms:
    """What a batch's turn studies are made with."""

    test: bool  # test studies: the workspace's test participant only, paid and refunded by Prolific
    public_url: str  # the base of the turn page's address
    role_groups: dict[str, str] = field(default_factory=dict)  # hand-made groups standing for onboarding
    study_name: str = ""
    study_description: str = ""
    estimated_minutes: int = 1
    maximum_minutes: int = 1
    project_id: str = ""
    rehearsal_host: str = ""  # the public URL's host, trusted as in a rehearsal (see ``public``)
    session_minutes: int = 0  # a place lasts a session of these minutes (``places``); 0: one turn a place

    @property
    def sessions(self) -> bool:
        """A place is a session of turns, paid once, rather than one turn."""
        return self.session_minutes > 0

    @property
    def study_minutes(self) -> tuple[int, int]:
        """The study's estimated and maximum minutes, as Prolific is told: a turn's, or a session's (its
        maximum Prolific's least for it: our page gives the code when the session's time is up)."""
        if self.sessions:
            return self.session_minutes, rules.least_maximum_minutes(self.session_minutes)
        return self.estimated_minutes, self.maximum_minutes

    @classmethod
    def of_settings(cls, settings: Settings, session_minutes: int = 0) -> "StudyTerms":
        """The terms ``settings`` give a batch whose places last ``session_minutes`` (0: one turn a place;
        ``session_minutes_of_launch``)."""
        return cls(test=settings.prolific_test_studies, public_url=settings.public_url.rstrip("/"),
                   role_groups=role_groups(settings.prolific_role_groups), study_name=settings.prolific_study_name,
                   study_description=settings.prolific_study_description,
                   estimated_minutes=settings.prolific_estimated_minutes,
                   maximum_minutes=settings.prolific_max_minutes, project_id=settings.prolific_project_id,
                   rehearsal_host=rehearsal_host_of(settings, settings.public_url), session_minutes=session_minutes)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Optional["StudyTerms"]:
        """The terms stored with a batch (None: none stored yet)."""
        return _typed(cls, data)

    def page_url(self, batch_id: int, role: str) -> str:
        return f"{self.public_url}/prolific/turn?b={batch_id}&r={role}"

    def checked_url(self, url: str, what: str, prolific_base_url: str) -> str:
        return public.check(url, what=what, rehearsal_host=self.rehearsal_host, prolific_base_url=prolific_base_url)


@dataclass(frozen=True)
class OnboardingTerms:
    """What a role's onboarding study was published with."""

    test: bool  # a test study, for the workspace's test participant only
    public_url: str  # the base of the quiz's address
    reward_cents: int = 0
    minutes: int = 1
    hand_made_group: str = ""  # the role's hand-made group then, whose members stand for its passers
    project_id: str = ""
    rehearsal_host: str = ""

    @classmethod
    def of_settings(cls, settings: Settings, role: str, *, test: bool, reward_cents: int,
                    minutes: int) -> "OnboardingTerms":
        return cls(test=test, public_url=settings.public_url.rstrip("/"), reward_cents=reward_cents,
                   minutes=minutes, hand_made_group=role_groups(settings.prolific_role_groups).get(role, ""),
                   project_id=settings.prolific_project_id,
                   rehearsal_host=rehearsal_host_of(settings, settings.public_url))

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Optional["OnboardingTerms"]:
        return _typed(cls, data)


def _typed(cls: type, data: Optional[Mapping[str, Any]]) -> Any:
    """A stored JSON object as ``cls`` (None when nothing is stored); a key it does not know, or one it
    misses, is a stored record turkflow did not write."""
    if not data:
        return None
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"stored Prolific terms carry fields turkflow does not know: {', '.join(unknown)}")
    return cls(**data)
