"""What every answer tells the browser about itself (issue 35): only the MTurk turn page, which MTurk shows in
an iframe on its worker sites, may be framed, and only by those sites; every page says where its forms may
post (``form-action``); a deployment whose public URL is https tells browsers to keep to https (HSTS), one
on plain http does not (a browser ignores it there, and it would outlive a move to https badly)."""

from __future__ import annotations

import pytest

from tests.test_mturk import mturk_client, mturk_providers, mturk_settings, stubber  # noqa: F401 - fixtures
from tests.test_mturk_web import mturk_web, page_url, published  # noqa: F401 - fixtures
from tests.test_pipeline import launch
from tests.test_worker_pages import joined, take_first
from turkflow.web import create_app


def directives(response) -> dict[str, str]:  # noqa: ANN001
    policy = response.headers["Content-Security-Policy"]
    return {d.split(" ", 1)[0]: d.partition(" ")[2] for d in (p.strip() for p in policy.split(";")) if d}


def worker_answers(app, settings, providers) -> dict[str, object]:  # noqa: ANN001
    """A page of each kind a local worker and a visitor see, the dashboard's sign-in and a static file."""
    launch(settings, providers)
    student = joined(app, settings, "student")
    turn_url = take_first(student)
    visitor = app.test_client()
    return {"welcome": visitor.get("/"), "queue": student.get("/queue"), "turn page": student.get(turn_url),
            "turn JSON": student.get(turn_url, headers={"Accept": "application/json"}),
            "quiz": student.get("/onboarding"), "not found": student.get("/turn/nobody"),
            "sign-in": visitor.get("/admin/login"), "static": visitor.get("/static/worker.css")}


def test_no_page_but_the_mturk_turn_page_may_be_framed(app, settings, providers):
    for name, response in worker_answers(app, settings, providers).items():
        assert directives(response)["frame-ancestors"] == "'none'", name


def test_every_page_lets_its_forms_post_to_this_site_only(app, settings, providers):
    for name, response in worker_answers(app, settings, providers).items():
        assert directives(response)["form-action"] == "'self'", name


def test_the_mturk_turn_page_may_be_framed_by_mturk_and_post_to_its_submit_sites_only(mturk_settings, mturk_web,
                                                                                     published):
    preview = mturk_web.get(page_url(mturk_settings, published, assignmentId="ASSIGNMENT_ID_NOT_AVAILABLE"))
    assert preview.status_code == 200
    shown = directives(preview)
    assert shown["frame-ancestors"] == "https://workersandbox.mturk.com https://worker.mturk.com"
    assert shown["form-action"].split() == ["'self'", "https://workersandbox.mturk.com", "https://www.mturk.com",
                                            "https://worker.mturk.com"]


@pytest.mark.parametrize("public_url, hsts", [("https://turkflow.example.org", "max-age=31536000"),
                                              ("http://127.0.0.1:5000", None)])
def test_an_https_deployment_tells_browsers_to_keep_to_https(settings, public_url, hsts):
    app = create_app(settings.model_copy(update={"public_url": public_url}))
    client = app.test_client()
    for path in ("/", "/admin/login", "/static/worker.css", "/turn/nobody"):
        assert client.get(path).headers.get("Strict-Transport-Security") == hsts, path
