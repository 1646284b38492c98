"""``turkflow prolific``: the Prolific workspace turkflow collects in (check, each role's onboarding study,
participant groups, spend, test participants, webhooks).

Registered by ``turkflow.cli.main``; the plumbing (settings, sessions, one-line errors) is
``turkflow.cli.common``'s.
A Prolific batch is launched with ``turkflow batch launch --provider prolific``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

import click

from turkflow.cli.common import (CONTEXT, App, CommandError, Dollars, Names, check_currency, find_batch, pass_app,
                                 protocol_names, role_names, table)
from turkflow.cli.mturk import mturk_spend
from turkflow.protocols.star import MULTI_TASK, SINGLE_TASK
from turkflow.words import counted

if TYPE_CHECKING:
    from turkflow.config import Settings
    from turkflow.hits.prolific import api
    from turkflow.hits.prolific.provider import ProlificProvider
    from turkflow.models import ProlificOnboarding


@dataclass(frozen=True)
class LaunchTerms:
    """What a new batch's money is counted in: the platform's currency, and the fee its budget counts
    (Prolific's service fee with the VAT on it, ``money.fee_with_vat``); and what decides what it publishes
    (Prolific: ``terms.StudyTerms``), stored with it."""

    currency: str = "USD"
    fee_percent: float = 0.0
    platform_terms: dict[str, Any] = field(default_factory=dict)

    @property
    def test(self) -> bool:
        """Prolific's test studies: nothing real is published."""
        return bool(self.platform_terms.get("test"))


def launch_terms(app: App, provider: str, reward_cents: int, first_places: int = 1,
                 budget_cents: Optional[int] = None, session_minutes: int = 0) -> LaunchTerms:
    """A batch's terms, and Prolific's rules for its turn studies checked before anything is created: the
    workspace's currency (asked of Prolific; an amount typed with another currency's symbol is refused), its
    least pay an hour at TURKFLOW_PROLIFIC_ESTIMATED_MINUTES, the least and the longest maximum time, a
    balance that covers the ``first_places`` (the first turns) with the fee, as Prolific wants before it
    publishes a study, and the public address the studies send participants to (``public.check``; a
    warning when it does not answer from here). A broken rule is one line naming the option or setting to
    change. The study terms come from this process's settings once, here, and are stored with the batch. With
    ``session_minutes`` a place lasts a session: the reward pays the session at Prolific's least an hour on
    its minutes (``--session-minutes``)."""
    from turkflow.errors import InvalidInput
    from turkflow.hits import money
    from turkflow.hits.prolific import api, rules
    from turkflow.hits.prolific.terms import StudyTerms

    if provider != "prolific":
        for amount, option in ((reward_cents, "--reward"), (budget_cents, "--budget")):
            check_currency(amount, "USD", option, "the local queue" if provider == "local" else provider)
        return LaunchTerms()
    settings = app.settings
    prolific_provider = _provider(app)
    try:
        study_terms = StudyTerms.of_settings(settings, session_minutes)
    except InvalidInput as bad:
        raise CommandError(str(bad)) from None
    _public_page(app, study_terms.public_url + "/prolific/turn", "the turn studies", study_terms.rehearsal_host)
    balance = _asking(app, lambda: api.get_workspace_balance(prolific_provider.client, settings.prolific_workspace_id))
    currency = balance.get("currency_code") or "GBP"
    for amount, option in ((reward_cents, "--reward"), (budget_cents, "--budget")):
        check_currency(amount, currency, option, "the Prolific workspace")
    hourly = rules.least_hourly_cents(currency, settings.prolific_min_hourly_cents)
    try:
        if study_terms.sessions:
            rules.check_session_study(reward_cents=reward_cents, session_minutes=session_minutes,
                                      hourly_cents=hourly, currency=currency)
            rules.check_maximum(study_terms.maximum_minutes, study_terms.estimated_minutes)
        else:
            rules.check_turn_study(
                reward_cents=reward_cents, estimated_minutes=study_terms.estimated_minutes,
                maximum_minutes=study_terms.maximum_minutes, currency=currency, hourly_cents=hourly)
        fee_percent = money.fee_with_vat(settings.prolific_fee_percent, settings.prolific_vat_percent)
        rules.check_funds(available_cents=int(balance.get("available_balance") or 0), first_places=first_places,
                          reward_cents=reward_cents, fee_percent=fee_percent, currency=currency)
    except InvalidInput as broken:
        raise CommandError(str(broken)) from None
    return LaunchTerms(currency, fee_percent, study_terms.as_json())


def session_minutes_of_launch(settings: Settings, provider: str, keep_rule: str) -> int:
    """How long a batch's places last without ``--session-minutes`` (``terms.session_minutes_of_launch``)."""
    from turkflow.hits.prolific import terms

    return terms.session_minutes_of_launch(settings, provider, keep_rule)


def described_places(session_minutes: int, reward_cents: int, currency: str) -> str:
    """What a Prolific batch's places are and pay, in a line (``batch launch``, ``batch status``)."""
    from turkflow.hits.prolific import places

    return places.described(session_minutes, reward_cents, currency)


def launch_gate(app: App, provider: str, protocol: str, multi_task: bool) -> None:
    """A batch on Prolific needs each role's onboarding study, published (a STAR role's stage 1, and for
    multi-task dialogs stage 2; a real batch a real one), or a hand-made group with participants in it in
    TURKFLOW_PROLIFIC_ROLE_GROUPS: a role's turn studies admit only that group, and without anyone in it no
    participant could take its turns (or, without a group, a stranger could). Refused in one line naming
    what is missing."""
    from turkflow.errors import InvalidInput, ProviderError
    from turkflow.hits.prolific.terms import StudyTerms

    if provider != "prolific":
        return
    prolific_provider = _provider(app)
    try:
        study_terms = StudyTerms.of_settings(app.settings)
    except InvalidInput as bad:
        raise CommandError(str(bad)) from None
    with app.session(create=True) as session:
        try:
            _asking(app, lambda: prolific_provider.check_onboarding_gate(
                session, live=True, protocol=protocol, multi_task=multi_task, terms=study_terms))
        except ProviderError as gate:
            raise CommandError(str(gate)) from None


def _public_page(app: App, url: str, what: str, rehearsal_host: str) -> None:
    """Refuse, in one line, a public URL Prolific must not send participants to; warn, naming it, when it
    does not answer from this machine (a firewall may still let participants in)."""
    from turkflow.errors import InvalidInput
    from turkflow.hits.prolific import public

    try:
        _provider(app).check_public_url(url, what, rehearsal_host)
    except InvalidInput as refused:
        raise CommandError(str(refused)) from None
    silent = public.unanswered(url, rehearsal_host=rehearsal_host, prolific_base_url=app.settings.prolific_base_url)
    if silent:
        click.echo(f"warning: {url} does not answer from this machine ({silent}); participants' browsers must reach "
                   "it: is the web process running behind that address?", err=True)


def _provider(app: App) -> ProlificProvider:
    if not app.settings.prolific_token:
        raise CommandError("TURKFLOW_PROLIFIC_TOKEN is not set (Prolific: Settings > API tokens)")
    return app.providers.get("prolific")


def _asking(app: App, call: Callable[[], Any]) -> Any:
    """One call to Prolific; a refusal or no answer is one line naming the address and what to check."""
    from turkflow.hits.prolific import api

    try:
        return call()
    except api.ProlificError as exc:
        if exc.prolific_status == 0:
            raise CommandError(f"cannot reach Prolific at {app.settings.prolific_base_url}: {exc.detail}; "
                               "check the network or TURKFLOW_PROLIFIC_BASE_URL") from None
        raise CommandError(f"Prolific at {app.settings.prolific_base_url} {_refused(exc)}") from None


def _refused(exc: api.ProlificError) -> str:
    if exc.prolific_status in (401, 403):
        return f"refused the token: {exc.detail}"
    if exc.prolific_status == 0:
        return f"could not be reached: {exc.detail}"
    return f"refused {exc.method} {exc.path} ({exc.prolific_status}): {exc.detail}"


def _onboarding_said(row: ProlificOnboarding) -> str:
    """An onboarding study as ``check`` lists it: test or real, published or a draft."""
    from turkflow.hits.prolific.terms import OnboardingTerms

    terms = OnboardingTerms.from_json(row.terms)
    kind = "test onboarding study" if terms is not None and terms.test else "onboarding study"
    state = "published" if row.published_at is not None else "a draft Prolific has not published"
    return f"{kind} {row.study_id} ({state})"


@click.group(context_settings=CONTEXT)
def prolific() -> None:
    """Your Prolific workspace: token, balance, onboarding, groups, spend, test participants, webhooks.

    \b
    turkflow runs one study per batch and role; each submission is one turn. First steps:
      export TURKFLOW_PROLIFIC_TOKEN=... TURKFLOW_PROLIFIC_WORKSPACE_ID=...
      turkflow tasks load --sample
      turkflow prolific onboarding --role student --reward 0.50
      turkflow prolific onboarding --role teacher --reward 0.50
      turkflow prolific check
      turkflow batch launch --provider prolific --all -n 2 --max-turns 6 --reward 0.50 --dry-run
    A rehearsal without an account: `turkflow prolific rehearse` (the fake Prolific).
    STAR: an onboarding study per role (user, wizard) and stage (--stage 1, then 2 for multi-task),
    then `turkflow prolific check --protocol star`. Frames and MEEP use the same roles and stage 1.
    """


@prolific.command("check", context_settings=CONTEXT)
@click.option("--protocol", type=Names(protocol_names), default="wizard_of_tasks", show_default=True,
              help="The protocol whose roles' onboarding to check (star: each role's stages 1 and 2).")
@pass_app
def prolific_check(app: App, protocol: str) -> None:
    """Check the token and the workspace, show the balance, and say what is missing before a batch runs.

    Also shows the role groups, the pay rules turkflow applies and whether webhooks or polling follow
    submissions. Exits non-zero, naming each problem, when something must be fixed first (for STAR, a
    missing stage-2 study is reported but only multi-task batches need it).
    """
    from turkflow.errors import InvalidInput, ProviderError
    from turkflow.hits import money
    from turkflow.hits.prolific import api, rules
    from turkflow.hits.prolific.provider import current_onboarding
    from turkflow.hits.prolific.terms import StudyTerms
    from turkflow.protocols.questions import get_protocol
    from turkflow.protocols.star import stages

    settings = app.settings
    provider = _provider(app)
    me = _asking(app, lambda: api.get_me(provider.client))
    who = me.get("email") or me.get("id")
    click.echo(f"Prolific at {settings.prolific_base_url}: the token works ({who})")
    workspaces = {w["id"]: w for w in _asking(app, lambda: api.list_workspaces(provider.client))}
    workspace = workspaces.get(settings.prolific_workspace_id)
    if workspace is None:
        raise CommandError(f"TURKFLOW_PROLIFIC_WORKSPACE_ID={settings.prolific_workspace_id!r} is not one of "
                           f"the token's workspaces: {', '.join(sorted(workspaces)) or 'none'}")
    balance = _asking(app, lambda: api.get_workspace_balance(provider.client, workspace["id"]))
    currency = balance.get("currency_code") or "GBP"
    click.echo(f"workspace \"{workspace.get('title', workspace['id'])}\": available balance "
               f"{money.shown(int(balance.get('available_balance') or 0), currency)}")
    problems = []
    groups = {g["id"]: g for g in _asking(app, lambda: api.list_participant_groups(provider.client,
                                                                                   workspace["id"]))}
    try:
        terms = StudyTerms.of_settings(settings)
    except InvalidInput as bad:
        raise CommandError(str(bad)) from None
    roles = list(get_protocol(protocol).roles)
    with app.session(create=True) as session:  # a fresh data folder is migrated, as for every command
        onboarding = {(role, stage): current_onboarding(session, role, stage)
                      for role in roles for stage in (stages.SINGLE_TASK, stages.MULTI_TASK)}
        try:
            _asking(app, lambda: provider.check_onboarding_gate(session, live=True, protocol=protocol, terms=terms))
        except ProviderError as gate:
            problems.append(str(gate))
    for role in roles:
        group = terms.role_groups.get(role)
        row = onboarding[(role, stages.SINGLE_TASK)]
        stage = " --stage 1" if stages.has_stages(role) else ""
        if group is not None and group in groups:
            size = groups[group].get("participant_count")
            click.echo(f"{role}s: hand-made participant group \"{groups[group]['name']}\" ({group}), "
                       f"{'? participants' if size is None else counted(size, 'participant')}")
        elif group is not None:
            problems.append(f"TURKFLOW_PROLIFIC_ROLE_GROUPS names {group} for {role}s, not a group of this "
                            "workspace (`turkflow prolific groups` lists them)")
        if row is None and group is None:
            click.echo(f"{role}s: no onboarding study yet (`turkflow prolific onboarding --role {role}{stage}`)")
        elif row is not None:
            name = groups.get(row.group_id, {}).get("name", "")
            click.echo(f"{role}s: {_onboarding_said(row)}; passing it adds to participant group \"{name}\" "
                       f"({row.group_id}), which their studies admit")
        second = onboarding[(role, stages.MULTI_TASK)]
        if stages.has_stages(role) and second is not None:
            click.echo(f"{role}s, stage 2 (multi-task): {_onboarding_said(second)}; passing it adds to participant "
                       f"group ({second.group_id})")
        elif stages.has_stages(role):
            click.echo(f"{role}s, stage 2 (multi-task): no onboarding study yet, needed for multi-task batches "
                       f"(`turkflow prolific onboarding --role {role} --stage 2`)")
    hourly = rules.least_hourly_cents(currency, settings.prolific_min_hourly_cents)
    minutes = terms.estimated_minutes
    least = money.least_reward_cents(hourly, minutes)
    click.echo(f"pay: at least {money.shown(least, currency)} a turn ({money.shown(hourly, currency)} an hour "
               f"at {minutes} minutes a turn); service fee {settings.prolific_fee_percent:g}% + VAT "
               f"{settings.prolific_vat_percent:g}% of it assumed, check Prolific's pricing page")
    try:
        rules.check_maximum(terms.maximum_minutes, minutes)
    except InvalidInput as broken:
        problems.append(str(broken))
    if settings.prolific_webhook_secret:
        click.echo(f"submissions: webhooks at {provider.webhook_url()}, and the poller every "
                   f"{settings.prolific_poll_seconds} s")
    else:
        click.echo(f"submissions: the poller every {settings.prolific_poll_seconds} s (webhooks: off; "
                   "`turkflow prolific webhook`)")
    if terms.test:
        click.echo("new batches: Prolific's test studies, for the workspace's test participant only (what they are "
                   "paid is charged, then refunded within 24 hours); TURKFLOW_PROLIFIC_TEST_STUDIES")
    else:
        click.echo("new batches: real studies, open to real participants, paid for real")
    try:
        _public_page(app, f"{terms.public_url}/prolific/turn", "study links", terms.rehearsal_host)
        click.echo(f"study links: {terms.public_url}/prolific/turn")
    except CommandError as refused:
        problems.append(refused.format_message())
    if problems:
        raise CommandError("; ".join(problems))


@prolific.command("onboarding", context_settings=CONTEXT)
@click.option("--role", type=Names(role_names), required=True,
              help="The role whose onboarding study to set up (STAR's: user, wizard).")
@click.option("--stage", type=click.IntRange(SINGLE_TASK, MULTI_TASK), default=SINGLE_TASK,
              show_default=True, help="STAR roles: the qualification stage (1 single-task; 2 multi-task, "
              "whose study admits only those who passed stage 1).")
@click.option("--reward", type=Dollars(), required=True, metavar="AMOUNT",
              help="What the study pays each participant, pass or fail, in the workspace's currency (0.50, £0.50).")
@click.option("--places", type=click.IntRange(1), default=50, show_default=True,
              help="How many participants may take it (a draft's places follow a run with other --places; a "
                   "published study's only grow).")
@click.option("--minutes", type=click.IntRange(1), default=3, show_default=True,
              help="Minutes the quiz takes, as the study tells participants (and as Prolific judges pay).")
@click.option("--replace", is_flag=True,
              help="Stop the role's current onboarding study and publish a new one in its place (those who passed "
                   "stay admitted): a real one after a test one, or after a change of address.")
@pass_app
def prolific_onboarding(app: App, role: str, stage: int, reward: int, places: int, minutes: int,
                        replace: bool) -> None:
    """Set up and publish the role's onboarding study: turkflow's quiz for that role, taken once.

    A STAR role (user, wizard) qualifies in stages, each its own study: the stage's tutorial and a
    10-question quiz with at most 6 hints (counted on the server). Stage 1 unlocks single-task dialogs;
    stage 2 (--stage 2, set up after stage 1) admits only stage 1's group and unlocks multi-task ones.

    Passing sends the participant back to Prolific with a code that adds them to the role's participant
    group (the hand-made one in TURKFLOW_PROLIFIC_ROLE_GROUPS, else one turkflow makes); the role's turn
    studies admit only that group, and the turn page refuses anyone who has not passed. Failing approves
    the submission without adding them. With TURKFLOW_PROLIFIC_TEST_STUDIES=true it is a test study, for the
    workspace's test participant only. The study keeps what it was published with (test or real, its
    address, reward and minutes). Run it before launching a batch; running it again makes nothing twice (it
    finishes a set-up that was interrupted, publishes a draft Prolific refused before, sets a draft's places
    or grows a published study's to --places, and shows it); --replace publishes a new one in its place.
    """
    from turkflow.errors import InvalidInput, ProviderError
    from turkflow.hits import money
    from turkflow.hits.prolific import api, rules
    from turkflow.hits.prolific.provider import ProlificProvider
    from turkflow.hits.prolific.terms import OnboardingTerms
    from turkflow.protocols.star import stages

    settings = app.settings
    if stage != stages.SINGLE_TASK and not stages.has_stages(role):
        raise CommandError(f"--stage: {role}s have one onboarding quiz; stages are STAR's (user, wizard)")
    provider = _provider(app)
    balance = _asking(app, lambda: api.get_workspace_balance(provider.client, settings.prolific_workspace_id))
    currency = balance.get("currency_code") or "GBP"
    check_currency(reward, currency, "--reward", "the Prolific workspace")
    hourly = rules.least_hourly_cents(currency, settings.prolific_min_hourly_cents)
    least = money.least_reward_cents(hourly, minutes)
    if reward < least:
        raise CommandError(f"--reward {money.shown(reward, currency)} is below Prolific's minimum pay: at least "
                           f"{money.shown(least, currency)} ({money.shown(hourly, currency)} an hour at "
                           f"--minutes {minutes})")
    try:
        terms = OnboardingTerms.of_settings(settings, role, test=settings.prolific_test_studies, reward_cents=reward,
                                            minutes=minutes)
    except InvalidInput as bad:
        raise CommandError(str(bad)) from None
    which = f" stage {stage}" if stages.has_stages(role) else ""
    quiz = ProlificProvider.onboarding_url(terms.public_url, role, stage)
    _public_page(app, quiz, f"the {role}{which} onboarding study", terms.rehearsal_host)
    with app.session(create=True) as session:
        try:
            row, status = _asking(app, lambda: provider.set_up_onboarding(
                session, role, reward_cents=reward, places=places, estimated_minutes=minutes, stage=stage,
                replace=replace))
        except ProviderError as refused:
            raise CommandError(str(refused)) from None
    study = _asking(app, lambda: api.get_study(provider.client, row.study_id))
    kind = "test onboarding study (the workspace's test participant only)" if terms.test else "onboarding study"
    click.echo(f"{role}{which} {kind} {row.study_id} ({status.lower()}): reward "
               f"{money.shown(int(study.get('reward') or 0), currency)}, {study.get('places_taken') or 0} of "
               f"{study.get('total_available_places')} places taken; quiz at {quiz}")
    admits = "multi-task" if stage == stages.MULTI_TASK else role
    click.echo(f"passing adds participants to group {row.group_id}, which {admits} turn studies admit; "
               "failing approves the submission without adding them")


@prolific.group("groups", context_settings=CONTEXT, invoke_without_command=True)
@click.pass_context
def prolific_groups(ctx: click.Context) -> None:
    """List the workspace's participant groups and which role's each is (onboarded, blocked); make one.

    \b
    A role's onboarded group (its onboarding study adds those who pass; or a hand-made one named in
    TURKFLOW_PROLIFIC_ROLE_GROUPS) is the allow list of its turn studies; each role's group is on the other
    roles' block lists; turkflow's block-list group holds blocked participants. For a trial on test studies:
      turkflow prolific groups create "Trial students" --participant <test participant id>
      export TURKFLOW_PROLIFIC_ROLE_GROUPS="student=<group id>,teacher=<group id>"
      turkflow prolific groups add <group id> <participant id> ...
    Prolific's participant counts can lag behind changes.
    """
    from turkflow.hits.prolific import api
    from turkflow.hits.prolific.terms import role_groups
    from turkflow.protocols.questions import ROLES
    from turkflow.protocols.star import stages

    if ctx.invoked_subcommand is not None:
        return
    app = ctx.find_object(App)
    provider = _provider(app)
    settings = app.settings
    blocked = _asking(app, provider.blocked_group)
    workspace_id = settings.prolific_workspace_id
    found = _asking(app, lambda: api.list_participant_groups(provider.client, workspace_id))
    uses: dict[str, list[str]] = {blocked: ["blocked: every study of ours keeps them out"]}
    hand_made = role_groups(settings.prolific_role_groups)
    with app.session(create=True) as session:
        for role in ROLES:
            for stage in (stages.SINGLE_TASK, stages.MULTI_TASK) if stages.has_stages(role) else (stages.SINGLE_TASK,):
                allowed = provider.allow_group(session, role, stage)
                if allowed is None or (stage != stages.SINGLE_TASK and allowed == provider.allow_group(session, role)):
                    continue
                which = f" stage {stage}" if stages.has_stages(role) else ""
                how = "hand-made, TURKFLOW_PROLIFIC_ROLE_GROUPS" if hand_made.get(role) == allowed and \
                    stage == stages.SINGLE_TASK else f"passing the{which} onboarding quiz adds them"
                uses.setdefault(allowed, []).append(f"{role}s onboarded{which}: their turn studies admit them ({how})")
    by_name = {g.get("name"): g["id"] for g in found if not g.get("is_deleted")}
    for role in ROLES:
        group = by_name.get(f"turkflow {provider.install} {role}s")
        if group is not None:
            uses.setdefault(group, []).append(f"{role}s: kept out of the other roles' studies")
    table(f"Prolific participant groups of workspace {workspace_id}",
          ["id", "name", "participants", "which role's, and what turkflow uses it for"],
          [(g["id"], g.get("name") or "", g.get("participant_count", ""), "; ".join(uses.get(g["id"], [])))
           for g in found if not g.get("is_deleted")])


@prolific_groups.command("create", context_settings=CONTEXT)
@click.argument("name")
@click.option("--participant", "participants", multiple=True, metavar="ID",
              help="A participant (or test participant) id to put in it; give it once per participant.")
@pass_app
def prolific_groups_create(app: App, name: str, participants: tuple[str, ...]) -> None:
    """Make a participant group NAME in the workspace (for a trial: of your test participants) and print
    its id, to name in TURKFLOW_PROLIFIC_ROLE_GROUPS."""
    from turkflow.hits.prolific import api

    provider = _provider(app)
    made = _asking(app, lambda: api.create_participant_group(
        provider.client, app.settings.prolific_workspace_id, name, "Made with turkflow prolific groups create.",
        participants))
    click.echo(f"group {made['id']} \"{name}\" with {counted(len(participants), 'participant')}; name it for its role in "
               f"TURKFLOW_PROLIFIC_ROLE_GROUPS, as ROLE={made['id']} (e.g. \"student=<id>,teacher=<id>\")")


@prolific_groups.command("add", context_settings=CONTEXT)
@click.argument("group")
@click.argument("participants", nargs=-1, required=True)
@pass_app
def prolific_groups_add(app: App, group: str, participants: tuple[str, ...]) -> None:
    """Add PARTICIPANTS (participant or test participant ids) to the participant group GROUP: a role's
    group admits them to its turn studies (test studies too)."""
    from turkflow.hits.prolific import api

    provider = _provider(app)
    members = _asking(app, lambda: api.add_to_participant_group(provider.client, group, participants))
    click.echo(f"group {group} now has {counted(len(members), 'participant')}")


@prolific.command("spend", context_settings=CONTEXT)
@click.argument("batch_id", type=int, required=False)
@click.option("--workers", "by_worker", is_flag=True, help="Also show the batch's spend per worker.")
@click.pass_context
def prolific_spend(ctx: click.Context, batch_id: int | None, by_worker: bool) -> None:
    """What Prolific batches cost, real studies apart from test studies, then one batch's detail (the newest
    if no BATCH_ID): approved rewards, paid bonuses and fees, and what is pending.

    A test study's participant is paid like any other, from the workspace's balance, and Prolific refunds it
    within 24 hours: test spend is shown apart and is not part of the real spend.
    """
    from turkflow.hits import money
    from turkflow.hits.prolific.studies import spend_apart

    app = ctx.find_object(App)
    with app.session() as session:
        apart = spend_apart(session)

    def said(spent: money.Spend, batches: list[int]) -> str:
        return (f"{money.shown(spent.total_cents, apart.currency)} spent, {money.shown(spent.pending_cents, apart.currency)} "
                f"pending ({len(batches)} batch{'es' if len(batches) != 1 else ''})")

    click.echo(f"Prolific, real studies: {said(apart.real, apart.real_batches)}")
    if apart.test_batches:
        click.echo(f"Prolific, test studies: {said(apart.test, apart.test_batches)}; charged to the workspace and "
                   "refunded by Prolific within 24 hours, not part of the real spend")
    ctx.invoke(mturk_spend, batch_id=batch_id, by_worker=by_worker)


@prolific.command("studies", context_settings=CONTEXT)
@click.argument("batch_id", type=int, required=False)
@pass_app
def prolific_studies(app: App, batch_id: int | None) -> None:
    """A Prolific batch's studies (the newest batch if no BATCH_ID): test or real, Prolific's status when
    turkflow last looked, and how long its turns take at the median against the estimate participants
    were told and against Prolific's minimum pay.

    Prolific judges pay at the median completion time and pauses a study that pays under its minimum there,
    asking for adjustment payments; a warning comes well before that (at 80% of that time). turkflow resumes
    only a study it paused itself: one Prolific (or a person) paused is shown and left paused. Our records
    only: nothing is asked of Prolific.
    """
    from turkflow.hits.prolific.studies import study_views

    with app.session() as session:
        batch = find_batch(session, batch_id)
        if batch.provider != "prolific":
            raise CommandError(f"batch {batch.id} runs on {batch.provider}, not Prolific")
        views = study_views(session, batch)
    kind = "test studies (the test participant only)" if batch.platform_terms.get("test") else "real studies"
    click.echo(f"batch {batch.id} \"{batch.name}\" ({batch.status}): {kind}")
    if not views:
        click.echo("no study yet: the first turn of a role makes its study")
    table(None, ["role", "study", "status", "turns timed", "median", "estimate", "underpays at", "warning"],
          [(v.role, v.study_id or "", (v.status or "not looked at yet").lower() + (" (paused elsewhere)" if
           v.paused_elsewhere else "") + (" (ended)" if v.ended else ""), v.turns_timed,
            "" if v.median_minutes is None else f"{v.median_minutes:.1f} min", f"{v.estimated_minutes} min",
            f"{v.underpaid_after_minutes:.1f} min", v.warning or "") for v in views])


@prolific.command("bonuses", context_settings=CONTEXT)
@click.argument("batch_id", type=int, required=False)
@click.option("--release", "to_release", type=int, multiple=True, metavar="BONUS_ID",
              help="The bonus was never paid: pay it in a new bulk payment now (repeatable).")
@click.option("--settle", "to_settle", type=int, multiple=True, metavar="BONUS_ID",
              help="The bonus needs no more payment (you saw it paid on Prolific, or paid it there by hand): "
                   "count it paid (repeatable).")
@click.option("--by", default=None, help="Who decides, recorded with the decision (default: your login name).")
@pass_app
def prolific_bonuses(app: App, batch_id: int | None, to_release: tuple[int, ...], to_settle: tuple[int, ...],
                     by: str | None) -> None:
    """Bonuses whose payment nobody can tell, for you to decide (all batches, or BATCH_ID's).

    turkflow pays a Prolific bonus once: it records "about to pay" before Prolific's pay call, which is
    not idempotent, and never calls it again for that bonus. When the call crashed, failed on Prolific's
    side or got no answer, and Prolific still shows no payment on the submission
    TURKFLOW_PROLIFIC_BONUS_UNKNOWN_AFTER_SECONDS later, the bonus is listed here with what Prolific shows
    for the submission now. Check the submission in Prolific's app, then --release it (it goes into a new
    bulk payment and is paid now) or --settle it. Each decision is recorded as an event naming who made it.
    """
    import getpass

    from turkflow import pipeline
    from turkflow.errors import TurkflowError
    from turkflow.hits import money
    from turkflow.hits.prolific import api, sync

    provider = _provider(app)
    who = by or getpass.getuser()
    with app.session():  # the database exists and is current
        pass
    try:
        for bonus_id in to_release:
            stuck = sync.release_bonus(app.settings, provider, bonus_id, who)
            pipeline.pay_bonus(app.settings, app.providers, bonus_id)
            click.echo(f"bonus {bonus_id} released by {who} and paid in a new bulk payment "
                       f"({money.shown(stuck.amount_cents, stuck.currency)} on submission {stuck.submission_id})")
        for bonus_id in to_settle:
            stuck = sync.settle_bonus_by_hand(app.settings, provider, bonus_id, who)
            click.echo(f"bonus {bonus_id} marked settled by {who} ({money.shown(stuck.amount_cents, stuck.currency)} on "
                       f"submission {stuck.submission_id}); Prolific shows "
                       f"{_payments(stuck.prolific_payments, stuck.currency)}")
    except api.ProlificError as exc:
        raise CommandError(f"Prolific at {app.settings.prolific_base_url} {_refused(exc)}") from None
    except TurkflowError as exc:
        raise CommandError(str(exc)) from None
    if to_release or to_settle:
        return
    found = sync.stuck_bonuses(app.settings, provider, batch_id=batch_id)
    after = app.settings.prolific_bonus_unknown_after_seconds
    if not found:
        click.echo(f"no bonus waits for a person (none claimed more than {after} s ago and still unknown)")
        return
    click.echo(f"{counted(len(found), 'bonus', 'bonuses')} Prolific shows no payment for, {after} s or more after the pay call; "
               "check each submission in Prolific's app, then --release BONUS_ID or --settle BONUS_ID:")
    for b in found:
        shows = ("Prolific did not answer about it" if b.prolific_payments is None else
                 f"Prolific shows it {str(b.prolific_status).lower()}, bonuses paid on it: "
                 f"{_payments(b.prolific_payments, b.currency)}")
        may = ("--settle only: Prolific accepted its pay call and pays it itself (if it never shows, pay it by hand "
               "in Prolific's app first)" if b.releasable_from is None else
               f"--release from {b.releasable_from:%Y-%m-%d %H:%M} UTC, once Prolific can no longer be paying it, "
               "or --settle")
        click.echo(f"bonus {b.bonus_id} (batch {b.batch_id}, {b.kind}, {money.shown(b.amount_cents, b.currency)} to "
                   f"{b.worker}) on submission {b.submission_id}, bulk payment {b.bulk_id} claimed "
                   f"{b.claimed_at:%Y-%m-%d %H:%M} UTC: {shows}; why: {b.reason}; {may}")


def _payments(payments: list[int] | None, currency: str) -> str:
    from turkflow.hits import money

    if payments is None:
        return "nothing (no answer)"
    return ", ".join(money.shown(c, currency) for c in payments) or "none"


@prolific.command("rehearse", context_settings=CONTEXT)
@click.option("--stop-after", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Stop after this many seconds.  [default: run until Ctrl-C]")
@click.option("--web", "web_url", default="http://127.0.0.1:5000", show_default=True, metavar="URL",
              help="Where turkflow's web process runs on this machine: the fake sends participants there.")
def prolific_rehearse(stop_after: float | None, web_url: str) -> None:
    """Run a fake Prolific on a free localhost port, to walk the Prolific guide (docs/prolific.md) without an
    account or money, from the first check to the real onboarding studies; when it stops, list every study
    it holds, test or real, so you see that nothing was published that you did not mean.

    It plays Prolific's API as turkflow uses it (checked against Prolific's OpenAPI description when
    openapi-core is installed) and refuses what Prolific refuses; it runs test studies as Prolific does (one
    test participant per researcher account; what the test participant is paid is charged and refunded
    within 24 hours). Export the lines it prints before starting turkflow's processes: TURKFLOW_PUBLIC_URL
    is a rehearsal address (under .invalid, which never resolves) that the public URL check accepts only
    because TURKFLOW_PROLIFIC_REHEARSAL_HOST names it and Prolific is this fake on this machine; the fake sends
    participants to --web instead. Play a participant in a browser: /participant/take?study=<study
    id>&participant=<id> starts a submission and opens the study's page; the page then sends you to
    Prolific's completion page, https://app.prolific.com/submissions/complete?cc=<code>: open
    /participant/complete?cc=<code> on the fake instead. Nothing is kept when it stops.
    """
    import secrets
    import threading
    import time

    from turkflow.simulator.fake_prolific import FakeProlific
    from turkflow.simulator.prolific import REHEARSAL_HOST, REHEARSAL_URL, contract_to_check

    contract, unchecked_because = contract_to_check(None)
    fake = FakeProlific(token=secrets.token_urlsafe(16), contract=contract, id_prefix=f"r{int(time.time())}-")
    public_url = REHEARSAL_URL
    fake.rehearsal_web = (public_url, web_url.rstrip("/"))
    with fake:
        click.echo(f"a fake Prolific runs at {fake.url} (contract: {contract or f'not checked, {unchecked_because}'}); "
                   "in another shell, before starting turkflow's processes:")
        click.echo(f"export TURKFLOW_PROLIFIC_BASE_URL={fake.url}")
        click.echo(f"export TURKFLOW_PROLIFIC_TOKEN={fake.token}")
        click.echo(f"export TURKFLOW_PROLIFIC_WORKSPACE_ID={fake.workspace_id}")
        click.echo(f"export TURKFLOW_PUBLIC_URL={public_url}")
        click.echo(f"export TURKFLOW_PROLIFIC_REHEARSAL_HOST={REHEARSAL_HOST}")
        click.echo(f"participants: {fake.url}/participant/take?study=<study id>&participant=<id> opens the study's "
                   f"page at {web_url}; after a turn, {fake.url}/participant/complete?cc=<the code> where "
                   "Prolific's completion page would be")
        try:
            if stop_after is None:
                threading.Event().wait()
            else:
                time.sleep(stop_after)
        except KeyboardInterrupt:
            pass
    show_listing(fake.listing())
    if fake.violations:
        click.echo(f"{len(fake.violations)} requests or answers broke Prolific's contract; the first: "
                   f"{fake.violations[0]}", err=True)


def show_listing(studies: list[dict[str, Any]]) -> None:
    """The fake Prolific's studies as a lab sees them in Prolific's app, and which were published for real."""
    if not studies:
        click.echo("the fake Prolific holds no study: nothing was published")
        return
    table("studies on the fake Prolific", ["study", "kind", "status", "name", "places taken", "sends participants to"],
          [(st["id"], st["kind"], st["status"].lower() + (" (by Prolific)" if st["paused_by_prolific"] else ""),
            st["name"], f"{st['taken']} of {st['places']}", st["url"]) for st in studies])
    real = [st for st in studies if st["kind"] == "real" and st["published"]]
    click.echo(f"published for real: {len(real)} ({', '.join(repr(st['name']) for st in real)})" if real else
               "published for real: nothing (drafts and test studies only)")


@prolific.command("test-participant", context_settings=CONTEXT)
@click.argument("email")
@pass_app
def prolific_test_participant(app: App, email: str) -> None:
    """Create the researcher's Prolific test participant (EMAIL), who alone takes test studies.

    Prolific allows one test participant per researcher account; what they are paid in a test study is
    charged to the workspace and refunded within 24 hours. Test participants and test studies are a beta
    Prolific enables per workspace (ask Prolific support if this is refused). With
    TURKFLOW_PROLIFIC_TEST_STUDIES=true, onboarding studies and new batches are test studies: the test
    participant passes a role's test onboarding study and then takes that role's turns.
    """
    from turkflow.hits.prolific import api

    provider = _provider(app)
    participant_id = _asking(app, lambda: api.create_test_participant(provider.client, email))
    click.echo(f"test participant {participant_id} ({email}), the only one this researcher account has: sign in to "
               "Prolific as them, take a role's test onboarding study, then that role's test turns")


@prolific.command("webhook", context_settings=CONTEXT)
@pass_app
def prolific_webhook(app: App) -> None:
    """Subscribe turkflow's webhook URL to submission status changes and show the secret that signs them.

    Needs TURKFLOW_PUBLIC_URL to be a public https address (Prolific posts there; checked as every address
    published on Prolific is). The subscription is confirmed as Prolific documents it: its creation returns
    an X-Hook-Secret, sent back through the API (in the body, as the API description says, or in the path, as
    the guide says, if Prolific refuses the first). Set TURKFLOW_PROLIFIC_WEBHOOK_SECRET to the secret shown
    for the web process. Safe to run again: the workspace's secret and the enabled subscription are kept.
    Without webhooks the poller follows submissions.
    """

    provider = _provider(app)
    _public_page(app, provider.webhook_url(), "the webhook subscription", app.settings.prolific_rehearsal_host)
    secret, subscription = _asking(app, provider.subscribe)
    state = "enabled" if subscription.get("is_enabled") else "not enabled; run this again"
    click.echo(f"subscription {subscription['id']}: {subscription['event_type']} to "
               f"{subscription['target_url']} ({state})")
    click.echo(f"TURKFLOW_PROLIFIC_WEBHOOK_SECRET={secret}")
