"""The ``turkflow`` command: load task documents, launch and watch batches, invite workers, migrate.

Each command parses its options, calls domain functions in one transaction and prints what happened.
Anything a user can fix ends as one line on stderr (``error: ...``) and exit status 1, never a traceback
(``turkflow --debug ...`` shows it). Settings come from ``TURKFLOW_*`` variables, read once per run.
"""

from __future__ import annotations

import atexit
import gc
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

import click

from turkflow.cli.common import (
    CONTEXT,
    App,
    CommandError,
    Dollars,
    Names,
    TurkflowGroup,
    describe,
    dollars,
    find_batch,
    find_worker,
    pass_app,
    platform_names,
    progress_bar,
    protocol_names,
    requester,
    role_names,
    shown_url,
    table,
    when,
    worker_statuses,
)
from turkflow.cli.agents import agents
from turkflow.cli.annotate import annotate, launch_annotation
from turkflow.cli.compare import compare, launch_comparison
from turkflow.cli.dataset import analyse, export, replay
from turkflow.cli.demo import demo
from turkflow.cli.mturk import batch_expire, mturk
from turkflow.cli.prolific import described_places, launch_gate, launch_terms, prolific, session_minutes_of_launch
from turkflow.cli.review import admin, review
from turkflow.cli.star import star
from turkflow.config import default
from turkflow.words import counted

# ---- the group ------------------------------------------------------------------------------------------

# A command's process ends with its command. Python's last garbage collections at exit walk every object the
# imports made, a quarter of a database command's CPU, to finalize cycles it makes no promise to finalize:
# they are frozen out of those collections instead.
atexit.register(gc.freeze)

LAZY = {"simulate": ("turkflow.simulator.cli:simulate",
                     "Simulate a crowd working a batch through the real stack, and report.")}


@click.group(cls=TurkflowGroup, context_settings=CONTEXT, lazy=LAZY)
@click.option("--debug", is_flag=True, help="Show the full traceback when a command fails.")
@click.version_option(package_name="turkflow")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Collect task-oriented dialog datasets from crowd workers, one paid HIT per turn.

    Settings come from TURKFLOW_* environment variables (`turkflow settings` lists them all). By default
    everything lives in ./var: a SQLite database, created and migrated on first use, and the secrets
    that sign invite links.

    \b
    The whole stack on this machine, with a batch to play: turkflow demo
    A first session by hand (with the stack running):
      turkflow tasks load --sample
      turkflow batch launch --all --conversations 3 --max-turns 8
      turkflow worker invite --role student
      turkflow worker invite --role teacher
      turkflow batch status --watch
    """
    if not isinstance(ctx.obj, App):
        ctx.obj = App()
    ctx.obj.debug = debug


# ---- tasks ----------------------------------------------------------------------------------------------


@main.group(context_settings=CONTEXT)
def tasks() -> None:
    """Task documents: the recipes and how-to articles conversations are about."""


@tasks.command("load", context_settings=CONTEXT)
@click.argument("file", type=click.Path(path_type=Path), required=False)
@click.option("--protocol", type=Names(protocol_names), default="wizard_of_tasks", show_default=True,
              help="What FILE holds: Wizard of Tasks documents; (star) a STAR tasks folder "
                   "(tasks/<task>/<task>.json, its knowledge base in ../apis/); (frames) a Frames domain file "
                   "(its database and goal templates); (meep) a MEEP folder (its APIs, tables and templates).")
@click.option("--sample", is_flag=True,
              help="Load the sample tasks of --protocol that come with turkflow (wherever it is installed) "
                   "instead of a FILE.")
@pass_app
def tasks_load(app: App, file: Optional[Path], protocol: str, sample: bool) -> None:
    """Load the task documents in FILE (.yaml, .yml, .json or .jsonl), or another protocol's tasks.

    Everything is checked before anything is written: one bad document loads none. A task whose id is
    already loaded is updated in place. The docs show the formats (docs/protocols/: the Wizard of Tasks'
    "Task documents", and each protocol's page); other protocols' tasks are keyed <protocol>:<name>.
    With --sample, turkflow's own sample tasks of the protocol are loaded: a first try needs no file.
    """
    from turkflow import samples
    from turkflow.protocols import registry
    from turkflow.protocols.wot import load_documents, read_documents

    if sample and file is not None:
        raise CommandError("give FILE or --sample, not both")
    if sample:
        file = samples.tasks(protocol)
        if file is None:
            raise CommandError(f"{protocol} has no sample tasks: its conversations are another batch's turns")
    elif file is None:
        raise CommandError("give the FILE to load, or --sample for turkflow's sample tasks")
    logged = registry.logged(protocol)
    if logged is not None:
        read = registry.parts(protocol).read_tasks(file)
        with app.session(create=True) as session:
            loaded = registry.load_tasks(session, read)
        click.echo(f"loaded {counted(len(read), f'{logged.title} task')} from {file}: {loaded.created} created, "
                   f"{loaded.updated} updated")
        return
    if file.is_dir():
        raise CommandError(f"{file} is a directory; give a task file, or --protocol for another protocol's "
                           "tasks")
    docs = read_documents(file)
    with app.session(create=True) as session:
        result = load_documents(session, docs)
    click.echo(f"loaded {len(docs)} task documents from {file}: {result.created} created, {result.updated} updated")


@tasks.command("list", context_settings=CONTEXT)
@click.option("--domain", help="Only documents of this domain (e.g. cooking, diy).")
@pass_app
def tasks_list(app: App, domain: Optional[str]) -> None:
    """List the loaded task documents and how many conversations each has."""
    from turkflow.reports import task_usage

    with app.session() as session:
        usage = [u for u in task_usage(session) if domain is None or u.task.domain == domain]
    if not usage:
        click.echo(f"no task documents loaded in {shown_url(app.database_url)}; run `turkflow tasks load FILE`")
        return
    click.echo(f"database: {shown_url(app.database_url)}")
    table(None, ["id", "title", "domain", "items", "steps", "conversations"],
          [(u.task.key, u.task.title, u.task.domain, len(u.task.items), len(u.task.steps), u.conversations)
           for u in usage])


# ---- batches --------------------------------------------------------------------------------------------


@main.group(context_settings=CONTEXT)
def batch() -> None:
    """Collection batches: launch, watch, pause, resume, cancel."""


@batch.command("launch", context_settings=CONTEXT)
@click.option("--tasks", "tasks_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Load this task file (updating documents already loaded) and launch over its documents.")
@click.option("--all", "all_tasks", is_flag=True, help="Launch over every loaded task document.")
@click.option("--conversations", "-n", type=click.IntRange(min=1), metavar="N",
              help="Number of conversations; task documents are assigned round-robin (required, except with "
                   "--protocol annotate and compare).")
@click.option("--reward", type=Dollars(), help="Reward per turn: USD, or a Prolific workspace's currency (0.50, "
              f"or £0.50 / $0.50).  [default: TURKFLOW_REWARD_CENTS, {default('reward_cents')} cents]")
@click.option("--max-turns", type=click.IntRange(min=2), metavar="M",
              help=f"A conversation closes after this many turns.  [default: TURKFLOW_MAX_TURNS, {default('max_turns')}]")
@click.option("--name", help="A name for the batch.  [default: the task file's name or 'all tasks', and the date]")
@click.option("--budget", type=Dollars(),
              help="Spending cap, in the reward's currency: the batch pauses instead of opening a turn that would "
                   "exceed it.")
@click.option("--provider", type=Names(platform_names),
              help="Crowd provider.  [default: TURKFLOW_PROVIDER, local]")
@click.option("--live", is_flag=True,
              help="MTurk only: publish on the live marketplace (real money) instead of the sandbox; "
                   "asks for confirmation.")
@click.option("--yes", "-y", is_flag=True,
              help="Do not ask for confirmation (for --live and Prolific batches in scripts).")
@click.option("--skip-if-exists", is_flag=True,
              help="Launch nothing if an active or paused batch with this --name exists (safe re-runs).")
@click.option("--policy", "policy_text", metavar="POLICY",
              help="Quality policy: recommended (a sequential test on ratings weighted by each rater's record, "
                   "which gold turns at onboarding start; careless and harsh raters' not counted, pasters sent "
                   "to review), paper (k=5,p=0.5, either mean: the Wizard of "
                   "Tasks heuristic), probation (pooled k=6,p=0.5 for 6, then k=20,p=0.4), or a rule such as "
                   "'pooled k=6,p=0.5'.  "
                   "[default: from TURKFLOW_QUALITY_WINDOW, TURKFLOW_BLOCK_BELOW, TURKFLOW_BLOCK_RULE, "
                   "TURKFLOW_PROBATION_TURNS: paper]")
@click.option("--dry-run", is_flag=True, help="Print what would be launched and its maximum cost, then stop.")
@click.option("--protocol", type=Names(protocol_names), default="wizard_of_tasks", show_default=True,
              help="The batch's protocol; star, frames and meep launch over their loaded tasks (with --all), "
                   "each conversation with a scenario (Frames: a goal).")
@click.option("--unhappy", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="STAR: the share of scenarios that are unhappy (the user changes their mind).")
@click.option("--conflicts", type=click.FloatRange(0, 1),
              help="STAR: the share of scenarios whose instructions conflict (a nudge changes what the user first "
                   "asked for; STAR's IntroducesConflicts), drawn apart from --unhappy.  [default: STAR's training "
                   "split's share, 0.062]")
@click.option("--suggestions", type=click.IntRange(1, 20), metavar="N",
              help="STAR: suggested replies the wizard's page shows at once, best first (STAR's showed three).  "
                   f"[default: TURKFLOW_STAR_SUGGESTIONS, {default('star_suggestions')}]")
@click.option("--tasks-per-dialog", type=click.IntRange(1, 5), default=1, show_default=True,
              help="STAR: tasks in each scenario (more than one makes multi-task dialogs).")
@click.option("--success", type=click.FloatRange(0, 1),
              help="Frames: the probability that a goal matches something in the database  [default: each "
                   "template's own]")
@click.option("--keep", "keep_text", metavar="any|session|SECONDS",
              help="Whom each conversation's next turn of a role goes to: any (whoever comes first), session (the "
                   "worker who wrote that role's last turn, while they are present) or SECONDS (that worker for "
                   "SECONDS, then anyone; local provider only).  [default: TURKFLOW_KEEP, else the protocol's own: session for STAR, "
                   "Frames and MEEP, any for the others]")
@click.option("--session-minutes", type=click.IntRange(0, 24 * 60 - 1),
              help="Prolific: a participant's place lasts a session of these minutes, in which they write turn after "
                   "turn (a turn kept for them first), paid once with --reward; 0: one turn a place.  [default: "
                   "TURKFLOW_PROLIFIC_SESSION_MINUTES for a batch that keeps session, else 0]")
@click.option("--of", "of_batches", metavar="BATCH[,BATCH...]",
              help="Annotate: the batch whose submitted turns are labelled, each turn a HIT of its own. Compare: "
                   "the batches whose finished dialogs are compared, each agent or batch of people a system.")
@click.option("--scheme", metavar="NAME|FILE",
              help="Annotate: the annotation scheme, frames (the Frames paper's acts, slots and frames) or a "
                   "scheme file (YAML or JSON: name, acts, slots, frames).")
@click.option("--annotators", type=click.IntRange(min=1), default=3, show_default=True,
              help="Annotate: annotators per turn, each a different worker (agreement needs two or more).")
@click.option("--agent", "agent_roles", multiple=True, metavar="ROLE=NAME[,NAME...]",
              help="An agent plays ROLE (turkflow agents add NAME ...; built-ins: star-suggest, sim-good, sim-poor): "
                   "its turns are answered by the agents queue, never published, never paid. Several names: each "
                   "conversation gets one at random, balanced per task, and people are never told which. "
                   "Repeatable, one role each.")
@click.option("--on-agent-failure", type=click.Choice(["end", "people"]), default="end", show_default=True,
              help="An agent's turn out of attempts (TURKFLOW_AGENT_ATTEMPTS): end the conversation with the "
                   "reason, or open the turn for people of the role.")
@click.option("--agent-seed", type=int, default=0, show_default=True,
              help="Draws which agent plays each conversation; the same seed draws the same.")
@click.option("--pairwise", is_flag=True,
              help="Per-turn pairwise: each turn of a role two or more --agent names play is answered by two of "
                   "them, and the person who writes the next turn picks the reply the dialog continues with "
                   "(Wizard of Tasks, local provider; export --format preferences writes the picks).")
@click.option("--question", metavar="TEXT",
              help="Compare: what judges are asked of each pair, e.g. \"Which assistant would you rather talk to?\"")
@click.option("--judges", type=click.IntRange(min=1), metavar="N",
              help="Compare: votes per pair of systems (the batch asks N times the number of pairs; adaptive "
                   "pairs give more of them to the pairs whose order is least sure).")
@click.option("--pairs", "pair_strategy", type=click.Choice(["adaptive", "uniform"]), default="adaptive",
              show_default=True,
              help="Compare: adaptive draws a pair of systems as likely as its order is uncertain; uniform "
                   "gives every pair of systems as many votes.")
@click.option("--owner", metavar="USERNAME",
              help="The requester the batch belongs to: they see and change it on the dashboard (turkflow admin "
                   "create USERNAME).  [default: nobody's, the operator's: admins see it]")
@pass_app
def batch_launch(app: App, tasks_file: Optional[Path], all_tasks: bool, conversations: Optional[int],
                 reward: Optional[int], max_turns: Optional[int], name: Optional[str], budget: Optional[int],
                 provider: Optional[str], live: bool, yes: bool, skip_if_exists: bool, policy_text: Optional[str],
                 dry_run: bool, protocol: str, unhappy: float, conflicts: Optional[float], suggestions: Optional[int],
                 tasks_per_dialog: int,
                 success: Optional[float], keep_text: Optional[str], session_minutes: Optional[int],
                 of_batches: Optional[str], scheme: Optional[str],
                 annotators: int, agent_roles: tuple[str, ...], on_agent_failure: str, agent_seed: int,
                 pairwise: bool,
                 question: Optional[str], judges: Optional[int], pair_strategy: str, owner: Optional[str]) -> None:
    """Launch a batch: N conversations, each opening its first (student, or STAR user) turn as a HIT.

    Every turn is its own HIT; a submitted turn opens the next one (the Celery worker does that), until
    the student stops and the teacher closes (STAR: the user completes), or --max-turns is reached.

    With --protocol annotate, the turns of the batch --of are labelled with --scheme's acts, slots and
    values (and Frames' frames), each by --annotators different workers:

    \b
      turkflow batch launch --protocol annotate --of 3 --scheme frames --annotators 3

    With --protocol compare, judges read two finished dialogs of the batches --of on the same task from two
    systems side by side and answer --question, --judges votes per pair of systems:

    \b
      turkflow batch launch --protocol compare --of 4,5 --judges 30 \\
        --question "Which assistant would you rather talk to?"
    """
    from turkflow.protocols import registry

    played = _agent_roles(agent_roles, protocol)
    of = _batch_ids(of_batches)
    owner_id = _owner(app, owner)
    if protocol == "annotate":
        if played:
            raise CommandError("--agent: annotation turns are labelled by people")
        if len(of) > 1:
            raise CommandError("--protocol annotate labels the turns of one batch: give --of BATCH")
        launched = launch_annotation(app, of=of[0] if of else None, scheme_ref=scheme, annotators=annotators,
                                     reward=reward, name=name, budget=budget,
                                     provider=provider or app.settings.provider, policy_text=policy_text,
                                     dry_run=dry_run, owner=owner_id)
        if launched is not None:
            publish_all(app, launched[0], provider or app.settings.provider, launched[1])
            click.echo(f"launched batch {launched[0]}: {len(launched[1])} annotation turns open; invite annotators: "
                       f"turkflow worker invite --role annotator --onboarded; agreement: turkflow annotate "
                       f"agreement {launched[0]} (or the dashboard)")
        return
    if protocol == "compare":
        if played:
            raise CommandError("--agent: comparisons are judged by people")
        launched = launch_comparison(app, of=of, question=question, judges=judges, strategy=pair_strategy,
                                     reward=reward, name=name, budget=budget,
                                     provider=provider or app.settings.provider, policy_text=policy_text,
                                     dry_run=dry_run, owner=owner_id)
        if launched is not None:
            publish_all(app, launched[0], provider or app.settings.provider, launched[1])
            click.echo(f"launched batch {launched[0]}: {counted(len(launched[1]), 'judgement')} open; invite judges: turkflow "
                       f"worker invite --role judge (they pass a quiz with known-answer pairs first); the ranking: "
                       f"turkflow compare report {launched[0]} (or the dashboard)")
        return
    if of or scheme:
        raise CommandError("--of applies to --protocol annotate and compare, --scheme to annotate only")
    if question or judges:
        raise CommandError("--question and --judges apply to --protocol compare only")
    if conversations is None:
        raise CommandError("give --conversations N")
    from sqlmodel import col, select

    from turkflow.hits import keep as keeping, lifecycle, money
    from turkflow.models import Batch, BatchStatus, Task
    from turkflow.protocols.questions import get_protocol
    from turkflow.protocols.wot import load_documents, read_documents
    from turkflow.quality import monitor

    if bool(tasks_file) == all_tasks:
        raise CommandError("give either --tasks FILE or --all")
    compared = lifecycle.pairwise_roles(protocol, played) if pairwise else []
    if pairwise and not compared:
        raise CommandError("--pairwise compares two agents' replies to a turn written in one answer: give a role "
                           "two or more agents (--agent teacher=A,B) of a Wizard of Tasks batch")
    if pairwise and (provider or app.settings.provider) != "local":
        raise CommandError("--pairwise batches run on --provider local")
    logged = registry.logged(protocol)
    if logged is not None and tasks_file:
        raise CommandError(f"--tasks loads Wizard of Tasks documents; load {logged.title} tasks with "
                           f"`turkflow tasks load --protocol {protocol} PATH`, then launch with --all")
    if protocol != "star" and (unhappy or conflicts is not None or suggestions is not None or tasks_per_dialog != 1):
        raise CommandError("--unhappy, --conflicts, --suggestions and --tasks-per-dialog apply to --protocol star only")
    if protocol != "frames" and success is not None:
        raise CommandError("--success applies to --protocol frames only")
    if skip_if_exists and not name:
        raise CommandError("--skip-if-exists needs --name")
    settings = app.settings
    provider = provider or settings.provider
    if logged is not None and provider not in logged.platforms:
        closed = " (Mechanical Turk closed for good on 2026-09-30)" if provider == "mturk" else ""
        raise CommandError(f"{logged.title} batches run on --provider {' or '.join(logged.platforms)}{closed}")
    if live and provider != "mturk":
        raise CommandError("--live applies to --provider mturk only")
    keep = keeping.for_launch(settings.keep if keep_text is None else keep_text, protocol, provider,
                              "--keep" if keep_text is not None else "TURKFLOW_KEEP")
    if session_minutes and provider != "prolific":
        raise CommandError("--session-minutes applies to --provider prolific only")
    if session_minutes is None:
        session_minutes = session_minutes_of_launch(settings, provider, keep.rule)
    live = provider == "mturk" and (live or settings.mturk_live)
    reward = reward if reward is not None else settings.reward_cents
    max_turns = max_turns or settings.max_turns
    rated = any(q.is_rating for form in get_protocol(protocol).roles.values() for q in form.questions)
    bonus = settings.bonus_cents if rated else 0
    name = name or f"{tasks_file.stem if tasks_file else 'all tasks'} {datetime.now().strftime('%Y-%m-%d %H:%M')}"
    docs = read_documents(tasks_file) if tasks_file else None

    if skip_if_exists:
        with app.session(create=True) as session:
            existing = session.exec(
                select(Batch).where(Batch.name == name,
                                    col(Batch.status).in_([BatchStatus.active, BatchStatus.paused]))
                .order_by(col(Batch.id).desc())
            ).first()
        if existing is not None:
            click.echo(f"batch {existing.id} \"{name}\" is already {existing.status}; launched nothing")
            return

    try:
        policy = (monitor.Policy.parse(policy_text, settings.bonus_above, bonus) if policy_text
                  else monitor.Policy.of_settings(settings, bonus))
    except monitor.PolicyError as bad:
        raise CommandError(f"--policy: {bad}") from None
    where = f"{provider} ({'LIVE marketplace' if live else 'sandbox'})" if provider == "mturk" else provider
    launch_gate(app, provider, protocol, multi_task=tasks_per_dialog > 1)
    terms = launch_terms(app, provider, reward, first_places=conversations, budget_cents=budget,
                         session_minutes=session_minutes)
    if provider == "prolific":
        where = "Prolific's test studies (its test participant only)" if terms.test else "Prolific (real studies)"
    fee_percent, amount = terms.fee_percent, (lambda cents: money.shown(cents, terms.currency))
    people_turns = sum(1 for index in range(max_turns) if _role_at(protocol, index) not in played)
    cost = money.estimate(provider, conversations, max_turns, reward, bonus, budget_cents=budget,
                          turns_per_conversation=people_turns if played else None,
                          fee_percent=fee_percent, currency=terms.currency, no_bonus=None if rated else (
                              f"no bonuses: {logged.title if logged else protocol} turns are not rated"
                              + (STAR_BONUSES if protocol == "star" else "")))
    paid_for = f"a session place of {session_minutes} minutes" if session_minutes else "a turn"
    click.echo(f"batch \"{name}\": {counted(conversations, 'conversation')} of up to {counted(max_turns, 'turn')} at "
               f"{amount(reward)} {paid_for} on {where}")
    click.echo(f"at most {amount(cost.total_cents)}: {amount(cost.rewards_cents)} rewards + "
               f"{amount(cost.bonuses_cents)} bonuses + {amount(cost.fees_cents)} fees, assuming")
    click.echo("".join(f"  - {assumption}\n" for assumption in cost.assumptions), nl=False)
    if session_minutes:
        click.echo("  - a session place for each turn: a participant who writes several turns in a session costs "
                   "less, and a session in which no turn was offered costs its reward too")
    for role, names in played.items():
        click.echo(f"  - agents play the {role}: {', '.join(names)} (their turns cost nothing"
                   + (", one drawn per conversation" if len(names) > 1 else "") + f"; on failure: {on_agent_failure})")
    for role in compared:
        click.echo(f"  - pairwise: each {role} turn is answered by two of its agents; the person who writes the next "
                   "turn picks the reply the dialog continues with")
    if not rated:
        click.echo(f"quality: no ratings; a worker {policy.judged_block} of whose last {policy.judged_window} "
                   "signals of one kind are not ok goes to review" + (STAR_SIGNALS if protocol == "star" else "") if policy.judged_block else
                   "quality: no ratings, and the policy judges no other signal (judged 0)")
    else:
        click.echo(f"quality policy: {policy.name}" + (f" ({policy.text})" if policy.name != policy.text else ""))
    if rated and policy.name == "paper":
        click.echo("  with noisy raters the paper's rule can block every worker of a role and stall the batch; "
                   "compare policies first: turkflow simulate --policy paper --compare recommended")
    if rated and not policy_text:
        click.echo("  (no --policy: the TURKFLOW_* quality settings' policy; --policy recommended judges writers by a "
                   "sequential test on ratings weighted by each rater's record and sends pasters to review)")
    if dry_run:
        return
    if docs is None:
        with app.session(create=True) as session:
            if session.exec(select(Task.id).where(Task.protocol == protocol).limit(1)).first() is None:
                raise CommandError(_no_tasks(protocol))
    if live and not yes:
        click.confirm(f"Publish on the LIVE MTurk marketplace, paying up to {dollars(cost.total_cents)} "
                      "of real money?", abort=True)
    if provider == "prolific" and not terms.test and not yes:
        click.confirm(f"Publish on Prolific, paying up to {amount(cost.total_cents)} of real money?",
                      abort=True)

    quality = policy.batch_fields()
    with app.session(create=True) as session:
        if docs is not None:
            load_documents(session, docs)
            chosen = list(session.exec(select(Task).where(col(Task.key).in_([d["key"] for d in docs]))
                                       .order_by(Task.id)))
        else:
            chosen = list(session.exec(select(Task).where(Task.protocol == protocol).order_by(Task.id)))
        scenarios = None
        if logged is not None:
            if not chosen:
                raise CommandError(_no_tasks(protocol))
            star_options = {"unhappy": unhappy, "tasks_per_dialog": tasks_per_dialog,
                            **({"conflicts": conflicts} if conflicts is not None else {})}
            options = (star_options if protocol == "star"
                       else {"success": success} if protocol == "frames" else {})
            scenarios = registry.parts(protocol).make_scenarios(chosen, conversations, **options)
        from turkflow.agents.registry import find_agents

        playing = {role: find_agents(session, names) for role, names in played.items()}
        new_batch, hits = lifecycle.launch_batch(
            session, chosen, conversations, name=name, provider=provider, reward_cents=reward,
            max_turns=max_turns, budget_cents=budget, live=live, quality=quality, protocol=protocol,
            scenarios=scenarios, keep=keep, agents=playing, on_agent_failure=on_agent_failure,
            seed=agent_seed, pairwise=pairwise, requester_id=owner_id,
        )
        new_batch.fee_percent, new_batch.currency = fee_percent, terms.currency
        new_batch.suggestions_shown = settings.star_suggestions if suggestions is None else suggestions
        new_batch.platform_terms = terms.platform_terms  # what its studies are made with, whoever makes them
        batch_id, hit_ids, task_count = new_batch.id, [h.id for h in hits], len(chosen)

    publish_all(app, batch_id, provider, hit_ids)
    first = get_protocol(protocol).first_role
    click.echo(f"launched batch {batch_id} \"{name}\": {counted(conversations, 'conversation')} over "
               f"{counted(task_count, 'task')}, {counted(len(hit_ids), f'{first} turn')} open on {where}")
    if owner:
        click.echo(f"it belongs to {owner}: they see and change it on the dashboard")
    click.echo(f"keep {keep.as_option()}: {keep.described()}")
    if session_minutes:
        click.echo(f"places: {described_places(session_minutes, reward, terms.currency)}")
    click.echo(f"watch it: turkflow batch status {batch_id} --watch")
    if provider == "local":
        roles = list(get_protocol(protocol).roles)
        click.echo(f"invite workers: turkflow worker invite --role {roles[0]} (and --role {roles[1]})")


def _batch_ids(text: Optional[str]) -> list[int]:
    """--of's batch ids, written 3 or 3,4."""
    if not text:
        return []
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(f"--of: expected batch ids separated by commas, got {text[:40]!r}") from None


# STAR pays no per-turn bonus: its paper's bonuses (appendix B: for the qualification quiz, and for a top 10%
# of workers chosen by reading samples of their work) are a requester's decisions, not a rule on the turns.
STAR_BONUSES = (" (STAR's paper paid a quiz bonus and, to a top 10% chosen by reading samples, a bonus per "
                "assignment: decide those by hand with the review)")
STAR_SIGNALS = (" (STAR: a written turn's content checks, the wizard's agreement with the knowledge base and "
                "the flow chart, the other role's end-of-dialog answers)")


def _owner(app: App, username: Optional[str]) -> Optional[int]:
    """The id of the requester --owner names (checked before anything is launched), or None: the operator's."""
    if username is None:
        return None
    from turkflow.errors import NotFound
    from turkflow.requesters import find_requester

    with app.session() as session:
        try:
            return find_requester(session, username).id
        except NotFound:
            raise CommandError(f"--owner: no dashboard user {username!r}; `turkflow admin list` shows them") from None


def _agent_roles(given: tuple[str, ...], protocol: str) -> dict[str, list[str]]:
    """``--agent ROLE=NAME[,NAME...]`` options as {role: [names]}, each checked against the protocol."""
    from turkflow.protocols.questions import get_protocol

    played: dict[str, list[str]] = {}
    roles = get_protocol(protocol).roles
    for option in given:
        role, _, names = option.partition("=")
        listed = [n.strip() for n in names.split(",") if n.strip()]
        if not listed or role.strip() not in roles:
            raise CommandError(f"--agent {option!r}: give ROLE=NAME[,NAME...] with a role of {protocol} "
                               f"({', '.join(roles)})")
        if role.strip() in played or len(set(listed)) != len(listed):
            raise CommandError(f"--agent {option!r}: one --agent per role, each agent named once")
        played[role.strip()] = listed
    return played


def _role_at(protocol: str, index: int) -> str:
    """The role of a conversation's turn ``index`` (roles take turns, the first role first)."""
    from turkflow.protocols.questions import get_protocol

    spec = get_protocol(protocol)
    role = spec.first_role
    for _ in range(index):
        role = spec.next_role(role)
    return role


def _no_tasks(protocol: str) -> str:
    """What to run when a protocol has no tasks loaded (said before any money is asked for)."""
    from turkflow.protocols import registry

    logged = registry.logged(protocol)
    if logged is None:
        return "no task documents loaded; run `turkflow tasks load FILE` first (or launch with --tasks FILE)"
    return f"no {logged.title} tasks loaded; run `turkflow tasks load --protocol {protocol} PATH` first"


def publish_all(app: App, batch_id: int, provider: str, hit_ids: list[int]) -> None:
    """Publish the new HITs one by one.

    If the very first one fails, the provider cannot publish at all (credentials, settings): the batch
    is cancelled at once, so no batch sits waiting for HITs that will never appear. If it fails part-way
    (a throttle, a network blip), the batch stands and the reconciler publishes the rest.
    """
    from turkflow import pipeline
    from turkflow.hits import lifecycle
    from turkflow.models import Batch, BatchStatus

    from sqlmodel import col, select

    from turkflow.models import Hit

    with app.session() as session:  # an agent's first turns are the agents queue's, never the platform's
        where = dict(session.exec(select(Hit.id, Hit.provider).where(col(Hit.id).in_(hit_ids))).all())
    done = 0
    with progress_bar(transient=True) as bar:
        task = bar.add_task(f"publishing on {provider}", total=len(hit_ids), detail="")
        try:
            for hit_id in hit_ids:
                pipeline.publish(app.settings, app.providers, hit_id, where.get(hit_id, provider))
                done += 1
                bar.advance(task)
        except Exception as exc:
            if app.debug:
                raise
            reason = describe(exc, app)
            if done == 0:
                with app.session() as session:
                    lifecycle.set_batch_status(session, session.get(Batch, batch_id), BatchStatus.cancelled,
                                               requester())
                raise CommandError(f"nothing was published ({reason}); batch {batch_id} is cancelled") from None
            raise CommandError(
                f"batch {batch_id} was launched but only {done} of {len(hit_ids)} HITs were published "
                f"({reason}); the reconciler (celery beat) publishes the rest"
            ) from None


@batch.command("status", context_settings=CONTEXT)
@click.argument("batch_id", type=int, required=False)
@click.option("--watch", is_flag=True,
              help="Show a live progress bar until the batch completes or is cancelled (the newest batch "
                   "if no BATCH_ID), and a 'stalled:' line when a role stalls (again when it clears). "
                   "Ctrl-C stops watching, not the batch.")
@click.option("--interval", type=click.FloatRange(min=0.2), default=2.0, show_default=True,
              help="Seconds between refreshes with --watch.")
@pass_app
def batch_status(app: App, batch_id: Optional[int], watch: bool, interval: float) -> None:
    """Progress of one batch (BATCH_ID), or a table of the recent batches.

    Shows conversations completed and active, turns submitted, open HITs (and how many a worker holds
    right now) and money: spent (approved rewards, paid bonuses, fees), pending, committed, the budget.
    A role whose waiting turns have no eligible worker left shows as 'stalled'.
    """
    from turkflow.hits import money
    from turkflow.reports import batch_progress, recent_batches

    if batch_id is None and not watch:
        with app.session() as session:
            rows = [batch_progress(session, b.id) for b in recent_batches(session)]
        if not rows:
            click.echo(f"no batches yet in {shown_url(app.database_url)}; launch one with `turkflow batch launch`")
            return
        click.echo(f"database: {shown_url(app.database_url)}")
        table("batches (newest first)",
              ["id", "name", "provider", "status", "conversations done", "turns", "open HITs", "spent", "budget"],
              [(p.batch.id, p.batch.name, p.batch.provider + (" live" if p.batch.live else ""),
                p.batch.status + (f" (stalled: {', '.join(p.stalled_roles)})" if p.stalled_roles else ""),
                f"{p.completed}/{p.conversations}", p.turns_submitted, p.hits_open,
                money.shown(p.spend.total_cents, p.batch.currency),
                money.shown(p.batch.budget_cents, p.batch.currency) if p.batch.budget_cents is not None else "")
               for p in rows])
        return
    with app.session() as session:
        batch_id = find_batch(session, batch_id).id
        progress = batch_progress(session, batch_id)
    if watch:
        progress = watch_batch(app, progress, interval)
    show_progress(progress, app.database_url)


def watch_batch(app: App, progress, interval: float):  # noqa: ANN001, ANN201 - reports.BatchProgress
    """Refresh the bar until the batch ends; a stall is printed (on stdout) once when seen, and once when it
    clears, because a stalled batch never ends by itself."""
    from turkflow.hits import money
    from turkflow.reports import batch_progress

    def detail(p) -> str:  # noqa: ANN001
        stalled = f" · stalled: {', '.join(p.stalled_roles)}" if p.stalled_roles else ""
        return (f"done · {p.batch.status} · {counted(p.turns_submitted, 'turn')} · {counted(p.hits_open, 'open HIT')} · "
                f"{money.shown(p.spend.total_cents, p.batch.currency)} spent{stalled}")

    shown: set[str] = set()

    def tell(p) -> None:  # noqa: ANN001
        for role, message in zip(p.stalled_roles, p.stalled):
            if role not in shown:
                click.echo(f"stalled: {message}")
        for role in sorted(shown - set(p.stalled_roles)):
            click.echo(f"stall cleared: {role}")
        shown.clear()
        shown.update(p.stalled_roles)

    with progress_bar() as bar:
        task = bar.add_task(f"batch {progress.batch.id}", total=progress.conversations,
                            completed=progress.completed + progress.cancelled, detail=detail(progress))
        tell(progress)
        try:
            while not progress.finished:
                time.sleep(interval)
                with app.session() as session:
                    progress = batch_progress(session, progress.batch.id)
                bar.update(task, completed=progress.completed + progress.cancelled, detail=detail(progress))
                tell(progress)
        except KeyboardInterrupt:
            pass
    return progress


def show_progress(p, database_url: str) -> None:  # noqa: ANN001 - reports.BatchProgress
    from turkflow.hits import keep as keeping, money

    b = p.batch

    def dollars(cents: int) -> str:  # amounts in the batch's currency
        return money.shown(cents, b.currency)

    where = b.provider + ((" (live)" if b.live else " (sandbox)") if b.provider == "mturk" else "")
    budget = f" of a {dollars(b.budget_cents)} budget" if b.budget_cents is not None else ""
    lines = [
        f"batch {b.id} \"{b.name}\": {b.status}, {where}, launched {when(b.created_at)}",
        f"  database       {shown_url(database_url)}",
        f"  conversations  {p.completed} completed, {p.active} active, {p.cancelled} cancelled "
        f"({p.conversations} in all)",
        f"  turns          {p.turns_submitted} submitted (up to {b.max_turns} per conversation, "
        f"{dollars(b.reward_cents)} each)",
        f"  open HITs      {p.hits_open} ({p.hits_taken} taken by a worker now), "
        f"{p.hits_pending} waiting to be published",
        f"  spent          {dollars(p.spend.total_cents)} = {dollars(p.spend.rewards_cents)} rewards approved + "
        f"{dollars(p.spend.bonuses_cents)} bonuses paid + {dollars(p.spend.fees_cents)} fees; "
        f"{dollars(p.spend.pending_cents)} pending (submitted, not yet approved or paid)",
        f"  committed      {dollars(p.committed_cents)}{budget} (every published turn's reward and every bonus)",
    ]
    lines.append(f"  keep           {keeping.of_batch(b).as_option()}: {keeping.of_batch(b).described()}")
    minutes = b.platform_terms.get("session_minutes") or 0
    if b.provider == "prolific":
        lines.append(f"  places         {described_places(minutes, b.reward_cents, b.currency)}")
    lines += [f"stalled: {message}" for message in p.stalled]
    click.echo("\n".join(lines))


@batch.command("surveys", context_settings=CONTEXT)
@click.argument("batch_id", type=int)
@pass_app
def batch_surveys(app: App, batch_id: int) -> None:
    """How the batch's dialogs were judged at their end: every survey question with the count of each answer
    (STAR's questionnaires, Frames' cooperativity rating and goal question, MEEP's success)."""
    from turkflow.models import Batch
    from turkflow.protocols import surveys

    with app.session() as session:
        batch_row = session.get(Batch, batch_id)
        if batch_row is None:
            raise CommandError(f"no batch {batch_id} in {shown_url(app.database_url)}")
        answered = surveys.distribution(session, batch_id)
        success = None
        if batch_row.protocol == "frames":
            from turkflow.protocols.frames.dialog import success_summary

            success = success_summary(session, batch_id)
    if not answered:
        raise CommandError(f"batch {batch_id} follows {batch_row.protocol}, whose dialogs end without questions")
    table(f"batch {batch_id}: end-of-dialog answers", ["role", "question", "answers", "answered"],
          [(q.role, q.label, ", ".join(f"{answer}: {n}" for answer, n in q.counts.items()), q.answered)
           for q in answered])
    if success is not None:  # Frames: success against each template's probability
        table(f"batch {batch_id}: goals that could succeed, and success as the wizards judged it",
              ["template", "p", "goals", "could succeed", "99% interval", "judged", "reached", "mean rating"],
              [(row["template"], row["probability"], row["dialogs"], row["feasible"],
                f"{row['expected'][0]}-{row['expected'][1]}" + ("" if row["feasible_as_expected"] else " (outside)"),
                row["judged"], row["reached"],
                "" if row["mean_rating"] is None else f"{row['mean_rating']:.2f}")
               for row in success["templates"]])


@batch.command("pause", context_settings=CONTEXT)
@click.argument("batch_id", type=int)
@pass_app
def batch_pause(app: App, batch_id: int) -> None:
    """Stop a batch from opening new turns; its open turns leave the local queue until resumed."""
    from turkflow.hits import lifecycle
    from turkflow.models import BatchStatus

    with app.session() as session:
        lifecycle.set_batch_status(session, find_batch(session, batch_id), BatchStatus.paused, requester())
    click.echo(f"batch {batch_id} paused; `turkflow batch resume {batch_id}` continues it")


@batch.command("resume", context_settings=CONTEXT)
@click.argument("batch_id", type=int)
@pass_app
def batch_resume(app: App, batch_id: int) -> None:
    """Resume a paused batch and reopen the conversations that stalled while it was paused.

    This runs the reconciler at once (without its usual grace period), so turns submitted during the
    pause get their next HIT now rather than on the reconciler's next round.
    """
    from turkflow import pipeline
    from turkflow.hits import lifecycle
    from turkflow.models import BatchStatus

    with app.session() as session:
        lifecycle.set_batch_status(session, find_batch(session, batch_id), BatchStatus.active, requester())
    repairs = pipeline.reconcile(app.settings.model_copy(update={"stuck_after_seconds": 0, "reopen_after_seconds": 0}),
                                 app.providers)
    click.echo(f"batch {batch_id} resumed: {len(repairs.conversations_advanced)} stalled conversations reopened, "
               f"{len(repairs.hits_published)} waiting HITs published")


@batch.command("cancel", context_settings=CONTEXT)
@click.argument("batch_id", type=int)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_app
def batch_cancel(app: App, batch_id: int, yes: bool) -> None:
    """Cancel a batch for good: its open HITs expire at the provider and its conversations end.

    Turns already submitted stay in the dataset. A cancelled batch cannot be resumed.
    """
    from turkflow.hits import lifecycle
    from turkflow.models import BatchStatus

    if not yes:
        click.confirm(f"Cancel batch {batch_id}? Its open HITs expire and it cannot be resumed", abort=True)
    with app.session() as session:
        expired = lifecycle.set_batch_status(session, find_batch(session, batch_id), BatchStatus.cancelled,
                                             requester())
        # Expire inside the transaction: if the provider fails, nothing is cancelled and a retry is clean.
        with progress_bar(transient=True) as bar:
            task = bar.add_task("expiring HITs", total=len(expired), detail="")
            for hit in expired:
                app.providers.get(hit.provider).expire(session, hit)
                bar.advance(task)
    click.echo(f"batch {batch_id} cancelled: {counted(len(expired), 'open HIT')} expired")


# ---- workers --------------------------------------------------------------------------------------------


@main.group(context_settings=CONTEXT)
def worker() -> None:
    """Workers: invite people to the local queue, list everyone and their status."""


@worker.command("invite", context_settings=CONTEXT)
@click.option("--role", type=Names(role_names), required=True,
              help="The worker's role for the whole study (student or teacher; user or wizard for STAR).")
@click.option("--name", help="A name to recognise the worker by in lists and on the dashboard.")
@click.option("--onboarded", is_flag=True,
              help="Skip the role's onboarding quiz: you vouch that this person knows the guidelines.")
@pass_app
def worker_invite(app: App, role: str, name: Optional[str], onboarded: bool) -> None:
    """Register a local worker and print their personal join link (on stdout, alone).

    The link is the worker's only key to the local queue: send it to that person only. It points at
    TURKFLOW_PUBLIC_URL (default: http://127.0.0.1:TURKFLOW_PORT), so set that to an address the worker
    can reach. The worker passes their role's onboarding quiz before their first turn, unless --onboarded.
    """
    from turkflow.invites import invite_worker

    with app.session(create=True) as session:
        new, url = invite_worker(session, app.settings.secret_key, app.settings.public_url, role, name, onboarded)
    first = "onboarded already" if onboarded else f"the {role} onboarding comes first"
    click.echo(f"invited worker {new.id} ({role}{', ' + name if name else ''}; {first}); their join link:", err=True)
    click.echo(url)


@worker.command("link", context_settings=CONTEXT)
@click.argument("worker_ref")
@pass_app
def worker_link(app: App, worker_ref: str) -> None:
    """Print the join link of an existing worker again (WORKER_REF: id, worker id or unique name)."""
    from turkflow.invites import invite_url

    with app.session() as session:
        found = find_worker(session, worker_ref)
    click.echo(invite_url(app.settings.secret_key, app.settings.public_url, found))


@worker.command("list", context_settings=CONTEXT)
@click.option("--role", type=Names(role_names), help="Only workers of this role.")
@click.option("--status", type=Names(worker_statuses), help="Only workers with this status.")
@pass_app
def worker_list(app: App, role: Optional[str], status: Optional[str]) -> None:
    """List workers with their role, status and the turns they wrote."""
    from turkflow.reports import worker_activity

    with app.session() as session:
        rows = worker_activity(session, role=role, status=status)
    if not rows:
        found = "match" if role or status else "yet"
        click.echo(f"no workers {found} in {shown_url(app.database_url)}"
                   + ("" if role or status else "; `turkflow worker invite` adds one"))
        return
    click.echo(f"database: {shown_url(app.database_url)}")
    table(None, ["id", "worker", "name", "role", "status", "turns", "last turn"],
          [(a.worker.id, a.worker.external_id, a.worker.name, a.worker.role, a.worker.status, a.turns_submitted,
            when(a.last_turn_at)) for a in rows])


# ---- database -------------------------------------------------------------------------------------------


@main.group(context_settings=CONTEXT)
def db() -> None:
    """The database schema (Alembic migrations)."""


@db.command("upgrade", context_settings=CONTEXT)
@click.option("--revision", default="head", show_default=True, help="Migrate to this revision.")
@pass_app
def db_upgrade(app: App, revision: str) -> None:
    """Create or migrate the database schema at TURKFLOW_DATABASE_URL. Safe to run again.

    Run it once after installing or upgrading turkflow, before starting the web and Celery processes
    (SQLite databases are also migrated automatically by the other commands).
    """
    from turkflow.db import schema_revisions, upgrade

    upgrade(app.settings.database_url, revision)
    at = ", ".join(sorted(schema_revisions(app.settings.database_url))) or "base (empty)"
    click.echo(f"database {shown_url(app.settings.database_url)} is at revision {at}")



# ---- settings -------------------------------------------------------------------------------------------

SECRETS = ("secret_key", "worker_hash_key")


@main.command("settings", context_settings=CONTEXT)
@click.option("--markdown", is_flag=True,
              help="Print the reference table of every setting with its default (the docs' settings reference) instead.")
@pass_app
def show_settings(app: App, markdown: bool) -> None:
    """Show every setting: its TURKFLOW_* variable, its value here, and what it means.

    Secrets are never printed, only whether they are set.
    """
    from turkflow.config import Settings

    fields = Settings.model_fields
    if markdown:
        click.echo("| Variable | Default | Meaning |\n|---|---|---|")
        for name, info in fields.items():
            default = info.default if info.default not in ("", None) else ""
            click.echo(f"| `TURKFLOW_{name.upper()}` | {f'`{default}`' if default != '' else ''} | {info.description} |")
        return
    current = app.settings

    def shown(name: str) -> Any:
        if name in SECRETS:
            return "(set)"
        return shown_url(getattr(current, name)) if name.endswith("_url") else getattr(current, name)

    table(None, ["variable", "value", "meaning"],
          [(f"TURKFLOW_{name.upper()}", shown(name), info.description) for name, info in fields.items()])


# ---- the subcommands that live in their own modules ---------------------------------------------------

main.add_command(demo)
main.add_command(review)
main.add_command(admin)
main.add_command(export)
main.add_command(analyse)
main.add_command(replay)
main.add_command(mturk)
main.add_command(prolific)
main.add_command(star)
main.add_command(annotate)
main.add_command(agents)
main.add_command(compare)
batch.add_command(batch_expire)
