"""Amazon Mechanical Turk: its API calls, provider, page tokens, answer parsing and reconciler steps (docs/mturk.md)."""

from turkflow.hits.mturk.api import MTurkError, NotPayableYet, QualificationsMissing
from turkflow.hits.mturk.provider import MTurkProvider

__all__ = ["MTurkError", "MTurkProvider", "NotPayableYet", "QualificationsMissing"]
