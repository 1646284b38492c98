"""The Flask app factory. One blueprint per audience: ``worker`` (turn pages, the local queue) and
``admin`` (the requester's dashboard)."""

from __future__ import annotations

from flask import Flask

from turkflow.config import Settings
from turkflow.hits.provider import Providers


def create_app(settings: Settings | None = None, providers: Providers | None = None) -> Flask:
    settings = settings or Settings()
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=settings.secret_key,
        TURKFLOW_SETTINGS=settings,
        TURKFLOW_PROVIDERS=providers or Providers(settings),
        PUBLIC_URL=settings.public_url,
        MAX_CONTENT_LENGTH=256 * 1024,
        SESSION_COOKIE_SAMESITE="Lax",  # other sites cannot post forms as a signed-in worker
    )
    from turkflow.hits.lifecycle import TurnError
    from turkflow.web.worker import bp as worker_bp, turn_error_response

    app.register_blueprint(worker_bp)
    from turkflow.web.mturk import bp as mturk_bp
    from turkflow.web.onboarding import bp as onboarding_bp

    app.register_blueprint(mturk_bp)
    app.register_blueprint(onboarding_bp)
    from turkflow.web.admin import init_admin

    init_admin(app)
    app.register_error_handler(TurnError, turn_error_response)
    return app
