"""What exists: tasks, batches, conversations, turns, HITs, assignments, workers, ratings, quality
decisions, bonuses, requesters and the append-only event log.

Invariants live in the schema, not in hope: one turn per (conversation, index), so a conversation can
never have two open turns for the same position; one HIT per (turn, attempt); one rating per rating
turn; one bonus of each kind per turn. Money is stored in integer cents. A batch's money and quality columns take
their defaults from the settings (``turkflow.config.default``), where each default lives once.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from enum import StrEnum
from typing import Any, Optional

from sqlalchemy import JSON, Column, Index, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from turkflow.config import default


def utcnow() -> datetime:
    """Aware UTC; SQLModel stores UTC on every backend and hands back aware datetimes."""
    return datetime.now(timezone.utc)


def json_column() -> Any:
    return Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class Role(StrEnum):
    student = "student"
    teacher = "teacher"


class BatchStatus(StrEnum):
    active = "active"
    paused = "paused"
    cancelled = "cancelled"
    completed = "completed"


class ConversationStatus(StrEnum):
    active = "active"
    completed = "completed"
    cancelled = "cancelled"


class TurnStatus(StrEnum):
    open = "open"  # waiting for a worker (its HIT is published or being published)
    submitted = "submitted"
    cancelled = "cancelled"


class HitStatus(StrEnum):
    pending = "pending"  # row written, provider not yet told
    open = "open"
    submitted = "submitted"
    expired = "expired"


class AssignmentStatus(StrEnum):
    accepted = "accepted"
    submitted = "submitted"
    approved = "approved"
    rejected = "rejected"
    abandoned = "abandoned"  # lease ran out or the worker returned it
    # The turn was stored, then the platform ended the submission unpaid (Prolific: timed out or returned);
    # turkflow keeps the turn, so it pays: approved where the platform allows it, else compensated.
    unpaid = "unpaid"
    compensated = "compensated"  # its reward went as a bonus on the submission (``BonusKind.reward``)


class PlaceStatus(StrEnum):
    """A Prolific session place (``ProlificPlace``): one submission in which a participant writes turn after turn."""

    open = "open"  # the participant is in it: writing, or waiting for a turn
    finished = "finished"  # ended on our page (time up, they said they were done, no work left): the code given
    left = "left"  # returned or timed out on Prolific before it was paid
    approved = "approved"  # its reward paid: approved on Prolific
    compensated = "compensated"  # not approvable on Prolific; its reward went as a bonus on the submission


class WorkerStatus(StrEnum):
    active = "active"
    temporarily_blocked = "temporarily_blocked"
    blocked = "blocked"  # permanent


class KeepRule(StrEnum):
    """Whom a conversation's next turn of a role goes to (``Batch.keep``, ``turkflow.hits.keep``)."""

    any = "any"  # whoever comes first (the Wizard of Tasks paper's rule)
    session = "session"  # the role's last writer in the conversation while they are present (their session)
    window = "window"  # the role's last writer, for ``Batch.keep_seconds`` after the turn opens


class WorkerKind(StrEnum):
    person = "person"
    agent = "agent"  # a model playing a role (turkflow.agents): never paid, never blocked, never judged for pay


class AgentTurnStatus(StrEnum):
    waiting = "waiting"  # due at ``due_at``: the agents queue asks the agent then
    calling = "calling"  # an agents-queue worker is asking it (until ``claimed_until``)
    answered = "answered"
    failed = "failed"  # out of attempts: the conversation ended with the reason
    handed_over = "handed_over"  # out of attempts: the turn opened for people (--on-agent-failure people)
    cancelled = "cancelled"  # the conversation ended otherwise before an answer was stored


class BonusStatus(StrEnum):
    pending = "pending"
    paid = "paid"


class BonusKind(StrEnum):
    quality = "quality"  # the monitor's, for a well-rated turn
    reward = "reward"  # a kept turn's reward, paid as a bonus because its submission ended unpaid


class Task(SQLModel, table=True):
    """A task document (recipe, how-to article) that conversations are about."""

    id: Optional[int] = Field(default=None, primary_key=True)
    key: str = Field(unique=True, index=True, description="The document's own id from the task file.")
    protocol: str = Field(default="wizard_of_tasks", index=True,
                          description="The protocol whose conversations this task is for.")
    title: str
    domain: str = Field(index=True)
    image_url: Optional[str] = None
    summary: str = ""
    items_label: str = "Ingredients"
    items: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    steps: list[dict] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    star: dict = Field(
        default_factory=dict, sa_column=Column(JSON, nullable=False),
        description="Another protocol's task data (its dialog module's read_tasks, turkflow.protocols.registry): a STAR "
        "task's flow chart, reply templates, API and scenario texts; a Frames domain; a MEEP knowledge base. "
        "Empty for task documents.")
    created_at: datetime = Field(default_factory=utcnow)


class Batch(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    name: str
    protocol: str = "wizard_of_tasks"
    provider: str = "local"
    live: bool = False
    status: str = Field(default=BatchStatus.active, index=True)
    reward_cents: int = default("reward_cents")
    max_turns: int = default("max_turns")
    budget_cents: Optional[int] = None
    quality_window: int = default("quality_window")
    block_below: float = default("block_below")
    bonus_above: float = default("bonus_above")
    bonus_cents: int = default("bonus_cents")
    block_rule: str = default("block_rule")  # see turkflow.quality.monitor.Policy
    probation_rated_turns: int = 0  # 0: no probation, so no settled window either
    settled_window: int = 0
    settled_block_below: float = 0.0
    typed_block: int = Field(default=0, description="Block a worker when this many of their last typed_window "
                             "written turns are machine-written (turkflow.quality.monitor); 0: never.")
    typed_window: int = 0
    judged_block: int = Field(default=0, description="Block a worker when this many of their last judged_window "
                              "judged signals of one kind are not ok (turkflow.quality.monitor.judge_signal); 0: never.")
    judged_window: int = 0
    sprt_alpha: float = Field(default=0.0, description="The sprt block rule: the share of honest writers it may "
                              "block (turkflow.quality.monitor.sequential_evidence).")
    sprt_beta: float = Field(default=0.0, description="The sprt block rule: the share of spammers it may miss.")
    keep: str = Field(default=KeepRule.any, description="Whom a conversation's next turn of a role goes to "
                      "(turkflow.hits.keep): any worker; the worker who wrote that role's last turn while they are "
                      "present (session); or that worker for keep_seconds after the turn opens (window).")
    keep_seconds: int = Field(default=0, description="keep window: how long a conversation's next turn of a role is "
                              "kept for the worker who wrote that role's last turn, then offered to anyone.")
    suggestions_shown: int = Field(default=default("star_suggestions"), description="STAR: how many suggested "
                                   "replies the wizard's page shows at once, best first.")
    fee_percent: float = Field(default=0.0, description="The platform's fee on rewards and bonuses as at "
                               "launch, in percent, counted in the budget (Prolific's service fee).")
    currency: str = Field(default="USD", description="The currency of the batch's rewards, bonuses and budget: "
                          "USD on MTurk and the local queue, the workspace's on Prolific (as at launch).")
    agents: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False),
                         description="The roles agents play, as launched: {role: [agent name, ...]}; each "
                         "conversation's agent of a role is in ConversationAgent.")
    on_agent_failure: str = Field(default="end", description="What an agent's turn out of attempts does: end "
                                  "(the conversation ends with the reason) or people (the turn opens for people).")
    platform_terms: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, server_default="{}"),
                                 description="What decides what the batch publishes on its platform, as launched "
                                 "(Prolific: turkflow.hits.prolific.terms.StudyTerms); every process reads it from "
                                 "here. Empty: not recorded yet.")
    pairwise: bool = Field(default=False, description="Per-turn pairwise: each turn of a role two or more agents "
                           "play is answered by two of them, and the person who continues the dialog picks one "
                           "(turkflow.agents.pairwise).")
    requester_id: Optional[int] = Field(default=None, foreign_key="requester.id", index=True,
                                        description="The requester the batch belongs to (batch launch --owner); "
                                        "none: the operator's, which admins see (turkflow.access).")
    created_at: datetime = Field(default_factory=utcnow)


class Conversation(SQLModel, table=True):
    __table_args__ = (Index("ix_conversation_batch_activity", "batch_id", "status", "updated_at"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="batch.id", index=True)
    task_id: int = Field(foreign_key="task.id", index=True)
    status: str = Field(default=ConversationStatus.active, index=True)
    end_reason: Optional[str] = None
    turn_count: int = 0
    scenario: dict = Field(
        default_factory=dict, sa_column=Column(JSON, nullable=False),
        description="A STAR conversation's scenario: its tasks, happy or not, the nudges due at which turn.")
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow, index=True)
    completed_at: Optional[datetime] = None


class Worker(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    external_id: str = Field(unique=True, index=True, description="MTurk WorkerId or local invite id.")
    role: str = Field(index=True)
    status: str = Field(default=WorkerStatus.active, index=True)
    onboarded: bool = False
    stage: int = Field(default=0, description="The highest STAR qualification stage passed "
                       "(turkflow.protocols.star.stages): 1 single-task, 2 multi-task; passing stage 1 also onboards.")
    name: Optional[str] = None
    window_after_rating_id: int = Field(
        default=0, description="The quality window only counts ratings after this one (set on unblock)."
    )
    kind: str = Field(default=WorkerKind.person, description="person, or agent: the worker an agent "
                      "(turkflow.agents) writes its turns as; never paid, blocked or judged for pay.")
    present_until: Optional[datetime] = Field(
        default=None, description="Until when the worker counts as present (turkflow.hits.keep): their last page "
        "request plus TURKFLOW_PRESENCE_SECONDS, the end of a turn they hold, or the moment they left or their "
        "session ended; a batch that keeps people for their session keeps their conversations' turns until then.")
    platform_status: str = Field(
        default=WorkerStatus.active,
        description="The status the worker's crowd platform was last made to reflect (its block list, "
        "qualification or worker block); the reconciler carries out any difference from status.",
    )
    created_at: datetime = Field(default_factory=utcnow)


class Turn(SQLModel, table=True):
    """One utterance of a conversation, and the answers its author gave on the turn page."""

    __table_args__ = (
        UniqueConstraint("conversation_id", "index", name="uq_turn_position"),
        Index(
            "uq_turn_one_open_per_conversation", "conversation_id", unique=True,
            sqlite_where=text("status = 'open'"), postgresql_where=text("status = 'open'"),
        ),
        Index("ix_turn_worker_recent", "worker_id", "id"),
        Index("ix_turn_submitted_at", "submitted_at"),
        Index(
            "ix_turn_unreviewed", "submitted_at",
            sqlite_where=text("status = 'submitted' AND reviewed_at IS NULL"),
            postgresql_where=text("status = 'submitted' AND reviewed_at IS NULL"),
        ),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    conversation_id: int = Field(foreign_key="conversation.id", index=True)
    index: int
    role: str
    status: str = Field(default=TurnStatus.open, index=True)
    worker_id: Optional[int] = Field(default=None, foreign_key="worker.id", index=True)
    text: Optional[str] = None
    label: Optional[str] = Field(default=None, description="The student's intent or the teacher's action.")
    answers: dict = json_column()
    flags: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    signals: dict = Field(
        default_factory=dict, sa_column=Column(JSON, nullable=False),
        description="What the turn page saw of how the text was written (time on page, keystrokes, pastes).",
    )
    opened_at: datetime = Field(default_factory=utcnow)
    submitted_at: Optional[datetime] = None
    reviewed_at: Optional[datetime] = Field(
        default=None, description="When the monitor and content checks judged this turn; the reconciler "
        "reviews submitted turns still without one, so a lost message never skips a review.",
    )


class Hit(SQLModel, table=True):
    """A paid unit of work for one turn. A turn gets a new attempt when its HIT expires unanswered."""

    __table_args__ = (
        UniqueConstraint("turn_id", "attempt", name="uq_hit_attempt"),
        Index(
            "uq_hit_one_live_per_turn", "turn_id", unique=True,
            sqlite_where=text("status IN ('pending', 'open')"),
            postgresql_where=text("status IN ('pending', 'open')"),
        ),
        Index("ix_hit_queue", "status", "role", "id"),  # the local queue's oldest open turns of a role
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    turn_id: int = Field(foreign_key="turn.id", index=True)
    attempt: int = 1
    provider: str = "local"
    external_id: Optional[str] = Field(default=None, index=True)
    role: str = Field(index=True)
    status: str = Field(default=HitStatus.pending, index=True)
    lease_expires_at: Optional[datetime] = Field(default=None, index=True)
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: Optional[datetime] = None
    reserved_for_id: Optional[int] = Field(
        default=None, foreign_key="worker.id", index=True,
        description="The worker who wrote the role's last turn in this conversation (Batch.keep): while they may "
                    "take it (active; present, or within reserved_until) only they may take the HIT.")
    reserved_until: Optional[datetime] = Field(
        default=None, description="A keep window's end: the HIT's opening plus Batch.keep_seconds, compared with "
                                  "the clock, so the reservation ends by itself if its worker never comes. None "
                                  "with a keeper: kept while they are present (Worker.present_until).")


class Assignment(SQLModel, table=True):
    """A worker holding a HIT: a local lease, or an MTurk assignment."""

    id: Optional[int] = Field(default=None, primary_key=True)
    hit_id: int = Field(foreign_key="hit.id", index=True)
    worker_id: int = Field(foreign_key="worker.id", index=True)
    external_id: str = Field(unique=True, index=True)
    status: str = Field(default=AssignmentStatus.accepted, index=True)
    accepted_at: datetime = Field(default_factory=utcnow)
    submitted_at: Optional[datetime] = None
    reviewed_at: Optional[datetime] = None
    place_id: Optional[int] = Field(
        default=None, foreign_key="prolificplace.id", index=True,
        description="The Prolific session place this turn was written in: the place's submission is paid for it "
                    "(the place's reward), not this assignment; None for a turn that was its own place.")


class Rating(SQLModel, table=True):
    """A worker's judgement of the previous turn, given on their own turn page."""

    __table_args__ = (
        Index("ix_rating_author_recent", "author_id", "id"),
        Index("ix_rating_rater_recent", "rater_id", "id"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    rated_turn_id: int = Field(foreign_key="turn.id", unique=True)
    rater_turn_id: int = Field(foreign_key="turn.id", unique=True)
    author_id: int = Field(foreign_key="worker.id")
    rater_id: int = Field(foreign_key="worker.id", index=True)
    relevant: bool
    useful: bool
    created_at: datetime = Field(default_factory=utcnow, index=True)


class QualityDecision(SQLModel, table=True):
    """What the monitor decided about a worker after a rating, and the numbers behind it."""

    __table_args__ = (Index("ix_decision_worker_recent", "worker_id", "id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    worker_id: int = Field(foreign_key="worker.id")
    rating_id: int = Field(foreign_key="rating.id", unique=True)
    outcome: str = Field(index=True, description="block, bonus or none")
    mean_relevance: float
    mean_usefulness: float
    window: list[dict] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class JudgedSignal(SQLModel, table=True):
    """A judgement of one turn's writer that is not a peer rating (STAR: the other role's end-of-dialog answers,
    the wizard's agreement with the knowledge base; an annotation's agreement), with what it rests on."""

    __table_args__ = (UniqueConstraint("turn_id", "kind", name="uq_judgedsignal_turn_kind"),
                      Index("ix_judgedsignal_worker_kind_recent", "worker_id", "kind", "id"))

    id: Optional[int] = Field(default=None, primary_key=True)
    worker_id: int = Field(foreign_key="worker.id")
    turn_id: int = Field(foreign_key="turn.id")
    kind: str = Field(description="What judged the turn, e.g. star_survey or star_kb_agreement.")
    ok: bool
    evidence: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class Bonus(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("turn_id", "kind", name="uq_bonus_turn_kind"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    turn_id: int = Field(foreign_key="turn.id")
    kind: str = Field(default=BonusKind.quality, description="quality: the monitor's bonus for a well-rated "
                      "turn; reward: the turn's reward, paid as a bonus because its submission ended unpaid on "
                      "the platform. At most one of each per turn.")
    worker_id: int = Field(foreign_key="worker.id", index=True)
    assignment_id: int = Field(foreign_key="assignment.id")
    decision_id: Optional[int] = Field(default=None, foreign_key="qualitydecision.id")
    amount_cents: int
    status: str = Field(default=BonusStatus.pending, index=True)
    request_token: str = Field(unique=True)
    created_at: datetime = Field(default_factory=utcnow)
    paid_at: Optional[datetime] = None
    pay_claimed_at: Optional[datetime] = Field(
        default=None, description="When a worker was about to call a platform's non-idempotent pay (Prolific); "
        "committed before the call, so a claimed bonus is settled from the platform, never paid again.")
    external_id: Optional[str] = Field(default=None, description="The platform's id of the payment (Prolific's "
                                       "bulk bonus payment id).")
    pay_accepted_at: Optional[datetime] = Field(
        default=None, description="When the platform accepted the pay call (Prolific answers 202 and pays within "
        "minutes), committed on its own right after the call: such a bonus is never paid again by turkflow.")


class Requester(SQLModel, table=True):
    """A dashboard user: a researcher who sees and changes their own batches and those granted them, or an admin
    (``turkflow.access``)."""

    id: Optional[int] = Field(default=None, primary_key=True)
    username: str = Field(unique=True, index=True)
    password_hash: str
    admin: bool = Field(default=False, description="Sees and changes every batch (the operator's too) and "
                        "manages requesters.")
    disabled_at: Optional[datetime] = Field(default=None, description="When an admin disabled the account: "
                                            "it signs nobody in and its sessions were revoked.")
    created_at: datetime = Field(default_factory=utcnow)


class BatchWorker(SQLModel, table=True):
    """A worker who wrote a turn in a batch, written with the turn (``lifecycle.submit_turn``): whom a requester
    sees (``turkflow.access``) is read here, a row per worker and batch, not from every turn they wrote."""

    batch_id: int = Field(foreign_key="batch.id", primary_key=True)
    worker_id: int = Field(foreign_key="worker.id", primary_key=True, index=True)


class BatchGrant(SQLModel, table=True):
    """A batch an admin opened to a requester who does not own it: they see and change it as their own."""

    batch_id: int = Field(foreign_key="batch.id", primary_key=True)
    requester_id: int = Field(foreign_key="requester.id", primary_key=True, index=True)
    granted_by: str = Field(description="requester:<name> of the admin, or the operator's.")
    created_at: datetime = Field(default_factory=utcnow)


class RoleStall(SQLModel, table=True):
    """A batch role whose waiting turns have no eligible worker (``turkflow.quality.stall``): noticed, then
    stalled once the grace period passed, then cleared."""

    __table_args__ = (
        Index("uq_rolestall_open", "batch_id", "role", unique=True,
              sqlite_where=text("cleared_at IS NULL"), postgresql_where=text("cleared_at IS NULL")),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="batch.id", index=True)
    role: str
    workers: int = Field(default=0,
                         description="Onboarded workers of the role on the batch's platform, none "
                         "of whom can take the waiting turns (blocked, or short of their stage).")
    waiting: int = Field(default=0, description="Turns of the role waiting when last counted.")
    stage: int = Field(default=1, description="The qualification stage the waiting turns need that no eligible "
                       "worker passed: 2 when only STAR's multi-task turns are stuck (nobody active passed "
                       "stage 2), else 1 (every worker of the role is blocked).")
    noticed_at: datetime
    stalled_at: Optional[datetime] = None
    cleared_at: Optional[datetime] = None


class LoginSession(SQLModel, table=True):
    """A requester's signed-in dashboard session; logging out revokes it server-side."""

    id: str = Field(primary_key=True, description="SHA-256 of the random token held in the cookie.")
    requester_id: int = Field(foreign_key="requester.id", index=True)
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime
    revoked_at: Optional[datetime] = None


class SignInFailure(SQLModel, table=True):
    """A failed dashboard sign-in, counted per username and per client to throttle guessing."""

    __table_args__ = (
        Index("ix_signinfailure_username_at", "username", "at"),
        Index("ix_signinfailure_client_at", "client", "at"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    username: str
    client: str
    at: datetime = Field(default_factory=utcnow)


class Event(SQLModel, table=True):
    """Append-only log of everything that happened; replaying it reconstructs any conversation."""

    __table_args__ = (
        Index("ix_event_conversation", "conversation_id", "id"),
        Index("ix_event_worker_kind", "worker_id", "kind", "id"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, index=True)
    kind: str = Field(index=True)
    actor: str = Field(description="worker:<id>, requester:<name>, system or provider")
    batch_id: Optional[int] = Field(default=None, index=True)
    conversation_id: Optional[int] = None
    turn_id: Optional[int] = None
    worker_id: Optional[int] = Field(default=None, index=True)
    data: dict = json_column()


class DialogEvent(SQLModel, table=True):
    """One action in a STAR dialog, as STAR logged it (utter, instruct, query, return_item, ...): the
    dataset itself, not an audit trail. Written only by ``turkflow.protocols.star.dialog.record_action``, which
    validates it; ``data`` holds the action's fields (text, API and constraints, item, labels)."""

    __table_args__ = (Index("ix_dialogevent_conversation", "conversation_id", "id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    conversation_id: int = Field(foreign_key="conversation.id")
    turn_id: Optional[int] = Field(default=None, foreign_key="turn.id", index=True,
                                   description="The paid turn the action was taken in.")
    turn_index: int
    worker_id: Optional[int] = Field(default=None, foreign_key="worker.id", index=True,
                                     description="None for the knowledge base's and the user guide's events.")
    agent: str = Field(description="User, Wizard, KnowledgeBase or UserGuide, as STAR names them.")
    action: str
    data: dict = json_column()
    at: datetime = Field(default_factory=utcnow)


class SurveyAnswer(SQLModel, table=True):
    """One answer of a worker's end-of-dialog survey (STAR's questionnaires): the dataset keeps it beside the
    dialog. A worker answers each question of a conversation once."""

    __table_args__ = (UniqueConstraint("conversation_id", "worker_id", "question", name="uq_survey_answer"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    conversation_id: int = Field(foreign_key="conversation.id", index=True)
    worker_id: int = Field(foreign_key="worker.id", index=True)
    role: str
    question: str = Field(description="The question's key in its protocol's survey.")
    text: str = Field(description="The question as the worker read it.")
    answer: Any = Field(sa_column=Column(JSON, nullable=False))
    at: datetime = Field(default_factory=utcnow)


class StageAttempt(SQLModel, table=True):
    """One go at a STAR qualification stage's quiz (``turkflow.protocols.star.stages``): opened, hints taken while it
    is open (``StageHint``), graded once. A worker has at most one open attempt per stage."""

    __table_args__ = (
        Index("uq_stageattempt_open", "worker_id", "stage", unique=True,
              sqlite_where=text("graded_at IS NULL"), postgresql_where=text("graded_at IS NULL")),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    worker_id: int = Field(foreign_key="worker.id", index=True)
    role: str
    stage: int
    provider: str = Field(default="local", description="Where the quiz was taken: local or prolific.")
    answers: dict = json_column()
    hints_used: Optional[int] = Field(default=None, description="Hints counted when graded.")
    passed: Optional[bool] = None
    reasons: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    started_at: datetime = Field(default_factory=utcnow)
    graded_at: Optional[datetime] = None


class StageHint(SQLModel, table=True):
    """A hint the server showed during an attempt: one row per question, written before the hint is sent,
    so the budget counts every hint a worker saw whatever their browser does."""

    __table_args__ = (UniqueConstraint("attempt_id", "question", name="uq_stagehint_question"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    attempt_id: int = Field(foreign_key="stageattempt.id", index=True)
    question: str
    at: datetime = Field(default_factory=utcnow)


class ReviewStatus(StrEnum):
    pending = "pending"
    blocked = "blocked"  # the reviewer blocked the worker permanently
    unblocked = "unblocked"


class ReviewEntry(SQLModel, table=True):
    """A temporarily blocked worker in one day's review queue, with what the reviewer needs to judge them.

    Built by the daily review job so the dashboard reads one row per worker instead of searching history.
    """

    __table_args__ = (
        UniqueConstraint("day", "worker_id", name="uq_review_day_worker"),
        Index("ix_review_day_status", "day", "status", "id"),
        Index("ix_review_worker_status", "worker_id", "status"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    day: date
    worker_id: int = Field(foreign_key="worker.id")
    decision_id: Optional[int] = Field(default=None, foreign_key="qualitydecision.id")
    reason: str = ""
    sample: list[dict] = Field(default_factory=list, sa_column=Column(JSON, nullable=False),
                               description="[{turn_id, before_id, after_id}], the sampled turns in context.")
    ratings: dict = json_column()
    flags: dict = json_column()
    status: str = Field(default=ReviewStatus.pending)
    resolved_by: Optional[str] = None
    resolved_at: Optional[datetime] = None
    note: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class RaterAgreement(SQLModel, table=True):
    """How often a rater's judgements match other raters' judgements of the same authors, per daily run."""

    __table_args__ = (
        UniqueConstraint("day", "rater_id", name="uq_agreement_day_rater"),
        Index("ix_agreement_day_score", "day", "agreement"),
        Index("ix_agreement_rater_day", "rater_id", "day"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    day: date
    rater_id: int = Field(foreign_key="worker.id")
    compared: int = Field(description="Ratings of authors whom other raters rated too.")
    agreement: float
    outlier: bool = False
    created_at: datetime = Field(default_factory=utcnow)


class RaterReliability(SQLModel, table=True):
    """A rater's record in the monitor's trust model (``turkflow.quality.reliability``), updated once per rating
    they give with atomic increments, so concurrent reviews never lose one."""

    rater_id: int = Field(foreign_key="worker.id", primary_key=True)
    ratings: int = 0
    careless: float = Field(default=0.0, description="Log-likelihood ratio of careless against attentive.")
    harsh: float = Field(default=0.0, description="Log-likelihood ratio of harsh against attentive.")
    answers_yy: int = Field(default=0, description="Ratings given, by answer pair (relevant/useful).")
    answers_yn: int = 0
    answers_ny: int = 0
    answers_nn: int = 0
    verdict: Optional[str] = Field(default=None, index=True,
                                   description="careless or harsh once identified; a person clears it.")
    identified_after: Optional[int] = Field(default=None, description="Ratings given when identified (0: by the "
                                            "gold turns rated at onboarding).")
    gold: int = Field(default=0, description="Gold turns rated at onboarding (turkflow.quality.gold).")
    updated_at: datetime = Field(default_factory=utcnow)


class BatchHour(SQLModel, table=True):
    """One hour of one role's work in a batch, rolled up so the dashboard's charts never scan all turns."""

    __table_args__ = (UniqueConstraint("batch_id", "hour", "role", name="uq_batchhour"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="batch.id")
    hour: datetime
    role: str
    turns: int = 0
    labels: dict = json_column()
    rated: int = Field(default=0, description="Ratings this role's turns received from turns of this hour.")
    relevant: int = 0
    useful: int = 0


class BatchSnapshot(SQLModel, table=True):
    """A batch's progress and money as of ``at``: counting them takes seconds at a million turns, so the
    dashboard reads the copy Celery beat refreshes instead of counting on every page view."""

    batch_id: int = Field(foreign_key="batch.id", primary_key=True)
    at: datetime = Field(default_factory=utcnow)
    status: str = Field(description="The batch's status when counted; finished batches are counted once more.")
    progress: dict = json_column()


class MTurkQualification(SQLModel, table=True):
    """A qualification type turkflow created on MTurk (``turkflow mturk quals``): one per purpose and
    marketplace, because the sandbox and the live marketplace have separate qualification types.

    Purposes: ``role:student`` and ``role:teacher`` (the role's onboarding test; its value is the test
    score) and ``blocked`` (the soft block, required with DoesNotExist).
    """

    __table_args__ = (UniqueConstraint("purpose", "live", name="uq_mturk_qualification_purpose"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    purpose: str
    live: bool = False
    type_id: str = Field(unique=True)
    name: str
    created_at: datetime = Field(default_factory=utcnow)


class ProlificStudy(SQLModel, table=True):
    """The Prolific study of one batch role: written before the study is created (the row is the intent,
    so two workers never make two studies for one role), its id recorded once Prolific made it."""

    __table_args__ = (UniqueConstraint("batch_id", "role", name="uq_prolificstudy_batch_role"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="batch.id")
    role: str
    study_id: Optional[str] = Field(default=None, unique=True,
                                    description="Prolific's id; None until created.")
    created_at: datetime = Field(default_factory=utcnow)
    ended_at: Optional[datetime] = Field(default=None, description="When turkflow stopped the study (its batch "
                                         "ended); the poller leaves it alone afterwards.")
    seen_status: Optional[str] = Field(default=None, description="The study's status on Prolific when turkflow last "
                                  "looked (None: not looked at yet).")
    paused_at: Optional[datetime] = Field(default=None, description="When turkflow paused the study (no turn "
                                          "waited); None while it runs, or when Prolific or a person paused it: "
                                          "turkflow resumes only a study it paused itself.")


class ProlificPlace(SQLModel, table=True):
    """A participant's place in a batch role's study when its places last a session (``StudyTerms.session_minutes``):
    one Prolific submission, in which they write turn after turn (each an ``Assignment`` with ``place_id``), paid
    once with the study's reward (``turkflow.hits.prolific.places``)."""

    id: Optional[int] = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="batch.id", index=True)
    role: str
    worker_id: int = Field(foreign_key="worker.id", index=True)
    study_id: str
    submission_id: str = Field(unique=True, index=True, description="Prolific's submission id (its SESSION_ID).")
    status: str = Field(default=PlaceStatus.open, index=True)
    started_at: datetime = Field(default_factory=utcnow)
    ends_at: datetime = Field(description="When the session's time is up: the page then gives the completion code.")
    ended_at: Optional[datetime] = None
    end_reason: Optional[str] = Field(default=None, description="Why it ended: time up, done, no work left, or "
                                      "Prolific's status (returned, timed out).")
    reviewed_at: Optional[datetime] = None


class ProlificOnboarding(SQLModel, table=True):
    """The onboarding study of one role (``turkflow prolific onboarding``): written before the role's group
    and study are made (the intent), their ids recorded as Prolific makes them. Passing the role's quiz
    through the study adds a participant to ``group_id``, the allow list of the role's turn studies. A STAR
    role has one per qualification stage (``turkflow.protocols.star.stages``): stage 2's study admits only stage 1's
    group; a Wizard of Tasks role has one, stage 1."""

    __table_args__ = (Index("uq_prolificonboarding_current", "role", "stage", unique=True,
                            sqlite_where=text("replaced_at IS NULL"), postgresql_where=text("replaced_at IS NULL")),)

    id: Optional[int] = Field(default=None, primary_key=True)
    role: str
    stage: int = Field(default=1, description="The qualification stage the study grades (STAR: 1 single-task, "
                       "2 multi-task; Wizard of Tasks roles have one quiz, stage 1).")
    group_id: Optional[str] = Field(default=None, description="Prolific's id of the group passing adds to.")
    study_id: Optional[str] = Field(default=None, unique=True,
                                    description="Prolific's id; None until created.")
    terms: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, server_default="{}"),
                        description="What the study was published with (turkflow.hits.prolific.terms."
                        "OnboardingTerms): test or real, its address, reward and minutes.")
    published_at: Optional[datetime] = Field(default=None, description="When Prolific took the study as "
                                             "published; None while it is a draft (a refused publish leaves one).")
    replaced_at: Optional[datetime] = Field(default=None, description="When a new onboarding study of the role "
                                            "and stage replaced this one (`turkflow prolific onboarding --replace`); "
                                            "one study of a role and stage is current.")
    created_at: datetime = Field(default_factory=utcnow)


class Adjudication(SQLModel, table=True):
    """A person's final labels for one annotated turn (an annotation unit: a task of ``turkflow.protocols.annotate``),
    chosen where its annotators disagree, and whether it is gold: annotators' labels of a gold turn are judged
    against these (``annotate.results``). One per unit; a new decision replaces it, the event log keeps each."""

    __table_args__ = (UniqueConstraint("task_id", name="uq_adjudication_task"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    task_id: int = Field(foreign_key="task.id")
    labels: dict = json_column()
    gold: bool = False
    decided_by: str = Field(description="requester:<name>, or simulator for a simulated requester's gold.")
    decided_at: datetime = Field(default_factory=utcnow)


class Agent(SQLModel, table=True):
    """A model that can play a role, declared once (``turkflow agents add``) so every process calls it alike.
    Secrets are never stored: ``api_key_env`` names the environment variable that holds the key, read by the
    process that calls (every agents-queue worker needs it)."""

    id: Optional[int] = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True)
    kind: str = Field(description="endpoint (an OpenAI-compatible chat-completions server), callable (a Python "
                      "function, package.module:function) or builtin (turkflow.agents.builtins).")
    endpoint: Optional[str] = Field(default=None, description="The server's base URL, e.g. http://127.0.0.1:8080/v1.")
    model: Optional[str] = None
    target: Optional[str] = Field(default=None, description="The callable's package.module:function, or the "
                                  "built-in's name.")
    api_key_env: Optional[str] = Field(default=None, description="The environment variable holding the key.")
    timeout_seconds: float = default("agent_timeout_seconds")
    temperature: Optional[float] = None
    max_tokens: Optional[int] = None
    structured: Optional[str] = Field(default=None, description="The structured-output mode the endpoint last "
                                      "accepted (json_schema, json_object, prompted): later calls start there.")
    worker_id: int = Field(foreign_key="worker.id", unique=True,
                           description="The worker of kind agent its turns are written as.")
    created_at: datetime = Field(default_factory=utcnow)


class ConversationAgent(SQLModel, table=True):
    """Which agent plays a role in a conversation, drawn at launch (seeded, balanced per task)."""

    conversation_id: int = Field(foreign_key="conversation.id", primary_key=True)
    role: str = Field(primary_key=True)
    agent_id: int = Field(foreign_key="agent.id", index=True)


class AgentTurn(SQLModel, table=True):
    """An agent's turn: written with its HIT (the intent), asked when due, ended once (answered, failed with a
    reason, handed to people, or cancelled). Waits between calls are this row's ``due_at``, swept by beat."""

    __table_args__ = (Index("ix_agentturn_due", "status", "due_at"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    turn_id: int = Field(foreign_key="turn.id", unique=True)
    conversation_id: int = Field(foreign_key="conversation.id", index=True)
    agent_id: int = Field(foreign_key="agent.id", index=True)
    hit_id: int = Field(foreign_key="hit.id")
    status: str = Field(default=AgentTurnStatus.waiting)
    attempts: int = 0
    due_at: datetime = Field(default_factory=utcnow)
    claimed_until: Optional[datetime] = None
    reason: Optional[str] = Field(default=None, description="Why its last call failed; why it ended, if not answered.")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: int = Field(default=0, description="The answered call's latency.")
    created_at: datetime = Field(default_factory=utcnow)
    ended_at: Optional[datetime] = None


class AgentCall(SQLModel, table=True):
    """One call to an agent for a turn, whatever came of it: the report's errors, tokens and latency."""

    __table_args__ = (Index("ix_agentcall_agent", "agent_id", "id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    turn_id: int = Field(foreign_key="turn.id", index=True)
    agent_id: int = Field(foreign_key="agent.id")
    attempt: int
    outcome: str = Field(description="ok, timeout, refused, rate_limited, server_error, invalid, too_long, "
                         "cancelled or error.")
    detail: str = ""
    structured: Optional[str] = Field(default=None, description="The structured-output mode of the call.")
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    latency_ms: int = 0
    started_at: datetime = Field(default_factory=utcnow)


class Candidate(SQLModel, table=True):
    """One agent's reply to a turn two agents answered (per-turn pairwise, ``turkflow.agents.pairwise``): the
    reply the turn was stored with and its rival's, checked as the role's answers; the person who writes the
    next turn picks one (``Pick``)."""

    __table_args__ = (UniqueConstraint("turn_id", "agent_id", name="uq_candidate_turn_agent"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    turn_id: int = Field(foreign_key="turn.id", index=True)
    agent_id: int = Field(foreign_key="agent.id")
    text: str
    label: Optional[str] = None
    answers: dict = json_column()
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    latency_ms: int = 0
    created_at: datetime = Field(default_factory=utcnow)


class Pick(SQLModel, table=True):
    """A person's pick between a turn's two candidate replies, made on their own next turn: the turn holds the
    chosen one from then on. One per turn."""

    id: Optional[int] = Field(default=None, primary_key=True)
    turn_id: int = Field(foreign_key="turn.id", unique=True, description="The agents' turn whose reply was picked.")
    chosen_id: int = Field(foreign_key="candidate.id")
    rejected_id: int = Field(foreign_key="candidate.id")
    first_id: int = Field(foreign_key="candidate.id", description="The candidate shown first (left, or above).")
    worker_id: int = Field(foreign_key="worker.id", index=True, description="The person who picked.")
    picker_turn_id: int = Field(foreign_key="turn.id", unique=True, description="The person's turn that picked.")
    reason: str = Field(default="", description="Why, if the person said.")
    at: datetime = Field(default_factory=utcnow)

