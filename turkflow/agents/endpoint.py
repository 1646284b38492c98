"""An agent behind an OpenAI-compatible chat-completions server (vLLM, llama.cpp's server, Ollama, hosted APIs),
called with the official ``openai`` client.

Structured output, most constrained first, each mode tried only when the server refused the one before
(a 400 or 422 naming the request, not the answer), and the mode that worked remembered for the agent:

- ``json_schema``: ``response_format={"type": "json_schema", ...}``; vLLM's and llama.cpp's servers constrain
  decoding to the schema, Ollama from 0.5 on;
- ``json_object``: JSON mode (older Ollama and llama.cpp builds), the schema in the prompt;
- ``prompted``: no ``response_format`` at all, the schema in the prompt, the first JSON object of the text read.

Every call has a timeout and no retries of the client's own (the agents queue retries with its own back-off,
recording each call); each failure becomes an ``AgentError`` whose ``outcome`` the report counts.

A process keeps one client per server, key and timeout (``client``), shared by its threads, so an agent's turn
reuses an open connection and builds no client: a client's TLS context alone took about as much CPU (some 25 ms)
as the rest of an agent's turn in the agents worker, and a new connection per call.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from typing import Any, Optional

import openai

from turkflow.agents.interface import Reply, TurnView
from turkflow.errors import AgentError

MODES = ("json_schema", "json_object", "prompted")
# Phrases of servers' "the prompt does not fit" errors (OpenAI's code, vLLM's, llama.cpp's and Ollama's wording)
_TOO_LONG = re.compile(r"context[_ ]length|maximum context|too long|exceeds the (available )?context|n_ctx",
                       re.IGNORECASE)
_JSON_START = re.compile(r"[{\[]")


def messages(view: TurnView, mode: str) -> list[dict[str, str]]:
    """The chat for one turn: the role's instructions and, unless the server constrains the answer to the
    schema, the schema itself; then what the role sees, the dialog so far, this turn's earlier steps and why
    the last answer was refused."""
    system = [view.instructions, "",
              "You play this role in a dialog. Answer with one JSON object and nothing else."]
    if mode != "json_schema":
        system += ["It must match this JSON Schema:", json.dumps(view.schema, ensure_ascii=False)]
    if view.closing:
        system += [f"Each answer is one action; the turn ends with {' or '.join(view.closing)}. Earlier actions "
                   "of this turn and what they gave are listed under 'this turn so far'."]
    user = {"what you see": view.sees, "dialog so far": view.history}
    if view.steps:
        user["this turn so far"] = view.steps
    if view.refused:
        user["your last answer was refused"] = view.refused
    return [{"role": "system", "content": "\n".join(system)},
            {"role": "user", "content": json.dumps(user, ensure_ascii=False, default=str)}]


def response_format(view: TurnView, mode: str) -> Optional[dict[str, Any]]:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": f"{view.protocol}_{view.role}_answer",
                                                       "schema": view.schema, "strict": False}}
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def parse(text: Optional[str], mode: str) -> dict[str, Any]:
    """The answer's JSON object; a prompted answer may wrap it in words or a code fence."""
    if not text or not text.strip():
        raise AgentError("invalid", "the answer was empty", structured=mode)
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        found = None
        start = _JSON_START.search(text)
        if start is not None:
            try:
                found, _ = json.JSONDecoder().raw_decode(text[start.start():])
            except json.JSONDecodeError:
                found = None
    if not isinstance(found, dict):
        raise AgentError("invalid", f"not a JSON object: {text.strip()[:120]!r}", structured=mode)
    return found


@lru_cache(maxsize=64)
def client(endpoint: str, key: str, timeout_seconds: float) -> openai.OpenAI:
    """This process's client of one server (thread-safe, its connections kept open between calls). The client wants
    a key; a local server without one is asked with a placeholder it ignores."""
    return openai.OpenAI(base_url=endpoint, api_key=key or "not-needed", timeout=timeout_seconds, max_retries=0)


class EndpointAgent:
    """One declared endpoint agent (an ``Agent`` row's values)."""

    def __init__(self, *, endpoint: str, model: str, api_key_env: Optional[str], timeout_seconds: float,
                 temperature: Optional[float] = None, max_tokens: Optional[int] = None,
                 structured: Optional[str] = None):
        key = os.environ.get(api_key_env, "") if api_key_env else ""
        if api_key_env and not key:
            raise AgentError("error", f"the environment variable {api_key_env} holding the agent's key is not set "
                                      "in this process (every agents-queue worker needs it)")
        self.client = client(endpoint, key, timeout_seconds)
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens
        self.modes = MODES[MODES.index(structured):] if structured in MODES else MODES

    def answer(self, view: TurnView) -> Reply:
        refused: list[str] = []
        for mode in self.modes:
            try:
                completion = self._create(view, mode)
            except openai.BadRequestError as error:  # 400: the request, perhaps its response_format
                if _TOO_LONG.search(str(error)):
                    raise AgentError("too_long", f"the prompt does not fit the model's context: {error}",
                                     structured=mode) from None
                refused.append(f"{mode}: {error}")
                continue
            except openai.UnprocessableEntityError as error:
                refused.append(f"{mode}: {error}")
                continue
            choice = completion.choices[0] if completion.choices else None
            if choice is None:
                raise AgentError("invalid", "the server sent no choice", structured=mode)
            if choice.finish_reason == "length":
                raise AgentError("too_long", "the answer was cut at the token limit", structured=mode)
            usage = completion.usage
            return Reply(answer=parse(choice.message.content, mode), structured=mode,
                         prompt_tokens=usage.prompt_tokens if usage else None,
                         completion_tokens=usage.completion_tokens if usage else None)
        raise AgentError("error", "the server refused every structured-output mode: " + "; ".join(refused)[:500])

    def _create(self, view: TurnView, mode: str) -> Any:
        options: dict[str, Any] = {}
        fmt = response_format(view, mode)
        if fmt is not None:
            options["response_format"] = fmt
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.max_tokens is not None:
            options["max_tokens"] = self.max_tokens
        try:
            return self.client.chat.completions.create(model=self.model, messages=messages(view, mode), **options)
        except (openai.BadRequestError, openai.UnprocessableEntityError):
            raise
        except openai.APITimeoutError:
            raise AgentError("timeout", "the server did not answer in time", structured=mode) from None
        except openai.APIConnectionError as error:
            raise AgentError("refused", f"could not reach the server: {error}", structured=mode) from None
        except openai.RateLimitError as error:
            raise AgentError("rate_limited", f"429: {error}", retry_after=_retry_after(error),
                             structured=mode) from None
        except openai.InternalServerError as error:
            raise AgentError("server_error", f"{error.status_code}: {error}", structured=mode) from None
        except openai.APIStatusError as error:
            raise AgentError("error", f"{error.status_code}: {error}", structured=mode) from None
        except openai.APIError as error:  # an answer the client could not read
            raise AgentError("invalid", f"unreadable answer: {error}", structured=mode) from None


def _retry_after(error: openai.APIStatusError) -> Optional[float]:
    """A 429's Retry-After in seconds (a number; an HTTP date is not waited for exactly, the back-off is)."""
    value = error.response.headers.get("retry-after") if error.response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
