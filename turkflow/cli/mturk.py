"""``turkflow mturk`` (the requester's MTurk account: check, qualification types, spend) and
``turkflow batch expire``.

Registered by ``turkflow.cli.main``; the plumbing (settings, sessions, one-line errors) is
``turkflow.cli.common``'s. It reaches MTurk only through ``turkflow.hits.mturk``, whose failures arrive as
``ProviderError``. The marketplace is the sandbox unless ``--live`` (or TURKFLOW_MTURK_LIVE) says otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import click

from turkflow.cli.common import CONTEXT, App, CommandError, check_public_url, dollars, find_batch, pass_app, progress_bar, table

if TYPE_CHECKING:  # imported when a command runs: boto3 loads only for MTurk commands
    from turkflow.hits.mturk import MTurkProvider

LIVE = click.option("--live", is_flag=True, help="The live marketplace instead of the sandbox.")


def _provider(app: App) -> MTurkProvider:
    from turkflow.hits.mturk import MTurkProvider

    provider = app.providers.get("mturk")
    assert isinstance(provider, MTurkProvider), "the registry builds MTurkProvider for mturk"
    return provider


@click.group(context_settings=CONTEXT)
def mturk() -> None:
    """Your Mechanical Turk requester account: credentials, balance, qualification types, spend.

    \b
    Credentials come from the usual AWS places: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,
    AWS_PROFILE, ~/.aws/credentials, or an instance role. First steps:
      turkflow mturk check
      turkflow mturk quals
      turkflow batch launch --provider mturk --all -n 2 --max-turns 6
    """


@mturk.command("check", context_settings=CONTEXT)
@LIVE
@pass_app
def mturk_check(app: App, live: bool) -> None:
    """Check the credentials, show the balance and whether turkflow is ready to publish HITs."""
    from turkflow.hits.mturk import MTurkError, QualificationsMissing
    from turkflow.hits.mturk.api import endpoint

    live = live or app.settings.mturk_live
    marketplace = "LIVE marketplace (real money)" if live else "sandbox (no real money)"
    provider = _provider(app)
    try:
        balance = provider.balance_cents(live)
    except MTurkError as exc:
        raise CommandError(f"MTurk {marketplace} at {endpoint(app.settings.mturk_region, live)} refused the "
                           f"credentials or could not be reached: {exc.__cause__ or exc}") from None
    click.echo(f"MTurk {marketplace}: credentials work, available balance {dollars(balance)}")
    problems = []
    with app.session() as session:
        try:
            provider.check_onboarding_gate(session, live)
            click.echo("qualification types: ready (`turkflow mturk quals` lists them)")
        except QualificationsMissing as exc:
            problems.append(str(exc))
    check_public_url(app.settings, "MTurk workers", "turn pages", "/mturk/turn", problems)
    if problems:
        raise CommandError("; ".join(problems))


@mturk.command("quals", context_settings=CONTEXT)
@LIVE
@click.option("--study", default="turkflow", show_default=True,
              help="Name prefix of the qualification types; a new study name starts with new workers.")
@click.option("--protocol", type=click.Choice(["wizard_of_tasks", "star"]), default="wizard_of_tasks",
              show_default=True, help="Whose qualification types: star makes one per role and stage.")
@pass_app
def mturk_quals(app: App, live: bool, study: str, protocol: str) -> None:
    """Create the qualification types turkflow needs (once per marketplace) and list them.

    One per role, whose qualification test is the role's onboarding quiz (the value is the score in
    percent; turn HITs require TURKFLOW_ONBOARDING_PASS_PERCENT), and "paused", the soft block: HITs
    require it not to exist, so a temporarily blocked worker does not even see them. Safe to run again.

    With --protocol star: one per STAR role and stage (star:user:1 ...), whose test is the stage's quiz
    without hints; a single-task turn HIT requires stage 1 at 100, a multi-task one stages 1 and 2.
    """
    live = live or app.settings.mturk_live
    with app.session(create=True) as session:
        quals = _provider(app).ensure_qualification_types(session, live, study, protocol)
        rows = [(q.purpose, q.type_id, q.name, "live" if q.live else "sandbox") for q in quals]
    table("MTurk qualification types", ["purpose", "type id", "name", "marketplace"], rows)


@mturk.command("spend", context_settings=CONTEXT)
@click.argument("batch_id", type=int, required=False)
@click.option("--workers", "by_worker", is_flag=True, help="Also show the spend per worker.")
@pass_app
def mturk_spend(app: App, batch_id: Optional[int], by_worker: bool) -> None:
    """What a batch (the newest if no BATCH_ID) actually cost: approved rewards, paid bonuses and fees.

    "Pending" is work submitted but not approved yet and bonuses recorded but not paid yet, with fees.
    """
    from sqlmodel import select

    from turkflow.hits import money
    from turkflow.models import Conversation, Turn, Worker

    with app.session() as session:
        batch = find_batch(session, batch_id)
        total = money.spend(session, batch_id=batch.id)
        sent = money.sent_bonuses(session, batch.id)
        charged = money.charged_bonus_fees(session, batch.id) if batch.provider == "prolific" else None
        workers = []
        if by_worker:
            ids = session.exec(
                select(Worker.id).distinct().join(Turn, Turn.worker_id == Worker.id)
                .join(Conversation, Conversation.id == Turn.conversation_id).where(Conversation.batch_id == batch.id)
            ).all()
            workers = [(session.get(Worker, wid), money.spend(session, batch_id=batch.id, worker_id=wid))
                       for wid in ids]

    def dollars(cents: int) -> str:  # amounts in the batch's currency (Prolific: the workspace's)
        return money.shown(cents, batch.currency)

    test = " test studies" if batch.platform_terms.get("test") else ""
    click.echo(f"batch {batch.id} \"{batch.name}\" ({batch.provider}{' live' if batch.live else ''}{test}): "
               f"{dollars(total.total_cents)} spent = {dollars(total.rewards_cents)} rewards + "
               f"{dollars(total.bonuses_cents)} bonuses + {dollars(total.fees_cents)} fees; "
               f"{dollars(total.pending_cents)} pending")
    if charged is not None and charged.charged_cents != charged.counted_cents:
        click.echo(f"Prolific charged {dollars(charged.charged_cents)} in fees and VAT on "
                   f"{dollars(charged.amount_cents)} of bonuses; turkflow counts {dollars(charged.counted_cents)} "
                   f"({batch.fee_percent:g}%: TURKFLOW_PROLIFIC_FEE_PERCENT with TURKFLOW_PROLIFIC_VAT_PERCENT; "
                   "set them to your account's rates)")
    if sent:
        click.echo(f"{len(sent)} of the pending bonuses ({dollars(sum(b.amount_cents for b in sent))}) went to "
                   f"{batch.provider} since {min(b.sent_at for b in sent):%Y-%m-%d %H:%M} UTC and show no payment "
                   f"yet; each is settled from {batch.provider}'s records, never paid again (payments "
                   f"{', '.join(sorted({b.payment_id or '?' for b in sent}))})"
                   + ("; `turkflow prolific bonuses` lists those a person must release or settle"
                      if batch.provider == "prolific" else ""))
    if workers:
        table(None, ["worker", "role", "rewards", "bonuses", "fees", "spent", "pending"],
              [(w.external_id, w.role, dollars(s.rewards_cents), dollars(s.bonuses_cents), dollars(s.fees_cents),
                dollars(s.total_cents), dollars(s.pending_cents))
               for w, s in sorted(workers, key=lambda pair: -pair[1].total_cents)])


@click.command("expire", context_settings=CONTEXT)
@click.argument("batch_id", type=int)
@pass_app
def batch_expire(app: App, batch_id: int) -> None:
    """End the MTurk HITs of a cancelled batch now (again), e.g. after `batch cancel` failed part-way.

    Workers already holding one of them may still submit it. Only cancelled batches: cancel first.
    """
    from sqlmodel import col, select

    from turkflow.models import Conversation, Hit, HitStatus, Turn
    from turkflow.pipeline import expire

    with app.session() as session:
        batch = find_batch(session, batch_id)
        if batch.status != "cancelled":
            raise CommandError(f"batch {batch_id} is {batch.status}; `turkflow batch cancel {batch_id}` first")
        hit_ids = list(session.exec(
            select(Hit.id).join(Turn, Turn.id == Hit.turn_id)
            .join(Conversation, Conversation.id == Turn.conversation_id)
            .where(Conversation.batch_id == batch_id, Hit.provider == "mturk", col(Hit.external_id).is_not(None),
                   Hit.status == HitStatus.expired)
        ))
    with progress_bar(transient=True) as bar:
        task = bar.add_task("expiring HITs on MTurk", total=len(hit_ids), detail="")
        for hit_id in hit_ids:
            expire(app.settings, app.providers, hit_id)
            bar.advance(task)
    click.echo(f"batch {batch_id}: {len(hit_ids)} MTurk HITs expired")

