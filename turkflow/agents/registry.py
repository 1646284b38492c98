"""Which kinds of agent turkflow knows, how each is declared and built: the one module that imports the kinds,
so the interface never does (``turkflow.hits.registry`` does the same for crowd platforms).

An agent is a row (``Agent``), declared once with ``turkflow agents add``, so every process builds the same one;
a built-in's name needs no declaration (its row is written when first used). Each agent writes its turns as a
worker of kind ``agent``, made with it.
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Callable, Optional, Sequence
from urllib.parse import urlparse

from sqlmodel import Session, col, select

from turkflow import events
from turkflow.agents import builtins
from turkflow.agents.interface import Player, Reply, TurnView
from turkflow.config import default
from turkflow.errors import AgentError, InvalidInput, NotFound
from turkflow.models import Agent, Worker, WorkerKind

KINDS = ("endpoint", "callable", "builtin")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,59}$")
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def add_agent(session: Session, name: str, *, endpoint: Optional[str] = None, model: Optional[str] = None,
              target: Optional[str] = None, api_key_env: Optional[str] = None,
              timeout_seconds: float = default("agent_timeout_seconds"), temperature: Optional[float] = None,
              max_tokens: Optional[int] = None) -> Agent:
    """Declare an agent: an endpoint (``endpoint`` and ``model``), a callable (``target``,
    ``package.module:function``) or, with neither, the built-in called ``name``. Refused, naming the option:
    a name taken, two kinds at once, a malformed URL, target or variable name."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidInput("letters, digits, '.', '_' and '-', at most 60, starting with a letter or digit", "name")
    if session.exec(select(Agent.id).where(Agent.name == name)).first() is not None:
        raise InvalidInput(f"an agent called {name!r} exists already (turkflow agents show {name})", "name")
    if endpoint is not None and target is not None:
        raise InvalidInput("give --endpoint (with --model) or --callable, not both", "callable")
    if timeout_seconds <= 0:
        raise InvalidInput("must be more than 0 seconds", "timeout")
    if max_tokens is not None and max_tokens < 1:
        raise InvalidInput("must be at least 1", "max-tokens")
    if temperature is not None and not 0 <= temperature <= 2:
        raise InvalidInput("must be from 0 to 2", "temperature")
    if api_key_env is not None and not _ENV.match(api_key_env):
        raise InvalidInput("the name of an environment variable (the key itself is never stored)", "api-key-env")
    if endpoint is not None:
        parsed = urlparse(endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidInput("an http(s) URL of the server, e.g. http://127.0.0.1:8080/v1", "endpoint")
        if not model:
            raise InvalidInput("the model the server should answer with", "model")
        kind = "endpoint"
    elif target is not None:
        if not _TARGET.match(target):
            raise InvalidInput("package.module:function", "callable")
        kind = "callable"
    else:
        if model or api_key_env:
            raise InvalidInput("--model and --api-key-env go with --endpoint", "endpoint")
        if name not in builtin_names(name):
            _no_builtin(name)
        kind, target = "builtin", name
    worker = Worker(external_id=f"agent:{name}", role="agent", kind=WorkerKind.agent, onboarded=False)
    session.add(worker)
    session.flush()
    agent = Agent(name=name, kind=kind, endpoint=endpoint, model=model, target=target, api_key_env=api_key_env,
                  timeout_seconds=timeout_seconds, temperature=temperature, max_tokens=max_tokens,
                  worker_id=worker.id)
    session.add(agent)
    session.flush()
    events.record(session, "agent_added", "requester", worker_id=worker.id, agent=name, agent_kind=kind)
    return agent


def builtin_names(name: str) -> list[str]:
    """The built-ins' names, ``name`` among them when it is a ``sim-NN``."""
    return [*(n for n in builtins.names() if n != "sim-NN"), *([name] if builtins.quality_of(name) is not None else [])]


def _no_builtin(name: str) -> None:
    raise InvalidInput(f"no built-in agent {name!r} (built-ins: {', '.join(builtins.names())}); declare an endpoint "
                       "with --endpoint URL --model M or a function with --callable package.module:function", "name")


def find_agents(session: Session, names: Sequence[str]) -> list[Agent]:
    """The agents called ``names``, in that order; a built-in not declared yet is declared now."""
    found = {a.name: a for a in session.exec(select(Agent).where(col(Agent.name).in_(list(names))))}
    agents = []
    for name in names:
        if name not in found:
            if name not in builtin_names(name):
                raise NotFound(f"no agent called {name!r}; declare it first: turkflow agents add {name} ...")
            found[name] = add_agent(session, name)
        agents.append(found[name])
    return agents


def player(agent: Agent) -> Player:
    """The agent, ready to answer (in the process that calls it: an endpoint's key is read here)."""
    if agent.kind == "endpoint":
        from turkflow.agents.endpoint import EndpointAgent

        return EndpointAgent(endpoint=agent.endpoint, model=agent.model, api_key_env=agent.api_key_env,
                             timeout_seconds=agent.timeout_seconds, temperature=agent.temperature,
                             max_tokens=agent.max_tokens, structured=agent.structured)
    if agent.kind == "callable":
        return CallableAgent(agent.target)
    return builtins.build(agent.target)


def load_kinds() -> None:
    """Import what the kinds of agent need before the first turn, not in it (an agents worker starting): the
    ``openai`` client takes a second or more of CPU to import, and each thread of a fresh worker waited on it."""
    from turkflow.agents import endpoint  # noqa: F401


class CallableAgent:
    """A Python function ``package.module:function`` that takes the turn's view (``TurnView.as_dict()``) and
    returns the answer (a dict); what it raises is the call's failure."""

    def __init__(self, target: str):
        module, _, function = target.partition(":")
        try:
            self.function: Callable[[dict[str, Any]], Any] = getattr(importlib.import_module(module), function)
        except (ImportError, AttributeError) as error:
            raise AgentError("error", f"cannot load {target}: {error}") from None

    def answer(self, view: TurnView) -> Reply:
        try:
            answer = self.function(view.as_dict())
        except Exception as error:  # noqa: BLE001 - the function's own failure is the call's outcome
            raise AgentError("error", f"{type(error).__name__}: {error}") from None
        if not isinstance(answer, dict):
            raise AgentError("invalid", f"the function returned {type(answer).__name__}, not a dict")
        return Reply(answer=answer, structured="callable")
