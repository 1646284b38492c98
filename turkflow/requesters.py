"""Dashboard users. Passwords are stored only as salted hashes (werkzeug's scrypt/pbkdf2)."""

from __future__ import annotations

import re
from typing import Optional

from sqlmodel import Session, select
from werkzeug.security import check_password_hash, generate_password_hash

from turkflow import events
from turkflow.models import Requester

MIN_PASSWORD = 8
_USERNAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")


def create_requester(session: Session, username: str, password: str) -> Requester:
    """Register a dashboard user; ValueError names what is wrong with the username or password."""
    if not _USERNAME.fullmatch(username):
        raise ValueError("username: use 1-64 letters, digits or _ . @ -")
    if len(password) < MIN_PASSWORD:
        raise ValueError(f"password: use at least {MIN_PASSWORD} characters")
    if session.exec(select(Requester).where(Requester.username == username)).first():
        raise ValueError(f"username: {username!r} already exists")
    requester = Requester(username=username, password_hash=generate_password_hash(password))
    session.add(requester)
    session.flush()
    events.record(session, "requester_created", "system", username=username)
    return requester


def authenticate(session: Session, username: str, password: str) -> Optional[Requester]:
    requester = session.exec(select(Requester).where(Requester.username == username)).first()
    if requester is None or not check_password_hash(requester.password_hash, password):
        return None
    return requester
