"""Dashboard users and their sign-ins. Passwords are stored only as salted hashes (werkzeug's scrypt/pbkdf2);
signed-in sessions only as the SHA-256 of the random token the browser holds, so a copy of the database
signs nobody in.

Guessing is throttled: a username, or a client address, with too many recent failures is refused without
checking the password at all, so the right password does not work either until the failures age out. An
attempt counts as a failure *before* its password is checked (and stops counting if the password matched),
so simultaneous guesses cannot all slip under the limit while each other's checks are still running.
"""

from __future__ import annotations

import functools
import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable, Optional

from sqlalchemy import delete, func, or_, update
from sqlmodel import Session, col, select
from werkzeug.security import check_password_hash, generate_password_hash

from turkflow import events
from turkflow.errors import Conflict, InvalidInput, NotFound
from turkflow.models import Batch, BatchGrant, LoginSession, Requester, SignInFailure, utcnow

MIN_PASSWORD = 8
CLIENT_FAILURE_FACTOR = 4  # one address may try a few usernames (a team behind one NAT) before it is refused
_USERNAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")


def create_requester(session: Session, username: str, password: str, *, admin: bool = False,
                     actor: str = "system") -> Requester:
    """Register a dashboard user, an admin if ``admin`` or if nobody is one yet (someone must be able to manage
    the others); InvalidInput names what is wrong with the username or password."""
    if not _USERNAME.fullmatch(username):
        raise InvalidInput("use 1-64 letters, digits or _ . @ -", "username")
    if len(password) < MIN_PASSWORD:
        raise InvalidInput(f"use at least {MIN_PASSWORD} characters", "password")
    if session.exec(select(Requester).where(Requester.username == username)).first():
        raise InvalidInput(f"{username!r} already exists", "username")
    admin = admin or session.exec(select(Requester.id).where(Requester.admin).limit(1)).first() is None
    requester = Requester(username=username, password_hash=generate_password_hash(password), admin=admin)
    session.add(requester)
    session.flush()
    events.record(session, "requester_created", actor, username=username, admin=admin)
    return requester


# ---- what admins manage (turkflow.access says what each requester may see) -----------------------------


def find_requester(session: Session, username: str) -> Requester:
    found = session.exec(select(Requester).where(Requester.username == username)).first()
    if found is None:
        raise NotFound(f"no requester {username!r}")
    return found


def get_requester(session: Session, requester_id: int) -> Requester:
    found = session.get(Requester, requester_id)
    if found is None:
        raise NotFound(f"requester {requester_id} does not exist")
    return found


def requesters(session: Session) -> list[Requester]:
    return list(session.exec(select(Requester).order_by(Requester.username)))


def usernames(session: Session, ids: Iterable[Optional[int]]) -> dict[int, str]:
    wanted = {i for i in ids if i is not None}
    return dict(session.exec(select(Requester.id, Requester.username).where(col(Requester.id).in_(wanted)))
                .all()) if wanted else {}


def set_admin(session: Session, requester: Requester, admin: bool, *, actor: str) -> bool:
    """Make the requester an admin or not; False if they already were that. The last admin stays one."""
    if requester.admin == admin:
        return False
    if not admin:
        _keep_an_admin(session, requester, "stop being an admin")
    requester.admin = admin
    session.add(requester)
    events.record(session, "requester_admin" if admin else "requester_not_admin", actor, username=requester.username)
    return True


def set_disabled(session: Session, requester: Requester, disabled: bool, *, actor: str) -> bool:
    """Disable an account (it signs nobody in; its sessions end now) or enable it again; False if it already
    was. The last admin cannot be disabled."""
    if (requester.disabled_at is not None) == disabled:
        return False
    if disabled:
        _keep_an_admin(session, requester, "be disabled")
        now = utcnow()
        session.execute(update(LoginSession).where(LoginSession.requester_id == requester.id,
                                                   col(LoginSession.revoked_at).is_(None)).values(revoked_at=now))
    requester.disabled_at = utcnow() if disabled else None
    session.add(requester)
    events.record(session, "requester_disabled" if disabled else "requester_enabled", actor,
                  username=requester.username)
    return True


def _keep_an_admin(session: Session, requester: Requester, change: str) -> None:
    if not requester.admin or requester.disabled_at is not None:
        return
    others = session.exec(select(Requester.id).where(Requester.admin, col(Requester.disabled_at).is_(None),
                                                     Requester.id != requester.id).limit(1)).first()
    if others is None:
        raise Conflict(f"{requester.username} is the only admin and cannot {change}: make another admin first")


def grant(session: Session, requester: Requester, batch: Batch, *, actor: str) -> bool:
    """Open a batch to a requester, who then sees and changes it as their own; False if it already was open to
    them (their own, granted before, or they are an admin)."""
    if requester.admin or batch.requester_id == requester.id or session.get(BatchGrant, (batch.id, requester.id)):
        return False
    session.add(BatchGrant(batch_id=batch.id, requester_id=requester.id, granted_by=actor))
    events.record(session, "batch_granted", actor, batch_id=batch.id, username=requester.username)
    return True


def revoke(session: Session, requester: Requester, batch: Batch, *, actor: str) -> bool:
    """Take back a grant; False if there was none (a requester's own batch is not revoked: give it to another)."""
    found = session.get(BatchGrant, (batch.id, requester.id))
    if found is None:
        return False
    session.delete(found)
    events.record(session, "batch_revoked", actor, batch_id=batch.id, username=requester.username)
    return True


def owned(session: Session) -> dict[int, int]:
    """How many batches each requester owns, by requester id."""
    return dict(session.exec(select(Batch.requester_id, func.count()).where(col(Batch.requester_id).is_not(None))
                             .group_by(Batch.requester_id)).all())


def grants(session: Session) -> dict[int, list[int]]:
    """Each requester's granted batches, by requester id."""
    found: dict[int, list[int]] = {}
    for row in session.exec(select(BatchGrant).order_by(BatchGrant.batch_id)):
        found.setdefault(row.requester_id, []).append(row.batch_id)
    return found


@dataclass(frozen=True)
class SignInLimits:
    failures: int
    window: timedelta


@dataclass(frozen=True)
class SignIn:
    """What one attempt decided: the requester, or none; ``retry_after`` (seconds) when it was throttled;
    ``disabled`` when the password was right but an admin disabled the account."""

    requester: Optional[Requester] = None
    retry_after: int = 0
    disabled: bool = False


def sign_in(session: Session, username: str, password: str, client: str, limits: SignInLimits,
            now: Optional[datetime] = None) -> SignIn:
    """Check a password unless the username or the client is throttled; every failure counts.

    Counting and checking are one step as far as other attempts can tell: the attempt is counted as a
    failure under a write lock and committed before its password is checked, and taken back only if the
    password matched. So N simultaneous guesses get at most the limit checked, however many processes and
    threads serve them (checking the count, then recording the failure after the slow check, let 40
    simultaneous guesses get a dozen checks). Commits ``session``.
    """
    now = now or utcnow()
    attempt = _count_attempt(session, username, client, limits, now)
    session.commit()  # concurrent attempts count this one from now on
    if isinstance(attempt, datetime):  # throttled until then
        return SignIn(retry_after=max(1, int((attempt - now).total_seconds()) + 1))
    requester = authenticate(session, username, password)
    if requester is None:
        events.record(session, "sign_in_failed", "anonymous", username=username, client=client)
        return SignIn()
    session.execute(delete(SignInFailure).where(SignInFailure.id == attempt))
    if requester.disabled_at is not None:
        events.record(session, "sign_in_disabled", "anonymous", username=username, client=client)
        return SignIn(disabled=True)
    return SignIn(requester=requester)


def authenticate(session: Session, username: str, password: str) -> Optional[Requester]:
    """The requester whose password this is. An unknown username is checked against a dummy hash, so it
    takes as long as a wrong password and the answer time does not tell which usernames exist."""
    requester = session.exec(select(Requester).where(Requester.username == username)).first()
    matches = check_password_hash(requester.password_hash if requester else _dummy_hash(), password)
    return requester if requester is not None and matches else None


@functools.cache
def _dummy_hash() -> str:
    """A hash of nobody's password, made like real ones (same method and cost)."""
    return generate_password_hash(secrets.token_urlsafe(16))


def _throttled_until(session: Session, username: str, client: str, limits: SignInLimits,
                     now: datetime) -> Optional[datetime]:
    """When the oldest failure that keeps the username or the client over its limit stops counting."""
    until = None
    for column, value, limit in ((SignInFailure.username, username, limits.failures),
                                 (SignInFailure.client, client, limits.failures * CLIENT_FAILURE_FACTOR)):
        oldest_counted = session.exec(
            select(SignInFailure.at).where(column == value, col(SignInFailure.at) > now - limits.window)
            .order_by(col(SignInFailure.at).desc()).offset(limit - 1).limit(1)
        ).first()
        if oldest_counted is not None:
            ends = oldest_counted + limits.window
            until = ends if until is None else max(until, ends)
    return until


def _count_attempt(session: Session, username: str, client: str, limits: SignInLimits,
                   now: datetime) -> int | datetime:
    """Count an attempt as a failure unless the username or client is over its limit: the new row's id, or
    when the throttle ends. This username's and client's failures that no longer count go."""
    _lock_failures(session)
    blocked_until = _throttled_until(session, username, client, limits, now)
    if blocked_until is not None:
        return blocked_until
    session.execute(delete(SignInFailure).where(
        or_(SignInFailure.username == username, SignInFailure.client == client),
        col(SignInFailure.at) <= now - limits.window))
    attempt = SignInFailure(username=username, client=client, at=now)
    session.add(attempt)
    session.flush()
    return attempt.id


def _lock_failures(session: Session) -> None:
    """Take the lock that makes count-then-record one step for concurrent sign-ins, until the commit:
    SQLite's write lock (taken now, waiting on the busy timeout, rather than at the first write) or, on
    PostgreSQL, a table lock that only other writers of sign-in failures wait for (reads go on)."""
    connection = session.connection()
    if connection.dialect.name == "sqlite":
        if not connection.connection.dbapi_connection.in_transaction:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        connection.exec_driver_sql(f"LOCK TABLE {SignInFailure.__table__.name} IN SHARE ROW EXCLUSIVE MODE")


# ---- server-side sessions -------------------------------------------------------------------------------


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def start_session(session: Session, requester: Requester, lifetime: timedelta) -> str:
    """Open a dashboard session; returns the token for the browser's cookie (only its hash is stored). The
    requester's expired sessions go: they sign nobody in either way."""
    token = secrets.token_urlsafe(32)
    now = utcnow()
    session.execute(delete(LoginSession).where(LoginSession.requester_id == requester.id,
                                               col(LoginSession.expires_at) <= now))
    session.add(LoginSession(id=_digest(token), requester_id=requester.id, created_at=now,
                             expires_at=now + lifetime))
    events.record(session, "requester_signed_in", f"requester:{requester.username}")
    return token


def requester_for_session(session: Session, token: str) -> Optional[Requester]:
    """The requester a cookie's token signs in, unless that session was revoked or has expired or an admin
    disabled the account."""
    row = session.get(LoginSession, _digest(token))
    if row is None or row.revoked_at is not None or row.expires_at <= utcnow():
        return None
    requester = session.get(Requester, row.requester_id)
    return requester if requester.disabled_at is None else None


def end_session(session: Session, token: str) -> None:
    """Revoke the session: the cookie, saved anywhere, signs nobody in any more."""
    row = session.get(LoginSession, _digest(token))
    if row is not None and row.revoked_at is None:
        row.revoked_at = utcnow()
        requester = session.get(Requester, row.requester_id)
        events.record(session, "requester_signed_out", f"requester:{requester.username}")
