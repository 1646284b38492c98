"""``turkflow review`` (the daily review from a terminal) and ``turkflow admin`` (dashboard users).

Registered on the main group by ``turkflow.cli.main``; the plumbing (settings, sessions, one-line errors)
is ``turkflow.cli.common``'s.
"""

from __future__ import annotations

import sys
from datetime import date
from typing import Any, Callable, Optional

import click

from turkflow.cli.common import CONTEXT, App, find_worker, pass_app, requester, table, when


@click.group(context_settings=CONTEXT)
def review() -> None:
    """The daily review of temporarily blocked workers (the dashboard's review queue)."""


def _day(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[date]:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a date such as 2025-01-31") from None


@review.command("list", context_settings=CONTEXT)
@click.option("--day", callback=_day, metavar="YYYY-MM-DD", help="The queue of this day.  [default: today, UTC]")
@click.option("--all", "show_all", is_flag=True, help="Also show entries already resolved.")
@click.option("--build", is_flag=True, help="Build (or refresh) the day's queue first, as the daily job does.")
@pass_app
def review_list(app: App, day: Optional[date], show_all: bool, build: bool) -> None:
    """List the review queue: each temporarily blocked worker, why, and their recent ratings and flags."""
    from sqlmodel import col, select

    from turkflow.access import OPERATOR
    from turkflow.models import ReviewStatus, Worker
    from turkflow.quality import review as reviewing

    with app.session() as session:
        if build:
            built = reviewing.daily_review(session, reviewing.ReviewPolicy.of(app.settings), day, actor=requester())
            day = built.day
        day = day or (reviewing.queue_days(session, limit=1) or [None])[0]
        if day is None:
            click.echo("The review queue has not been built yet; run `turkflow review list --build`.")
            return
        status = None if show_all else ReviewStatus.pending
        rows = []
        after: Optional[str] = None
        while True:  # the dashboard's pages, in the same order: stalled roles first
            page = reviewing.queue_page(session, day, OPERATOR, status=status, after=after, limit=200)
            workers = {w.id: w for w in session.exec(
                select(Worker).where(col(Worker.id).in_([e.worker_id for e in page.entries]))
            )} if page.entries else {}
            for entry in page.entries:
                worker = workers[entry.worker_id]
                role = worker.role + (" (stalled)" if worker.role in page.stalled else "")
                rows.append((worker.id, worker.external_id, role, entry.status, _means(entry.ratings),
                             ", ".join(f"{k} {v}" for k, v in sorted(entry.flags.items())), entry.reason,
                             when(entry.resolved_at)))
            if page.next is None:
                break
            after = page.next
    if not rows:
        click.echo(f"Nobody is waiting for review on {day}.")
        return
    table(f"Review queue {day}", ["id", "worker", "role", "status", "recent ratings", "flags", "blocked because",
                                  "resolved"], rows)


def _means(ratings: dict) -> str:
    if not ratings.get("count"):
        return "none"
    return (f"relevant {ratings['mean_relevance']:.0%}, useful {ratings['mean_usefulness']:.0%} "
            f"of {ratings['count']}")


def _decide(app: App, worker_ref: str, note: str, permanent: bool) -> None:
    from turkflow import pipeline
    from turkflow.errors import ProviderError
    from turkflow.quality import review as reviewing

    with app.session() as session:
        worker = find_worker(session, worker_ref)
        act = reviewing.block_permanently if permanent else reviewing.unblock
        changed = act(session, worker, actor=requester(), note=note)
        label, worker_id = f"worker {worker.id} ({worker.external_id})", worker.id
    if not changed:
        click.echo(f"{label} was already {'blocked permanently' if permanent else 'active'}; nothing changed.")
        return
    click.echo(f"{label} {'blocked permanently' if permanent else 'unblocked: they can take turns again'}.")
    try:
        pipeline.carry_out_status(app.settings, app.providers, worker_id)
    except ProviderError as exc:
        click.echo(f"warning: their crowd platform could not be told yet ({exc}); the reconciler keeps trying",
                   err=True)


@review.command("block", context_settings=CONTEXT)
@click.argument("worker_ref", metavar="WORKER")
@click.option("--note", default="", help="Why, for the audit log.")
@pass_app
def review_block(app: App, worker_ref: str, note: str) -> None:
    """Block WORKER (id, worker id or unique name) permanently, on the crowd platform too."""
    _decide(app, worker_ref, note, permanent=True)


@review.command("unblock", context_settings=CONTEXT)
@click.argument("worker_ref", metavar="WORKER")
@click.option("--note", default="", help="Why, for the audit log.")
@pass_app
def review_unblock(app: App, worker_ref: str, note: str) -> None:
    """Let WORKER take turns again; their quality window starts afresh."""
    _decide(app, worker_ref, note, permanent=False)


@click.group(context_settings=CONTEXT)
def admin() -> None:
    """Users of the review dashboard (/admin): requesters, admins and the batches opened to them.

    A requester sees and changes their own batches (batch launch --owner) and those granted them; an admin
    sees every batch and manages requesters. This command runs as the operator: it may do everything."""


@admin.command("create", context_settings=CONTEXT)
@click.argument("username")
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of stdin.")
@click.option("--admin", "make_admin", is_flag=True,
              help="An admin: sees every batch and manages requesters (the first user always is one).")
@pass_app
def admin_create(app: App, username: str, password_stdin: bool, make_admin: bool) -> None:
    """Create a dashboard user USERNAME; asks for the password twice unless --password-stdin."""
    from turkflow.requesters import create_requester

    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    with app.session(create=True) as session:
        made = create_requester(session, username, password, admin=make_admin, actor=requester())
        role = "an admin" if made.admin else "a requester: they see the batches launched with --owner " \
                                            f"{username} and those opened to them (turkflow admin grant)"
    click.echo(f"Created dashboard user {username}, {role}; sign in at {app.settings.public_url.rstrip('/')}/admin/")


@admin.command("list", context_settings=CONTEXT)
@pass_app
def admin_list(app: App) -> None:
    """List the dashboard's users: admin or not, disabled or not, batches owned and opened to them."""
    from turkflow import requesters

    with app.session() as session:
        people, owned, granted = requesters.requesters(session), requesters.owned(session), requesters.grants(session)
        rows = [(r.username, "yes" if r.admin else "no", "disabled " + when(r.disabled_at) if r.disabled_at else
                 "active", owned.get(r.id, 0), ", ".join(map(str, granted.get(r.id, []))) or "-") for r in people]
    if not rows:
        click.echo("No dashboard user yet: turkflow admin create USERNAME")
        return
    table(None, ["username", "admin", "account", "own batches", "opened to them"], rows)


def _change(app: App, username: str, change: Callable[..., bool], done: str, *args: Any) -> None:
    from turkflow import requesters

    with app.session() as session:
        changed = change(session, requesters.find_requester(session, username), *args, actor=requester())
    click.echo(f"{username} {done}." if changed else f"{username} already {done}; nothing changed.")


@admin.command("promote", context_settings=CONTEXT)
@click.argument("username")
@pass_app
def admin_promote(app: App, username: str) -> None:
    """Make USERNAME an admin: they see every batch and manage requesters."""
    from turkflow.requesters import set_admin

    _change(app, username, set_admin, "is an admin", True)


@admin.command("demote", context_settings=CONTEXT)
@click.argument("username")
@pass_app
def admin_demote(app: App, username: str) -> None:
    """Make USERNAME a requester who is no admin (the last admin stays one)."""
    from turkflow.requesters import set_admin

    _change(app, username, set_admin, "is no admin", False)


@admin.command("disable", context_settings=CONTEXT)
@click.argument("username")
@pass_app
def admin_disable(app: App, username: str) -> None:
    """Disable USERNAME's account: it signs nobody in, and its open sessions end now."""
    from turkflow.requesters import set_disabled

    _change(app, username, set_disabled, "is disabled", True)


@admin.command("enable", context_settings=CONTEXT)
@click.argument("username")
@pass_app
def admin_enable(app: App, username: str) -> None:
    """Let USERNAME sign in again."""
    from turkflow.requesters import set_disabled

    _change(app, username, set_disabled, "can sign in", False)


def _batch(session: Any, batch_id: int) -> Any:
    from turkflow.access import OPERATOR, batch

    return batch(session, OPERATOR, batch_id)


@admin.command("grant", context_settings=CONTEXT)
@click.argument("username")
@click.argument("batch_id", metavar="BATCH", type=click.IntRange(min=1))
@pass_app
def admin_grant(app: App, username: str, batch_id: int) -> None:
    """Open BATCH to USERNAME: they see and change it as their own."""
    from turkflow import requesters

    with app.session() as session:
        changed = requesters.grant(session, requesters.find_requester(session, username), _batch(session, batch_id),
                                   actor=requester())
    click.echo(f"batch {batch_id} is open to {username}." if changed
               else f"{username} could see batch {batch_id} already; nothing changed.")


@admin.command("revoke", context_settings=CONTEXT)
@click.argument("username")
@click.argument("batch_id", metavar="BATCH", type=click.IntRange(min=1))
@pass_app
def admin_revoke(app: App, username: str, batch_id: int) -> None:
    """Take back BATCH from USERNAME (a batch granted them; their own stays theirs)."""
    from turkflow import requesters

    with app.session() as session:
        changed = requesters.revoke(session, requesters.find_requester(session, username), _batch(session, batch_id),
                                    actor=requester())
    click.echo(f"batch {batch_id} is no longer open to {username}." if changed
               else f"batch {batch_id} was not granted to {username}; nothing changed.")
