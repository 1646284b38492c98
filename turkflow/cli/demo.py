"""``turkflow demo`` (and ``make demo``, which runs it): the whole stack on this machine from the installed
package, with a small batch and two join links to play it with.

Registered by ``turkflow.cli.main``; it runs the other commands it needs (``db upgrade``, ``tasks load``,
``batch launch``, ``batch status``) through the group it is registered on, and the ``Procfile``'s processes
through ``turkflow.procfile``.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path
from typing import NoReturn, Optional
from urllib.parse import urlsplit

import click

from turkflow.cli.common import CONTEXT, App, CommandError, pass_app, shown_url

BATCH = "demo"
ROLES = ("student", "teacher")
# The demo's processes are few and small: one machine, two people playing.
CONCURRENCY = {"WEB_CONCURRENCY": "2", "TURNS_CONCURRENCY": "1", "REVIEWS_CONCURRENCY": "1",
               "PLATFORM_CONCURRENCY": "1", "AGENTS_CONCURRENCY": "2"}
# Only a guard against a hang: each wait fails at once when a process exits, and a start on a busy 2-core
# machine (Celery processes loading spaCy, the web app importing) took minutes.
STARTUP_SECONDS = 600


def say(message: str) -> None:
    click.echo(f"demo: {message}")


def _stop_on_sigterm(signum: int, frame: object) -> NoReturn:
    raise SystemExit(0)


@click.command("demo", context_settings=CONTEXT)
@pass_app
@click.pass_context
def demo(ctx: click.Context, app: App) -> None:
    """Run the whole stack on this machine with a small batch to play, until Ctrl-C.

    Starts redis-server (its own, in TURKFLOW_DATA_DIR/redis, unless something answers on
    TURKFLOW_REDIS_URL), migrates the database, loads the sample tasks, launches a batch of 3 conversations of
    up to 8 turns on the local provider (once: a second run reuses it), starts every process of turkflow's
    Procfile (nginx in front of gunicorn on 127.0.0.1:TURKFLOW_PORT, a Celery worker per queue, beat) and
    prints a student's and a teacher's join link. A process that dies is started again, unless it keeps dying
    at once. Ctrl-C stops everything it started; the data in TURKFLOW_DATA_DIR (./var) stays for the next run,
    and the logs are in its demo/ folder.
    """
    from turkflow import procfile

    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C ends a demo, even from a background job
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    settings = app.settings
    logs = settings.data_dir / "demo"
    env = {**os.environ, **{name: os.environ.get(name, value) for name, value in CONCURRENCY.items()},
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           "TURKFLOW_DATA_DIR": str(settings.data_dir), "TURKFLOW_PUBLIC_URL": settings.public_url,
           "WEB_BIND": f"127.0.0.1:{settings.port}"}
    supervisor = procfile.Supervisor(env, logs, say, port=settings.port)
    try:
        redis_url = _redis(settings.redis_url, settings.data_dir, supervisor)
        env["TURKFLOW_REDIS_URL"] = redis_url
        if not procfile.port_free(settings.port):
            raise CommandError(f"port {settings.port} is in use (is another demo running?); set TURKFLOW_PORT to "
                               "another port")
        batch_id, links = _batch(ctx, app)
        for process in procfile.read():
            supervisor.start(process)
        workers = [p.name for p in procfile.read() if _celery_worker(p.command)]
        supervisor.wait_until(lambda: all(supervisor.logged(name, "ready.") for name in workers),
                              "the Celery workers", STARTUP_SECONDS)
        supervisor.wait_until(lambda: _answers(settings.port), f"the page at {settings.public_url}",
                              STARTUP_SECONDS)
        say(f"started {' '.join(supervisor.running)} (logs in {logs}/)")
        click.echo(f"\nturkflow is running at {settings.public_url}: play both roles of a conversation.")
        for role in ROLES:
            click.echo(f"  {role}:  {links[role]}")
        click.echo(f"""Both demo workers are onboarded already (workers you invite take their role's quiz first).
Open each link in its own browser window, one of them private (a link signs its window in as that
worker). As the student, take a turn from the queue and submit it; the teacher's turn opens a moment
later in the teacher's queue. From another terminal, in {Path.cwd()}:
  {_turkflow()} batch status {batch_id} --watch
""")
        group = ctx.find_root().command
        ctx.invoke(group.get_command(ctx, "batch").get_command(ctx, "status"), batch_id=batch_id)
        click.echo()
        say("Ctrl-C stops everything this started")
        supervisor.keep_running()
    except KeyboardInterrupt:
        pass
    except procfile.Failed as failed:
        message, _, tail = str(failed).partition("\n")
        if tail:
            click.echo(tail, err=True)
        raise CommandError(message) from None
    finally:
        stopped = supervisor.stop(last=("redis",))
        if stopped:
            say(f"stopped {' '.join(stopped)}")


def _redis(url: str, data_dir: Path, supervisor) -> str:  # noqa: ANN001 - procfile.Supervisor
    """The Redis to use: the one answering at ``url``, else a redis-server of the demo's own on that address
    (this machine's only), in ``data_dir/redis``."""
    from redis import Redis
    from redis.exceptions import RedisError

    from turkflow.procfile import Process

    def answers() -> bool:
        try:
            return bool(Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping())
        except (RedisError, OSError):
            return False

    if answers():
        say(f"using the Redis already answering at {shown_url(url)}")
        return url
    where = urlsplit(url)
    if (where.hostname or "127.0.0.1") not in ("127.0.0.1", "localhost"):
        raise CommandError(f"nothing answers at {shown_url(url)}, and it is not this machine: start that Redis "
                           "first")
    server = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/sbin:/usr/local/bin")
    if server is None:
        raise CommandError(f"nothing answers at {shown_url(url)} and redis-server is not installed: install it "
                           "(Debian: apt-get install redis-server) or set TURKFLOW_REDIS_URL to a Redis")
    (data_dir / "redis").mkdir(parents=True, exist_ok=True)
    port = where.port or 6379
    supervisor.start(Process("redis", f"{server} --bind 127.0.0.1 --port {port} --dir '{data_dir / 'redis'}' "
                                      "--appendonly yes --save '' --daemonize no"))
    supervisor.wait_until(answers, "redis-server", STARTUP_SECONDS)
    say(f"started redis-server on 127.0.0.1:{port} (data in {data_dir / 'redis'})")
    return url


def _batch(ctx: click.Context, app: App) -> tuple[int, dict[str, str]]:
    """The database migrated, the sample tasks loaded, the demo batch launched unless it runs already, and a
    join link for each role's demo worker (made once, onboarded)."""
    from sqlmodel import col, select

    from turkflow.invites import invite_url, invite_worker
    from turkflow.models import Batch, BatchStatus, Worker

    group = ctx.find_root().command
    ctx.invoke(group.get_command(ctx, "db").get_command(ctx, "upgrade"))
    ctx.invoke(group.get_command(ctx, "tasks").get_command(ctx, "load"), sample=True)
    ctx.invoke(group.get_command(ctx, "batch").get_command(ctx, "launch"), all_tasks=True, provider="local",
               conversations=3, max_turns=8, name=BATCH, skip_if_exists=True)
    settings, links = app.settings, {}
    with app.session(create=True) as session:
        batch: Optional[Batch] = session.exec(
            select(Batch).where(Batch.name == BATCH, col(Batch.status).in_([BatchStatus.active, BatchStatus.paused]))
            .order_by(col(Batch.id).desc())).first()
        if batch is None:
            raise CommandError(f"no active batch named {BATCH!r} after launching it")
        for role in ROLES:
            worker = session.exec(select(Worker).where(Worker.name == f"demo-{role}")).first()
            links[role] = (invite_url(settings.secret_key, settings.public_url, worker) if worker is not None else
                           invite_worker(session, settings.secret_key, settings.public_url, role, f"demo-{role}",
                                         onboarded=True)[1])
        return batch.id, links


def _celery_worker(command: str) -> bool:
    return "celery" in command and " worker " in f"{command} "


def _answers(port: int) -> bool:
    """Whether the site answers on the public port (through the front server, if the Procfile has one)."""
    import requests

    try:
        return requests.get(f"http://127.0.0.1:{port}/", timeout=5).status_code < 500
    except requests.RequestException:
        return False


def _turkflow() -> str:
    """How to call turkflow from another terminal: its name when that finds this one, else its full path."""
    here = Path(sys.executable).parent / "turkflow"
    found = shutil.which("turkflow")
    if found is not None and here.exists() and Path(found).resolve() == here.resolve():
        return "turkflow"
    return str(here) if here.exists() else f"{sys.executable} -m turkflow"
