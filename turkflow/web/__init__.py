"""The Flask app factory. One blueprint per audience: ``worker`` (turn pages, the local queue) and
``admin`` (the requester's dashboard)."""

from __future__ import annotations

import re
from typing import Any, Optional

from flask import Flask, jsonify, render_template, request
from werkzeug.exceptions import HTTPException
from werkzeug.routing import IntegerConverter

from turkflow.config import Settings
from turkflow.errors import InvalidInput, TurkflowError
from turkflow.hits import registry
from turkflow.hits.provider import Providers


def create_app(settings: Settings | None = None, providers: Providers | None = None) -> Flask:
    settings = settings or Settings()
    app = Flask(__name__)
    app.url_map.converters["int"] = Int64Converter  # before any route is added
    app.config.update(
        SECRET_KEY=settings.secret_key,
        TURKFLOW_SETTINGS=settings,
        TURKFLOW_PROVIDERS=providers or registry.providers(settings),
        PUBLIC_URL=settings.public_url,
        MAX_CONTENT_LENGTH=256 * 1024,
        SESSION_COOKIE_SAMESITE="Lax",  # other sites cannot post forms as a signed-in worker
    )
    from turkflow.web.worker import bp as worker_bp

    app.register_blueprint(worker_bp)
    from turkflow.web.mturk import bp as mturk_bp
    from turkflow.web.onboarding import bp as onboarding_bp

    app.register_blueprint(mturk_bp)
    app.register_blueprint(onboarding_bp)
    from turkflow.web.admin import init_admin

    init_admin(app)
    app.register_error_handler(TurkflowError, error_response)
    app.register_error_handler(HTTPException, error_response)
    app.before_request(refuse_nul_bytes)
    return app


MAX_ID = 2**63 - 1  # ids are signed 64-bit integers on both databases
_ID = re.compile(r"[0-9]{1,19}")


class Int64Converter(IntegerConverter):
    """``<int:...>`` in every route is a database id: a number beyond signed 64 bits is a 404, never an
    overflow in the database driver."""

    regex = _ID.pattern

    def __init__(self, map: Any, fixed_digits: int = 0, min: Optional[int] = None, max: int = MAX_ID,
                 signed: bool = False) -> None:
        super().__init__(map, fixed_digits, min, max, signed)


def id_arg(name: str) -> Optional[int]:
    """An id in the query string: absent or empty is None; anything but a whole number that fits a signed
    64-bit id is a 400 naming the parameter."""
    raw = request.args.get(name, "")
    if not raw:
        return None
    if not _ID.fullmatch(raw) or int(raw) > MAX_ID:
        raise InvalidInput(f"expected a whole number from 0 to {MAX_ID}, got {raw[:40]!r}", name)
    return int(raw)


def wants_json() -> bool:
    """Programs (the crowd simulator) ask for JSON; browsers get pages."""
    return request.accept_mimetypes.best_match(["text/html", "application/json"]) == "application/json"


def error_response(error: Exception) -> tuple[Any, int, dict[str, str]]:
    """Every refusal, ours (``turkflow.errors``) or werkzeug's (404, 405, 413, ...), with its status: JSON
    for a program (one that asks for it, or sends JSON without asking for a page), a page for a person."""
    if isinstance(error, TurkflowError):
        status, message, field, headers = error.status, error.message, getattr(error, "field", None), {}
    else:
        assert isinstance(error, HTTPException)
        status, message, field = error.code or 500, error.description or error.name, None
        headers = {name: value for name, value in error.get_headers() if name.lower() != "content-type"}
    if wants_json() or (request.is_json and "text/html" not in request.accept_mimetypes.values()):
        return jsonify({"error": message, **({"field": field} if field else {})}), status, headers
    template = "admin/error.html" if request.blueprint == "admin" else "error.html"
    return render_template(template, message=message.rstrip("."), status=status), status, headers


def refuse_nul_bytes() -> None:
    """No field ever needs a NUL byte and PostgreSQL cannot store one (SQLite would keep it as sent), so it
    is refused before any view runs; the protocol refuses the other control characters in answers."""
    named = [(name, [value]) for name, value in (request.view_args or {}).items() if isinstance(value, str)]
    for name, values in [*named, *request.args.lists(), *request.form.lists()]:
        if "\x00" in name or any("\x00" in value for value in values):
            raise InvalidInput("a NUL byte is not allowed here", name.replace("\x00", "") or "(name)")
