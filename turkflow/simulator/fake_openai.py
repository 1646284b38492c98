"""A fake OpenAI-compatible chat-completions server over real HTTP on a loopback port, for the tests, the
simulator and ``bench agents``: turkflow's endpoint agents reach it through the real ``openai`` client.

It answers ``POST /v1/chat/completions`` with a JSON object built from the schema the request carries (in
``response_format`` or in the prompt): the first choice of each enum, a short text for each string, empty lists.
``answer`` replaces that with a function of the request; ``script`` queues what the next calls do instead
(``"timeout"``, ``"429"``, ``"500"``, ``"nonsense"``, ``"refuse_schema"``, ``"too_long"``, or a dict to answer);
``refuse_modes`` makes it refuse some structured-output modes as servers without them do (400); ``delay`` is
every answer's latency and ``errors`` a seeded share of calls that fail (timeouts and 5xx) for the benchmarks.
Every request is kept in ``requests``, unless the server runs in a process of its own (``own_process``: a
benchmark's endpoint then shares no interpreter lock with the simulated crowd, as a model server would not).
"""

from __future__ import annotations

import json
import multiprocessing
import random
import threading
import time
from collections import deque
from typing import Any, Callable, Optional

from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from turkflow.simulator.stack import free_port


def sample(schema: dict[str, Any]) -> Any:
    """The plainest value of a JSON Schema: what a model constrained to it says when it says the least."""
    if "enum" in schema:
        return schema["enum"][0] if schema["enum"] else ""
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: sample(props[name]) for name in schema.get("required", list(props))}
    if kind == "array":
        return []
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return 0
    return "Here is what you need: take it one step at a time."


def schema_of(body: dict[str, Any]) -> dict[str, Any]:
    """The answer's schema: the response_format's, else the one the system prompt quotes."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"]["schema"]
    system = next((m["content"] for m in body.get("messages", []) if m["role"] == "system"), "")
    start = system.find("{")
    if start >= 0:
        try:
            return json.JSONDecoder().raw_decode(system[start:])[0]
        except json.JSONDecodeError:
            pass
    return {"type": "object", "properties": {}}


class FakeOpenAI:
    def __init__(self, *, delay: float = 0.0, timeout_sleep: float = 30.0, errors: tuple[float, float] = (0.0, 0.0),
                 seed: int = 0, own_process: bool = False):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.delay, self.timeout_sleep = delay, timeout_sleep
        self.timeouts, self.server_errors = errors
        self.rng = random.Random(seed)
        self.answer: Callable[[dict[str, Any]], Any] = lambda body: sample(schema_of(body))
        self.script: deque[Any] = deque()
        self.refuse_modes: set[str] = set()
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._server = make_server("127.0.0.1", self.port, self._wsgi, threaded=True, request_handler=_Quiet)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        # forked when entered, so what is set before (``answer``) serves there too; ``requests`` stays empty here
        self.process = multiprocessing.get_context("fork").Process(
            target=self._server.serve_forever, daemon=True) if own_process else None

    def __enter__(self) -> "FakeOpenAI":
        (self.process or self._thread).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.join(timeout=5)
            self._server.server_close()
            return
        self._server.shutdown()
        self._thread.join(timeout=5)

    def _wsgi(self, environ: dict, start_response: Callable) -> Any:
        return self._respond(Request(environ))(environ, start_response)

    def _respond(self, request: Request) -> Response:
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            return _json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
        body = request.get_json(force=True)
        mode = (body.get("response_format") or {}).get("type", "prompted")
        with self.lock:
            self.requests.append(body)
            scripted = self.script.popleft() if self.script else None
            draw = self.rng.random()
        if mode in self.refuse_modes:
            return _json(400, {"error": {"message": f"response_format {mode} is not supported",
                                         "type": "invalid_request_error"}})
        if scripted is None and draw < self.timeouts:
            scripted = "timeout"
        elif scripted is None and draw < self.timeouts + self.server_errors:
            scripted = "500"
        if scripted == "timeout":
            time.sleep(self.timeout_sleep)
            return _json(504, {"error": {"message": "gave up"}})
        if scripted == "429":
            return _json(429, {"error": {"message": "rate limited", "type": "rate_limit_error"}},
                         headers={"Retry-After": "1"})
        if scripted == "500":
            return _json(500, {"error": {"message": "the model crashed", "type": "server_error"}})
        if scripted == "too_long":
            return _json(400, {"error": {"message": "This model's maximum context length is 4096 tokens",
                                         "type": "invalid_request_error", "code": "context_length_exceeded"}})
        if self.delay:
            time.sleep(self.delay)
        if scripted == "nonsense":
            content = "I would rather not answer in JSON today."
        else:
            content = json.dumps(scripted if isinstance(scripted, dict) else self.answer(body))
        prompt = sum(len(m.get("content", "")) for m in body.get("messages", [])) // 4
        return _json(200, {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": len(content) // 4,
                      "total_tokens": prompt + len(content) // 4}})


class _Quiet(WSGIRequestHandler):
    """No line per request: a benchmark makes thousands."""

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


def _json(status: int, payload: dict[str, Any], headers: Optional[dict[str, str]] = None) -> Response:
    return Response(json.dumps(payload), status=status, mimetype="application/json", headers=headers or {})
