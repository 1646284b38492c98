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
    )
    from turkflow.web.worker import bp as worker_bp

    app.register_blueprint(worker_bp)
    return app
