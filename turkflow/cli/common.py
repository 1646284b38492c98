"""What every ``turkflow`` subcommand shares: the ``App`` (settings, providers, sessions), one-line errors,
money on the command line, tables and progress bars, and finding a batch or a worker by what a user types.

It sits below ``turkflow.cli.main`` and the subcommand modules (``cli.mturk``, ``cli.review``,
``cli.dataset``, ``cli.prolific``, ``simulator.cli``): they import from here, and ``turkflow.cli.main`` registers them on the group.
"""

from __future__ import annotations

import getpass
import importlib
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence

import click

if TYPE_CHECKING:
    from sqlmodel import Session

    from turkflow.config import Settings
    from turkflow.hits.provider import Providers
    from turkflow.models import Batch, Worker

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


# ---- plumbing: settings, the database, errors -----------------------------------------------------------


class CommandError(click.ClickException):
    """A failure the user can act on, printed as ``error: <message>``."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


@dataclass
class App:
    """What every command needs, built on first use so ``--help`` never touches the disk.

    Tests and embedding programs may pass their own (``main(obj=App(settings, providers))``).
    """

    settings_: Optional[Settings] = None
    providers_: Optional[Providers] = None
    debug: bool = False
    _schema_ready: bool = field(default=False, repr=False)

    @property
    def settings(self) -> Settings:
        from turkflow.config import Settings

        if self.settings_ is None:
            self.settings_ = Settings()
        return self.settings_

    @property
    def providers(self) -> Providers:
        from turkflow.hits import registry

        if self.providers_ is None:
            self.providers_ = registry.providers(self.settings)
        return self.providers_

    @property
    def database_url(self) -> str:
        """The database this run uses. Settings are checked (an invalid one is named) but, when not built
        yet, with stand-in secrets: the real ones would be created in data_dir, and a command that only
        reads must leave no trace in a folder without a database."""
        from turkflow.config import Settings

        if self.settings_ is not None:
            return self.settings_.database_url
        return Settings(secret_key="unused", worker_hash_key="unused").database_url

    def session(self, create: bool = False):  # noqa: ANN201 - a context manager from turkflow.db
        """A transaction on a database whose schema is current (checked once per run).

        Only the commands that put the first things in (``create``: loading tasks, launching, inviting, a
        dashboard login) may start a new SQLite database; every other command refuses one that does not
        exist rather than creating it empty: run from the wrong folder, it would answer "no batches yet".
        """
        from turkflow.db import session_scope

        if not self._schema_ready:
            if not create:
                require_database(self.database_url)
            ensure_schema(self.settings.database_url)
            self._schema_ready = True
        return session_scope(self.settings.database_url)


def require_database(database_url: str) -> None:
    """A SQLite database file must exist already; a server's database is checked by ``ensure_schema``."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database and not Path(url.database).exists():
        raise CommandError(f"no turkflow database at {url.database}; run `turkflow db upgrade` or set "
                           "TURKFLOW_DATA_DIR")


def ensure_schema(database_url: str) -> None:
    """Migrate a SQLite database on first use (the zero-setup default); ask before touching a server's.

    Several web and Celery processes share a PostgreSQL database in production, so its migration is an
    explicit step (``turkflow db upgrade``) rather than a race between whichever process starts first.
    """
    from turkflow.db import schema_current, upgrade

    if schema_current(database_url):
        return
    if database_url.startswith("sqlite"):
        upgrade(database_url)
        return
    raise CommandError(f"the database schema of {shown_url(database_url)} is not current; "
                       "run `turkflow db upgrade` first")


def shown_url(url: str) -> str:
    """A database or Redis URL fit to print: the password masked."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL at all: print it as the user wrote it
        return url


def describe(exc: BaseException, app: Optional[App]) -> str:
    """One line that says what went wrong in the user's terms."""
    from alembic.util import CommandError as MigrationError
    from pydantic import ValidationError
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    from turkflow.errors import TurkflowError

    if isinstance(exc, ValidationError):
        return "; ".join(
            f"invalid setting TURKFLOW_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors()
        )
    if isinstance(exc, TurkflowError):  # written for the user
        return first_line(exc.message) or type(exc).__name__
    if isinstance(exc, DBAPIError):
        where = shown_url(app.settings.database_url) if app and app.settings_ else "the database"
        return f"database error at {where}: {first_line(str(exc.orig))}"
    if isinstance(exc, SQLAlchemyError):
        return f"database error: {first_line(str(exc))}"
    if isinstance(exc, MigrationError):
        return f"migration failed: {first_line(str(exc))}"
    if type(exc).__module__.startswith("turkflow."):  # the simulator's, outside the hierarchy
        return first_line(str(exc)) or type(exc).__name__
    if isinstance(exc, (ValueError, OSError, LookupError)):
        return first_line(str(exc)) or type(exc).__name__
    return f"unexpected {type(exc).__name__}: {first_line(str(exc))} (run `turkflow --debug ...` for details)"


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


class TurkflowGroup(click.Group):
    """The top-level group: turns every failure of any subcommand into ``error: ...`` and exit 1.

    ``lazy`` names commands (``{name: ("module:attribute", short help)}``) imported only when they run or
    their own help is asked for: ``turkflow --help`` lists them by the short help given here (a test keeps it
    the command's own), so neither it nor a command that does not need the simulator waits for its import."""

    def __init__(self, *args: Any, lazy: Optional[dict[str, tuple[str, str]]] = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        if name in self.lazy and name not in self.commands:
            module, attribute = self.lazy[name][0].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)
        rows = []
        for name in names:
            if name in self.lazy and name not in self.commands:
                rows.append((name, click.Command(name, help=self.lazy[name][1]).get_short_help_str(limit)))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:
            app = ctx.obj if isinstance(ctx.obj, App) else None
            if app is not None and app.debug:
                raise
            raise CommandError(describe(exc, app)) from None


pass_app = click.make_pass_decorator(App)


def check_public_url(settings: Settings, who: str, label: str, path: str, problems: list[str]) -> None:
    """A crowd platform sends its workers to our pages: print ``label: URL``, or add to ``problems`` that the
    public address is not HTTPS (``who``: whose browsers must reach it)."""
    if not settings.public_url.startswith("https://"):
        problems.append(f"TURKFLOW_PUBLIC_URL must be an HTTPS address {who} can reach (it is {settings.public_url})")
    else:
        click.echo(f"{label}: {settings.public_url.rstrip('/')}{path}")


def requester() -> str:
    """Who is acting, for the event log."""
    try:
        return f"requester:{getpass.getuser()}"
    except (OSError, KeyError):
        return "requester:cli"


# ---- money ----------------------------------------------------------------------------------------------


class Cents(int):
    """An amount typed on the command line, in cents (pence), with the currency its symbol named ("£0.50":
    GBP; None for a bare "0.50", which is in the currency of whatever pays it)."""

    currency: Optional[str] = None


def parse_cents(text: str) -> Cents:
    """``"0.20"``, ``"$0.20"``, ``"£0.20"`` or ``"€0.20"`` → 20 (with the symbol's currency); refuses negative
    amounts and fractions of a cent."""
    from turkflow.hits.money import SYMBOLS

    typed = str(text).strip()
    currency = next((code for code, symbol in SYMBOLS.items() if typed.startswith(symbol)), None)
    try:
        amount = Decimal(typed[1:] if currency else typed)
    except InvalidOperation:
        raise ValueError(f"{text!r} is not an amount such as 0.20 (or £0.20, $0.20)") from None
    if not amount.is_finite() or amount < 0:
        raise ValueError(f"{text!r} is not an amount such as 0.20 (or £0.20, $0.20)")
    cents = amount * 100
    if cents != cents.to_integral_value():
        raise ValueError(f"{text!r} has fractions of a cent")
    found = Cents(int(cents))
    found.currency = currency
    return found


def check_currency(amount: Optional[int], currency: str, option: str, who: str) -> None:
    """Refuse, in one line, an amount typed with another currency's symbol than ``currency``, the one
    ``who`` pays in."""
    typed = getattr(amount, "currency", None)
    if typed is not None and typed != currency:
        from turkflow.hits.money import shown

        raise CommandError(f"{option} {shown(amount, typed)} is in {typed}, but {who} pays in {currency}: "
                           f"give {shown(amount, currency)} or a bare amount "
                           f"({int(amount) // 100}.{int(amount) % 100:02d})")


def dollars(cents: int) -> str:
    return f"${cents / 100:,.2f}"


class Dollars(click.ParamType):
    """An amount on the command line (a bare 0.50, or with its currency's symbol, £0.50 or $0.50), stored as
    integer cents of the currency that pays it; ``check_currency`` refuses a symbol that is not it."""

    name = "AMOUNT"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> int:
        if isinstance(value, Cents):
            return value
        try:
            return parse_cents(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Names(click.Choice):
    """A choice among names a domain module defines (protocols, roles, platforms, statuses), read from it only
    when an option of this type is parsed or its command's help shown: ``turkflow --help`` and the commands
    that take no such option start without importing the models behind the names."""

    def __init__(self, names: Callable[[], Iterable[str]]) -> None:
        self._names = names
        self._choices: Optional[tuple[str, ...]] = None
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]
        if self._choices is None:
            self._choices = tuple(self._names())
        return self._choices


# What Names options offer, each read from where the domain defines it.


def protocol_names() -> list[str]:
    from turkflow.protocols.questions import PROTOCOLS

    return list(PROTOCOLS)


def role_names() -> list[str]:
    from turkflow.protocols.questions import ROLES

    return list(ROLES)


def platform_names() -> list[str]:
    from turkflow.hits.registry import PLATFORMS

    return list(PLATFORMS)


def worker_statuses() -> list[str]:
    from turkflow.models import WorkerStatus

    return [s.value for s in WorkerStatus]


# ---- output ---------------------------------------------------------------------------------------------


def console(stderr: bool = False):  # noqa: ANN201
    """A rich console on the current stdout/stderr (resolved per call, so CliRunner captures it).

    Piped output gets a wide page, so a table row stays one line for grep and files.
    """
    from rich.console import Console

    out = Console(stderr=stderr, highlight=False)
    return out if out.is_terminal else Console(stderr=stderr, highlight=False, width=200)


def table(title: Optional[str], columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from rich.table import Table

    out = Table(title=title, title_justify="left", header_style="bold")
    for name in columns:
        out.add_column(name, overflow="fold")
    for row in rows:
        out.add_row(*("" if v is None else str(v) for v in row))
    console().print(out)


def when(moment: Optional[datetime]) -> str:
    if moment is None:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def progress_bar(**options: Any):  # noqa: ANN201
    """Progress on stderr, so stdout stays clean for scripts: with its total, the time so far and an estimate
    of the time left. In a terminal, a rich bar; otherwise (a log file, CI, a pipe) a line every
    ``LINE_SECONDS`` seconds and one at the end (``ProgressLines``), which only a task with no total lacks."""
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    err = Console(stderr=True, highlight=False)
    if not err.is_terminal:
        return ProgressLines(**options)
    return Progress(TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                    TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), TextColumn("left"),
                    TimeRemainingColumn(), console=err, **options)


LINE_SECONDS = 5.0


@dataclass
class _Task:
    description: str
    total: Optional[float]
    completed: float
    detail: str
    started: float
    said: float = 0.0  # when its last line was printed


class ProgressLines:
    """``progress_bar`` where stderr is no terminal: the rich bar's ``add_task``, ``update`` and ``advance``,
    said as lines such as ``exporting conversations: 120 of 500 (24%), 0:12 so far, about 0:38 left``."""

    def __init__(self, transient: bool = False, every: float = LINE_SECONDS) -> None:
        self.every = every
        self.tasks: list[_Task] = []

    def __enter__(self) -> "ProgressLines":
        return self

    def __exit__(self, *exc: object) -> None:
        for task in self.tasks:  # the last line of what took long enough to say anything; quick work says nothing
            if time.monotonic() - task.started >= self.every:
                self._say(task)

    def add_task(self, description: str, total: Optional[float] = None, completed: float = 0,
                 detail: str = "", **_: Any) -> int:
        now = time.monotonic()
        self.tasks.append(_Task(description, total, completed, detail, now, now))
        return len(self.tasks) - 1

    def update(self, task_id: int, *, completed: Optional[float] = None, total: Optional[float] = None,
               detail: Optional[str] = None, advance: float = 0, **_: Any) -> None:
        task = self.tasks[task_id]
        task.completed = (task.completed if completed is None else completed) + advance
        task.total = task.total if total is None else total
        task.detail = task.detail if detail is None else detail
        if time.monotonic() - task.said >= self.every:
            self._say(task)

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def _say(self, task: _Task) -> None:
        task.said = time.monotonic()
        spent = task.said - task.started
        done = f"{task.completed:g}"
        left = ""
        if task.total:
            done += f" of {task.total:g} ({100 * task.completed / task.total:.0f}%)"
            if 0 < task.completed < task.total:
                left = f", about {_clock(spent * (task.total - task.completed) / task.completed)} left"
        detail = f" {task.detail}" if task.detail else ""
        click.echo(f"{task.description}: {done}{detail}, {_clock(spent)} so far{left}", err=True)


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{seconds:02d}" if minutes >= 60 else f"{minutes}:{seconds:02d}"


# ---- finding what a user names ------------------------------------------------------------------------


def find_batch(session: Session, batch_id: Optional[int]) -> Batch:
    from sqlmodel import col, select

    from turkflow.models import Batch

    if batch_id is None:
        found = session.exec(select(Batch).order_by(col(Batch.id).desc())).first()
        if found is None:
            raise CommandError("no batches yet; launch one with `turkflow batch launch`")
        return found
    found = session.get(Batch, batch_id)
    if found is None:
        raise CommandError(f"batch {batch_id} does not exist; `turkflow batch status` lists them")
    return found


def find_worker(session: Session, worker_ref: str) -> Worker:
    """The one worker WORKER_REF names: their id, worker id (MTurk or local) or unique name."""
    from sqlalchemy import or_
    from sqlmodel import select

    from turkflow.models import Worker

    named = [Worker.external_id == worker_ref, Worker.name == worker_ref]
    if worker_ref.isdigit():
        named.append(Worker.id == int(worker_ref))
    match = list(session.exec(select(Worker).where(or_(*named))))
    if not match:
        raise CommandError(f"no worker {worker_ref!r}; `turkflow worker list` shows them")
    if len(match) > 1:
        raise CommandError(f"{len(match)} workers match {worker_ref!r}; use the id from `turkflow worker list`")
    return match[0]
