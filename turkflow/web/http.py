"""What every page shares about HTTP: ids in URLs and query strings, JSON bodies, bytes that are not UTF-8,
bodies past the size limit, error answers (a page for a person, JSON for a program) and default headers.
The app factory (``turkflow.web``) wires these in; the blueprints import them from here, so no blueprint
imports the package that imports it."""

from __future__ import annotations

import io
import re
from typing import IO, Any, Iterable, Optional
from urllib.parse import parse_qsl

import flask
from flask import Response, jsonify, render_template, request
from werkzeug.exceptions import HTTPException
from werkzeug.formparser import FormDataParser
from werkzeug.routing import IntegerConverter
from werkzeug.utils import cached_property

from turkflow.errors import InvalidInput, ServiceUnavailable, TurkflowError


MAX_ID = 2**31 - 1  # id columns are INTEGER: 32 bits on PostgreSQL, so every larger number is no id
_ID = re.compile(r"[0-9]{1,10}")


class IdConverter(IntegerConverter):
    """``<int:...>`` in every route is a database id: a number beyond ``MAX_ID`` is a 404, never an
    out-of-range error in the database driver."""

    regex = _ID.pattern

    def __init__(self, map: Any, fixed_digits: int = 0, min: Optional[int] = None, max: int = MAX_ID,
                 signed: bool = False) -> None:
        super().__init__(map, fixed_digits, min, max, signed)


def id_arg(name: str) -> Optional[int]:
    """An id in the query string: absent or empty is None; anything but a whole number up to ``MAX_ID``
    is a 400 naming the parameter."""
    raw = request.args.get(name, "")
    if not raw:
        return None
    if not _ID.fullmatch(raw) or int(raw) > MAX_ID:
        raise InvalidInput(f"expected a whole number from 0 to {MAX_ID}, got {raw[:40]!r}", name)
    return int(raw)


def json_object(what: str = "send one JSON object") -> dict[str, Any]:
    """The request's JSON body, which must be one object; anything else (not JSON, a list, nested deeper
    than the parser goes) is a 400 naming the body, with ``what`` saying what was expected. A string that
    is not Unicode (JSON's ``"\\ud800"``: a lone surrogate, which no page, log or database can encode) is a
    400 naming its field, so no view ever holds one."""
    try:
        body = request.get_json(silent=True)
    except RecursionError:
        body = None
    if not isinstance(body, dict):
        raise InvalidInput(what, "body")
    _refuse_surrogates(body)
    return body


def _refuse_surrogates(body: dict[str, Any]) -> None:
    """Every name and string in the body, level by level (a loop, not recursion: the body may be as deep as
    the JSON parser goes); a nested field is named as the protocols name it (``form.Genre``, ``fillers[1]``)."""
    pending: list[tuple[Any, str]] = [(body, "")]
    for value, path in pending:  # grows while it is read
        if isinstance(value, str):
            if not encodable(value):
                raise InvalidInput(NOT_UNICODE, path)
        elif isinstance(value, dict):
            for name, item in value.items():
                field = f"{path}.{name}" if path else name
                if not encodable(name):
                    raise InvalidInput(NOT_UNICODE, printable(field))
                pending.append((item, field))
        elif isinstance(value, list):
            pending.extend((item, f"{path}[{n}]") for n, item in enumerate(value))


NOT_UNICODE = "this text is not valid Unicode"


def encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(text: str) -> str:
    """``text`` with whatever UTF-8 cannot encode (lone surrogates) written as escapes, e.g. ``\\ud800``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


# ---- what the request carries: forms and query strings in UTF-8, bodies within the limit -----------------


def utf8_fields(raw: bytes) -> list[tuple[str, str]]:
    """A form body's or query string's fields, split as werkzeug splits them; a name or value whose bytes are
    not UTF-8 (``%FF%FE``, a surrogate's ``%ED%A0%80``) is a 400 naming the field. werkzeug keeps such bytes
    as literal ``%FF`` text, which was stored as if the worker had typed it."""
    fields = []
    for name, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True, encoding="latin-1"):
        name_bytes, value_bytes = name.encode("latin-1"), value.encode("latin-1")
        try:
            fields.append((name_bytes.decode("utf-8"), value_bytes.decode("utf-8")))
        except UnicodeDecodeError:
            field = name_bytes.decode("utf-8", "werkzeug.url_quote")  # its bytes as sent, e.g. "%FF"
            raise InvalidInput("this is not UTF-8 text; send text as UTF-8", field) from None
    return fields


class FormParser(FormDataParser):
    """werkzeug's form parser with ``utf8_fields`` for urlencoded forms (multipart ones keep werkzeug's
    decoding, which shows bytes that are not UTF-8 as U+FFFD; no page of ours posts multipart)."""

    def _parse_urlencoded(self, stream: IO[bytes], mimetype: str, content_length: Optional[int],
                          options: dict[str, str]) -> Any:
        # werkzeug's own, but strict: the stream is already limited to MAX_CONTENT_LENGTH
        return stream, self.cls(utf8_fields(stream.read())), self.cls()


class Request(flask.Request):
    """Flask's request, whose form and query string refuse text that is not UTF-8, naming the field."""

    form_data_parser_class = FormParser

    @cached_property
    def args(self) -> Any:
        return self.parameter_storage_class(utf8_fields(self.query_string))


class BoundedBody:
    """WSGI middleware: a body sent without a Content-Length (``Transfer-Encoding: chunked``) is read here,
    up to one byte past ``limit``, and handed on with its length, so a body over the limit is a 413 as any
    declared one is. werkzeug otherwise cuts such a body at the limit without a word, and the cut form or
    JSON was refused as malformed (a 400)."""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            body = _read_up_to(environ["wsgi.input"], self.limit + 1)
            # the body as if sent with its length (werkzeug ignores a Content-Length beside chunked)
            environ = {name: value for name, value in environ.items() if name != "HTTP_TRANSFER_ENCODING"}
            environ.update({"wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))})
        return self.app(environ, start_response)


def _read_up_to(stream: IO[bytes], size: int) -> bytes:
    """At most ``size`` bytes; a server's dechunking stream may give fewer per read than asked."""
    parts, got = [], 0
    while got < size:
        data = stream.read(min(size - got, 64 * 1024))
        if not data:
            break
        parts.append(data)
        got += len(data)
    return b"".join(parts)


def wants_json() -> bool:
    """Programs (the crowd simulator) ask for JSON; browsers get pages."""
    return request.accept_mimetypes.best_match(["text/html", "application/json"]) == "application/json"


def error_response(error: Exception) -> tuple[Any, int, dict[str, str]]:
    """Every refusal, ours (``turkflow.errors``) or werkzeug's (404, 405, 413, ...), with its status: JSON
    for a program (one that asks for it, or sends JSON without asking for a page), a page for a person.
    Whatever the message holds is shown (text UTF-8 cannot encode, as escapes); a 503 says when to retry."""
    if isinstance(error, TurkflowError):
        status, message, field, headers = error.status, error.message, getattr(error, "field", None), {}
    else:
        assert isinstance(error, HTTPException)
        status, message, field = error.code or 500, error.description or error.name, None
        headers = {name: value for name, value in error.get_headers() if name.lower() != "content-type"}
    headers.update(retry_after(error))
    message, field = printable(message), printable(field) if field else None
    if wants_json() or (request.is_json and "text/html" not in request.accept_mimetypes.values()):
        return jsonify({"error": message, **({"field": field} if field else {})}), status, headers
    template = "admin/error.html" if request.blueprint == "admin" else "error.html"
    page = render_template(template, message=message.rstrip("."), status=status, retry="Retry-After" in headers)
    return page, status, headers


def retry_after(error: Exception) -> dict[str, str]:
    """The header that tells a client when to send a request that storage could not take again."""
    return {"Retry-After": str(error.retry_after)} if isinstance(error, ServiceUnavailable) else {}


def refuse_nul_bytes() -> None:
    """No field ever needs a NUL byte and PostgreSQL cannot store one (SQLite would keep it as sent), so it
    is refused before any view runs; the protocol refuses the other control characters in answers."""
    named = [(name, [value]) for name, value in (request.view_args or {}).items() if isinstance(value, str)]
    for name, values in [*named, *request.args.lists(), *request.form.lists()]:
        if "\x00" in name or any("\x00" in value for value in values):
            raise InvalidInput("a NUL byte is not allowed here", name.replace("\x00", "") or "(name)")


# Static files and error pages outside a blueprint get these; blueprints set their own policies first.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data: https:; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)


HSTS_SECONDS = 365 * 24 * 3600


def default_headers(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    if flask.current_app.config["SESSION_COOKIE_SECURE"]:  # served over https: browsers keep to it for a year
        response.headers["Strict-Transport-Security"] = f"max-age={HSTS_SECONDS}"
    return response
