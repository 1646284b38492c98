"""Where an agent's turns are published: the agents queue, not a crowd platform (README.md)."""

from turkflow.hits.agent.provider import AgentProvider

__all__ = ["AgentProvider"]
