"""The embedded crowd: HITs in our own database, taken from ``/queue`` by invited workers (docs/getting-started.md)."""

from turkflow.hits.local.provider import LocalProvider

__all__ = ["LocalProvider"]
