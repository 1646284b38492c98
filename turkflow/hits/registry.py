"""Which crowd platforms turkflow knows, and how each one's provider is built: the one module that imports
the implementations, so the interface (``provider.py``) never does. The web app factory, the CLI and the
Celery app build their ``Providers`` here; adding a platform is one line in ``PLATFORMS``.

Each factory imports its platform when first used, so a process that never touches MTurk never loads boto3.
"""

from __future__ import annotations

from typing import Any, Optional

from turkflow.config import Settings
from turkflow.hits.provider import AGENT, CrowdProvider, ProviderFactory, Providers


def _local(settings: Settings, client: Optional[Any]) -> CrowdProvider:
    from turkflow.hits.local import LocalProvider

    return LocalProvider()


def _mturk(settings: Settings, client: Optional[Any]) -> CrowdProvider:
    from turkflow.hits.mturk import MTurkProvider

    return MTurkProvider(settings, client=client)


def _prolific(settings: Settings, client: Optional[Any]) -> CrowdProvider:
    from turkflow.hits.prolific.provider import ProlificProvider

    return ProlificProvider(settings, client=client)


def _agent(settings: Settings, client: Optional[Any]) -> CrowdProvider:
    from turkflow.hits.agent import AgentProvider

    return AgentProvider()


PLATFORMS: dict[str, ProviderFactory] = {"local": _local, "mturk": _mturk, "prolific": _prolific}


def providers(settings: Settings, clients: Optional[dict[str, Any]] = None) -> Providers:
    """Every platform's provider for one process, and the agents' (a batch launches on a platform; its turns
    an agent plays are on ``AGENT``); ``clients`` hands a platform a ready API client."""
    return Providers(settings, {**PLATFORMS, AGENT: _agent}, clients)
