"""Local workers join with a personal invite link: a signed token naming their worker id.

The token is the only credential of the local provider, so nobody can act as another worker without
their link; the requester hands links out (``turkflow worker invite``) and can revoke one by blocking.
Opening the link gives the browser a second, dated token (``session_token``) that expires on its own, so a
copied cookie is worth less than the link.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Optional

from itsdangerous import BadSignature, URLSafeSerializer, URLSafeTimedSerializer
from sqlalchemy import bindparam
from sqlmodel import Session, select

from turkflow import events
from turkflow.models import Worker
from turkflow.protocols.questions import ROLES
from turkflow.signing import SkewTolerantSigner


def _serializer(secret_key: str) -> URLSafeSerializer:
    return URLSafeSerializer(secret_key, salt="turkflow-invite")


def invite_worker(session: Session, secret_key: str, public_url: str, role: str,
                  name: Optional[str] = None, onboarded: bool = False) -> tuple[Worker, str]:
    """Register a local worker for one role and return them with their personal join URL.

    The worker takes their role's onboarding quiz before their first turn, unless ``onboarded`` says the
    requester vouches for them already (a lab member, the demo's own two workers).
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    worker = Worker(external_id=f"local-{secrets.token_hex(6)}", role=role, name=name, onboarded=onboarded)
    session.add(worker)
    session.flush()
    events.record(session, "worker_invited", "requester", worker_id=worker.id, role=role, name=name,
                  onboarded=onboarded)
    return worker, invite_url(secret_key, public_url, worker)


def invite_url(secret_key: str, public_url: str, worker: Worker) -> str:
    return f"{public_url.rstrip('/')}/join/{_serializer(secret_key).dumps(worker.external_id)}"


def worker_from_token(session: Session, secret_key: str, token: str) -> Optional[Worker]:
    """The worker an invite token names, or None for a forged or unknown token."""
    try:
        external_id = _serializer(secret_key).loads(token)
    except BadSignature:
        return None
    return _worker(session, external_id)


@lru_cache(maxsize=8)
def _session_serializer(secret_key: str) -> URLSafeTimedSerializer:
    """Built once per key: every request of a signed-in worker reads their token."""
    return URLSafeTimedSerializer(secret_key, salt="turkflow-worker-session", signer=SkewTolerantSigner)


def session_token(secret_key: str, worker: Worker) -> str:
    """What a browser that opened the worker's link keeps: their id, signed and dated."""
    return _session_serializer(secret_key).dumps(worker.external_id)


def worker_from_session_token(session: Session, secret_key: str, token: str, max_age: int) -> Optional[Worker]:
    """The worker a browser's token names, or None for a forged, unknown or older-than-max_age token."""
    external_id = _session_external_id(secret_key, token, max_age)
    return None if external_id is None else _worker(session, external_id)


@dataclass(frozen=True)
class SignedIn:
    """A signed-in worker as the queue, the take and the submit read them: what they check (id, role, status,
    onboarding, stage) and show (external id, name), and until when they count as present
    (``turkflow.hits.keep.seen`` moves it on only when it must), one plain row. Loading the ``Worker`` object
    cost three times reading its row on every request; nothing changes a worker through this, and a page that
    changes the worker (onboarding) loads the ``Worker``."""

    id: int
    external_id: str
    role: str
    status: str
    onboarded: bool
    stage: int
    name: Optional[str]
    present_until: Optional[datetime]


def signed_in_from_session_token(session: Session, secret_key: str, token: str, max_age: int) -> Optional[SignedIn]:
    """``worker_from_session_token`` as a ``SignedIn`` row."""
    external_id = _session_external_id(secret_key, token, max_age)
    if external_id is None:
        return None
    row = session.connection().execute(_SIGNED_IN, {"external_id": external_id}).first()
    return None if row is None else SignedIn(*row)


def _session_external_id(secret_key: str, token: str, max_age: int) -> Optional[str]:
    try:
        return _session_serializer(secret_key).loads(token, max_age=max_age)
    except BadSignature:  # SignatureExpired is one
        return None


# Built once: every request of a signed-in worker looks them up.
_BY_EXTERNAL_ID = select(Worker).where(Worker.external_id == bindparam("external_id"))
_SIGNED_IN = select(*(Worker.__table__.c[name] for name in SignedIn.__dataclass_fields__)).where(
    Worker.__table__.c.external_id == bindparam("external_id"))


def _worker(session: Session, external_id: str) -> Optional[Worker]:
    return session.execute(_BY_EXTERNAL_ID, {"external_id": external_id}).scalars().first()
