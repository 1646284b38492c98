"""The Flask app factory. One blueprint per audience: ``worker`` (turn pages, the local queue, end-of-dialog
questions), ``onboarding``, ``mturk`` and ``prolific`` (the turn page reached from each platform), ``admin``
(the requester's dashboard), and each protocol's pages under ``protocols/`` (STAR, Frames, MEEP). What the
blueprints share about HTTP is in ``http``."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Flask
from flask.sessions import SecureCookieSessionInterface
from itsdangerous import URLSafeTimedSerializer
from flask_wtf.csrf import CSRFProtect
from werkzeug.exceptions import HTTPException
from werkzeug.middleware.proxy_fix import ProxyFix

from turkflow.config import Settings
from turkflow.errors import TurkflowError
from turkflow.hits import registry
from turkflow.hits.provider import Providers
from turkflow.signing import SkewTolerantSigner
from turkflow.web.http import BoundedBody, IdConverter, Request, default_headers, error_response, refuse_nul_bytes


class SessionCookies(SecureCookieSessionInterface):
    """Flask's signed session cookie (the dashboard's sign-in, every browser's CSRF secret), good on every web
    machine of a deployment though their clocks differ a little (``turkflow.signing``)."""

    def get_signing_serializer(self, app: Flask) -> URLSafeTimedSerializer | None:
        serializer = super().get_signing_serializer(app)
        if serializer is not None:
            serializer.signer = SkewTolerantSigner
        return serializer


def create_app(settings: Settings | None = None, providers: Providers | None = None) -> Flask:
    settings = settings or Settings()
    app = Flask(__name__)
    app.request_class = Request
    app.session_interface = SessionCookies()
    app.url_map.converters["int"] = IdConverter  # before any route is added
    secure = urlsplit(settings.public_url).scheme == "https"
    # Over HTTPS, __Host- cookies can be set by this host only: no sibling subdomain can plant its own.
    cookie_prefix = "__Host-" if secure else ""
    app.config.update(
        SECRET_KEY=settings.secret_key,
        TURKFLOW_SETTINGS=settings,
        TURKFLOW_PROVIDERS=providers or registry.providers(settings),
        PUBLIC_URL=settings.public_url,
        MAX_CONTENT_LENGTH=256 * 1024,
        # Flask's session holds the dashboard sign-in and every browser's CSRF secret; a local worker's
        # identity has a cookie of its own (``WORKER_COOKIE``), so joining never touches a sign-in.
        SESSION_COOKIE_NAME=f"{cookie_prefix}session",
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=secure,
        WORKER_COOKIE=f"{cookie_prefix}worker",
        WTF_CSRF_TIME_LIMIT=None,  # a form's token is good for as long as the browser's session
    )
    from turkflow.workers.app import use_settings

    use_settings(settings)  # the tasks this app queues go to its own Redis
    if settings.proxy_hops:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=settings.proxy_hops, x_proto=settings.proxy_hops)
    app.wsgi_app = BoundedBody(app.wsgi_app, app.config["MAX_CONTENT_LENGTH"])
    from turkflow.hits.money import shown

    app.add_template_global(shown)  # an amount in its currency, as every page shows money: $0.20, £0.20
    from turkflow.web.worker import bp as worker_bp

    app.register_blueprint(worker_bp)
    from turkflow.web.protocols.annotate import bp as annotate_bp, dashboard as annotation_dashboard
    from turkflow.web.protocols.compare import bp as compare_bp, dashboard as comparison_dashboard
    from turkflow.web.protocols.frames import bp as frames_bp
    from turkflow.web.protocols.meep import bp as meep_bp
    from turkflow.web.protocols.star import bp as star_bp

    app.register_blueprint(star_bp)
    app.register_blueprint(frames_bp)
    app.register_blueprint(meep_bp)
    app.register_blueprint(annotate_bp)
    app.register_blueprint(compare_bp)
    from turkflow.web.mturk import bp as mturk_bp
    from turkflow.web.onboarding import bp as onboarding_bp

    from turkflow.web.prolific import bp as prolific_bp

    app.register_blueprint(mturk_bp)
    app.register_blueprint(prolific_bp)
    # Every POST carries its page's token, except MTurk's and Prolific's (a signed form token; a webhook's
    # signature).
    csrf = CSRFProtect(app)
    csrf.exempt(mturk_bp)
    csrf.exempt(prolific_bp)
    app.after_request(default_headers)
    app.register_blueprint(onboarding_bp)
    from turkflow.web.admin import init_admin

    init_admin(app)
    app.register_blueprint(annotation_dashboard)
    app.register_blueprint(comparison_dashboard)
    app.register_error_handler(TurkflowError, error_response)
    app.register_error_handler(HTTPException, error_response)
    app.before_request(refuse_nul_bytes)
    return app
