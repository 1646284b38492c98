"""One simulation from parameters to report: on a stack that is already running, or on one started here."""

from __future__ import annotations

import importlib
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from turkflow.config import Settings, default
from turkflow.db import session_scope
from turkflow.hits import keep as keeping
from turkflow.quality.monitor import Policy
from turkflow.simulator.crowd import Behaviour, SimWorker, build_crowd
from turkflow.simulator import DEFAULT_POLICIES, PLAYED, prolific
from turkflow.simulator.driver import ProtocolPlay, Simulation
from turkflow.simulator.agents import agents_report, declare_fake
from turkflow.simulator.fake_openai import FakeOpenAI
from turkflow.simulator.fake_prolific import FakeProlific
from turkflow.simulator.prolific import ProlificCrowd
from turkflow.simulator.report import build_report
from turkflow.simulator.stack import Stack
from turkflow.simulator.star import star_root
from turkflow.simulator.utterances import Script, default_dialogs_dir, read_dialogs, write_scripts


# the protocols played on their own pages, each by a module whose ``play_for(config)`` gives the scripts and
# the ``ProtocolPlay``
PLAYS = {name: f"turkflow.simulator.{name}" for name in PLAYED}


@dataclass(frozen=True)
class SimulationConfig:
    students: int = 10
    teachers: int = 10
    conversations: int = 10
    max_turns: int = default("max_turns")
    mean_turns: Optional[int] = None  # None: each conversation lasts as long as the dialog it replays
    mix: dict[str, float] = field(default_factory=lambda: {"spammer": 0.15, "careless": 0.10})
    think_time: float = 0.0
    concurrency: int = 16
    seed: int = 1
    policy: str = "k=5,p=0.5"
    compare: tuple[str, ...] = DEFAULT_POLICIES
    reward_cents: int = default("reward_cents")
    bonus_above: float = default("bonus_above")
    bonus_cents: int = default("bonus_cents")
    settle_timeout: float = 60.0
    dialogs: Optional[Path] = None  # SGD dialogues; with protocol "star", a STAR root (star.star_root)
    provider: str = "local"  # or "prolific": the batch runs on the fake Prolific
    protocol: str = "wizard_of_tasks"  # or one of PLAYS: its workers on its own pages
    prolific_time_outs: float = 0.0  # share of written turns whose participant never goes back to Prolific
    prolific_lost_pays: int = 0  # the first N bonus pay calls fail on Prolific's side and pay nothing
    keep: str = ""  # the batch's --keep (turkflow.hits.keep): any, session or SECONDS; "": the protocol's own
    away: float = 0.0  # the share of rounds a worker sits out (people come and go)
    away_rounds: float = 1.0  # the mean length of an absence in rounds (1: each round drawn on its own)
    leave: float = 0.0  # the share of each role's workers who leave for good halfway through (mid-session)
    # roles agents play ({role: (name, ...)}): built-ins (sim-good, sim-poor, sim-NN, star-suggest), or "fake", an
    # endpoint agent answered by a fake OpenAI-compatible server in this process (fake_endpoint_delay seconds)
    agents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fake_endpoint_delay: float = 0.0

    def parameters(self) -> dict[str, Any]:
        values = asdict(self)
        values["dialogs"] = str(star_root(self.dialogs) if self.protocol == "star"
                                else self.dialogs or default_dialogs_dir() if self.protocol not in PLAYS
                                else self.dialogs or "")
        values["compare"] = list(self.compare)
        values["agents"] = {role: list(names) for role, names in self.agents.items()}
        return values


@dataclass(frozen=True)
class Plan:
    """Everything decided before a single request: the crowd, the scripts, the policies."""

    crowd: list[SimWorker]
    scripts: list[Script]
    policy: Policy  # what the live monitor runs
    policies: list[Policy]  # what the report compares on the collected ratings
    play: Optional[ProtocolPlay] = None  # another protocol's turns than Wizard of Tasks'


def plan(config: SimulationConfig) -> Plan:
    """Check the parameters and draw the crowd and the scripts; raises ValueError naming what is wrong."""
    if config.conversations < 1:
        raise ValueError("conversations must be at least 1")
    if config.max_turns < 2:
        raise ValueError("max-turns must be at least 2")
    if config.concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if config.think_time < 0:
        raise ValueError("think-time cannot be negative")
    if config.provider not in ("local", "prolific"):
        raise ValueError(f"provider must be local or prolific, not {config.provider!r}")
    if config.protocol not in ("wizard_of_tasks", *PLAYS):
        raise ValueError(f"protocol must be one of wizard_of_tasks, {', '.join(PLAYS)}, not {config.protocol!r}")
    if not 0.0 <= config.prolific_time_outs <= 1.0 or config.prolific_lost_pays < 0:
        raise ValueError("prolific-time-outs must be a share between 0 and 1, prolific-lost-pays at least 0")
    if (config.prolific_time_outs or config.prolific_lost_pays) and config.provider != "prolific":
        raise ValueError("--prolific-time-outs and --prolific-lost-pays need --provider prolific")
    keeping.for_launch(config.keep or None, config.protocol, config.provider)  # refused as batch launch refuses it
    if not 0.0 <= config.away < 1.0:
        raise ValueError("away must be a chance from 0 up to (not including) 1")
    if config.away_rounds < 1.0:
        raise ValueError("away-rounds must be at least 1")
    if not 0.0 <= config.leave < 1.0:
        raise ValueError("leave must be a share from 0 up to (not including) 1")
    if config.agents and (config.protocol != "wizard_of_tasks" or config.provider != "local"):
        raise ValueError("--agent simulates Wizard of Tasks batches on the local provider")
    unknown_roles = sorted(set(config.agents) - {"student", "teacher"})
    if unknown_roles:
        raise ValueError(f"--agent: no role {unknown_roles[0]!r} in Wizard of Tasks (student, teacher)")
    try:
        mix = {Behaviour(name): share for name, share in config.mix.items()}
    except ValueError:
        raise ValueError(f"unknown behaviour in {sorted(config.mix)}; known: "
                         f"{', '.join(b.value for b in Behaviour)}") from None
    play: Optional[ProtocolPlay] = None
    if config.protocol in PLAYS:
        scripts, play = importlib.import_module(PLAYS[config.protocol]).play_for(config)
        crowd = build_crowd(config.students, config.teachers, mix, config.seed, roles=play.roles)
    else:
        crowd = build_crowd(config.students, config.teachers, mix, config.seed, played_by_agents=tuple(config.agents))
        directory = config.dialogs or default_dialogs_dir()
        if not directory.is_dir():
            raise ValueError(f"dialogs directory {directory} does not exist; "
                             "pass --dialogs DIR with SGD dialogues_*.json.gz")
        scripts = write_scripts(read_dialogs(directory), config.conversations, config.seed, config.mean_turns)

    def policy(text: str) -> Policy:
        return Policy.parse(text, bonus_above=config.bonus_above, bonus_cents=config.bonus_cents)

    live = policy(config.policy)
    compared = [policy(text) for text in config.compare]
    if live not in compared:
        compared.insert(0, live)
    return Plan(crowd=crowd, scripts=scripts, policy=live, policies=compared, play=play)


Progress = Callable[[int, int], None]


def run_on(settings: Settings, url: str, config: SimulationConfig,
           progress: Optional[Progress] = None,
           on_prolific: Optional[ProlificCrowd] = None, web_urls: Sequence[str] = ()) -> dict[str, Any]:
    """Simulate against a running web server and Celery worker that share ``settings``' database (on
    Prolific: and whose Prolific is the fake of ``on_prolific``, which runs in this process). ``web_urls``:
    several web servers behind the public ``url``, each simulated worker's requests going to one of them."""
    chosen = plan(config)
    if config.provider == "prolific" and on_prolific is None:
        raise ValueError("a simulation on Prolific starts its own stack around the fake Prolific; "
                         "it cannot use a running server (--url)")
    simulation = Simulation(
        settings, url, chosen.crowd, chosen.scripts, seed=config.seed, max_turns=config.max_turns,
        policy=chosen.policy, reward_cents=config.reward_cents, think_time=config.think_time,
        concurrency=config.concurrency, settle_timeout=config.settle_timeout, progress=progress,
        prolific=on_prolific, play=chosen.play, web_urls=web_urls, time_outs=config.prolific_time_outs,
        keep=config.keep, away=config.away, away_rounds=config.away_rounds, leave=config.leave, agents=config.agents)
    with ExitStack() as running:
        if "fake" in {name for names in config.agents.values() for name in names}:
            fake = running.enter_context(FakeOpenAI(delay=config.fake_endpoint_delay, seed=config.seed))
            declare_fake(settings, fake.url)
        outcome = simulation.run()
    with session_scope(settings.database_url) as session:
        report = build_report(session, outcome, config.parameters(), chosen.policies,
                              settings.prolific_fee_percent)
        if config.agents:
            report["reproducible"]["agents"] = agents_report(session, outcome)
        if chosen.play is not None:
            report["reproducible"][chosen.play.protocol] = chosen.play.report(session, outcome)
    if on_prolific is not None:  # the batch is written: every turn and bonus paid, or left for a person
        settled = prolific.settle(settings, on_prolific, outcome)
        report["prolific_left_for_a_person"] = settled.pop("left_for_a_person")
        report["reproducible"]["prolific_settlement"] = settled
    return report


def run_with_stack(settings: Settings, run_dir: Path, config: SimulationConfig, *, web_workers: int = 3,
                   web_threads: int = 4, celery_concurrency: int = 2, own_redis: bool = True,
                   progress: Optional[Progress] = None,
                   prolific_contract: Optional[Path] = None,
                   prolific_fake: Optional[FakeProlific] = None) -> dict[str, Any]:
    """Start redis-server, gunicorn and a Celery worker on ``settings``, simulate, stop them.

    On Prolific the fake Prolific starts first, on a loopback port, and the stack's settings point at it
    (``prolific.settings_for``); ``prolific_contract`` is the contract it checks calls against (default:
    the copy shipped in the package). The report's ``prolific``
    says whether calls were checked and what the fake saw. A test passes its own running fake as
    ``prolific_fake`` to look at it afterwards.
    """
    chosen = plan(config)  # refuse bad parameters before starting anything
    on_prolific = None
    contract, unchecked_because = (prolific.contract_to_check(prolific_contract)
                                   if config.provider == "prolific" and not prolific_fake
                                   else (None, "the fake was started without a contract"))
    with ExitStack() as running:
        if config.provider == "prolific":
            fake = prolific_fake or running.enter_context(prolific.started_fake(contract))
            fake.lose_pays = config.prolific_lost_pays
            on_prolific = prolific.crowd_on(fake, chosen.crowd)
            settings = prolific.settings_for(settings, on_prolific, chosen.crowd)
        with Stack(settings, run_dir / "logs", web_workers=web_workers, web_threads=web_threads,
                   celery_concurrency=celery_concurrency, own_redis=own_redis) as stack:
            if on_prolific is None:
                report = run_on(stack.settings, stack.url, config, progress, on_prolific)
            else:  # studies point at the rehearsal address; participants reach the stack's web process
                public = stack.settings.model_copy(update={"public_url": prolific.REHEARSAL_URL})
                report = run_on(public, prolific.REHEARSAL_URL, config, progress, on_prolific, web_urls=[stack.url])
        if on_prolific is not None:  # the stack has stopped: every call it made is counted
            report["prolific"] = prolific.contract_report(on_prolific.fake, unchecked_because)
    report["stack"] = {"web_workers": web_workers, "web_threads": web_threads,
                       "celery_concurrency": celery_concurrency,
                       "database": settings.database_url.split(":", 1)[0]}
    return report
