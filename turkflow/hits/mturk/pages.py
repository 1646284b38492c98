"""The turn page's link to its HIT: the signed token in every HIT's ExternalURL, the signed form token that
proves a POST comes from a page we served, and the checks on the ids MTurk adds to the URL.

MTurk opens the page in an iframe on its worker site with ``assignmentId``, ``hitId``, ``workerId`` and
``turkSubmitTo`` added; while a worker only previews the HIT, ``assignmentId`` is ``PREVIEW_ASSIGNMENT``.
"""

from __future__ import annotations

import re
from typing import Optional

from itsdangerous import BadSignature, URLSafeSerializer
from sqlmodel import Session

from turkflow.errors import Conflict, Forbidden, NotFound
from turkflow.models import Hit

PREVIEW_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"
# Where the page posts the finished assignment, per marketplace (live or not); nothing else is accepted.
SUBMIT_SITES = {False: ("https://workersandbox.mturk.com",),
                True: ("https://www.mturk.com", "https://worker.mturk.com")}
_MTURK_ID = re.compile(r"^[A-Z0-9]{1,255}$")


def _hit_signer(secret_key: str) -> URLSafeSerializer:
    return URLSafeSerializer(secret_key, salt="turkflow-mturk-hit")


def hit_token(secret_key: str, hit_id: int) -> str:
    """The opaque token in a HIT's ExternalURL; it names our HIT row before MTurk's id is stored."""
    return _hit_signer(secret_key).dumps(hit_id)


def hit_for_page(session: Session, secret_key: str, token: str, mturk_hit_id: Optional[str]) -> Hit:
    """The HIT a turn page link belongs to; a forged token or a hitId that is not this HIT's is refused."""
    try:
        hit_id = _hit_signer(secret_key).loads(token or "")
    except BadSignature:
        raise Forbidden("this turn link is not valid") from None
    hit = session.get(Hit, hit_id)
    if hit is None or hit.provider != "mturk":
        raise NotFound("this turn does not exist")
    if hit.external_id is None:
        raise Conflict("this turn is still being published; reload the page in a minute")
    if mturk_hit_id is not None and mturk_hit_id != hit.external_id:
        raise Forbidden("this page does not belong to that HIT")
    return hit


def _signer_for_assignment(secret_key: str) -> URLSafeSerializer:
    return URLSafeSerializer(secret_key, salt="turkflow-mturk-assignment")


def assignment_token(secret_key: str, hit_id: int, assignment_id: str, worker_id: str) -> str:
    """Carried in the turn form: proves the POST comes from a page we served for exactly these ids.

    Cookies are unreliable inside MTurk's cross-site iframe, so this hidden field is the form's CSRF token.
    """
    return _signer_for_assignment(secret_key).dumps([hit_id, assignment_id, worker_id])


def check_assignment_token(secret_key: str, token: str, hit_id: int, assignment_id: str, worker_id: str) -> None:
    try:
        signed = _signer_for_assignment(secret_key).loads(token or "")
    except BadSignature:
        raise Forbidden("this form was not issued for this assignment; reload the HIT") from None
    if signed != [hit_id, assignment_id, worker_id]:
        raise Forbidden("this form was issued for another assignment or worker")


def check_mturk_ids(assignment_id: Optional[str], worker_id: Optional[str]) -> None:
    for name, value in (("assignmentId", assignment_id), ("workerId", worker_id)):
        if not value or not _MTURK_ID.match(value):
            raise Forbidden(f"{name} is not an MTurk id")
