"""Local workers join with a personal invite link: a signed token naming their worker id.

The token is the only credential of the local provider, so nobody can act as another worker without
their link; the requester hands links out (``turkflow worker invite``) and can revoke one by blocking.
"""

from __future__ import annotations

import secrets
from typing import Optional

from itsdangerous import BadSignature, URLSafeSerializer
from sqlmodel import Session, select

from turkflow import events
from turkflow.models import Role, Worker


def _serializer(secret_key: str) -> URLSafeSerializer:
    return URLSafeSerializer(secret_key, salt="turkflow-invite")


def invite_worker(session: Session, secret_key: str, public_url: str, role: str,
                  name: Optional[str] = None, onboarded: bool = False) -> tuple[Worker, str]:
    """Register a local worker for one role and return them with their personal join URL.

    The worker takes their role's onboarding quiz before their first turn, unless ``onboarded`` says the
    requester vouches for them already (a lab member, the demo's own two workers).
    """
    if role not in (Role.student, Role.teacher):
        raise ValueError(f"role must be student or teacher, not {role!r}")
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
    return session.exec(select(Worker).where(Worker.external_id == external_id)).first()
