"""Signing in to the dashboard, attacked: the sign-in reads a form, or a JSON object of exactly two strings,
and refuses anything else with a 400 naming the field; simultaneous guesses through a real gunicorn (several
processes and threads) get no more password checks than the throttle allows; a CSRF token from before the
sign-in stops working after it. Block and unblock read their note the same strict way."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import types
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

import itsdangerous.timed
import pytest
import requests

from tests.test_dashboard import csrf_token, sign_in
from tests.test_worker_pages import invite
from turkflow import requesters
from turkflow.db import session_scope
from turkflow.models import Worker, WorkerStatus
from turkflow.signing import CLOCK_SKEW_SECONDS
from turkflow.simulator.stack import free_port, gunicorn_command, settings_env, wait_for

RIGHT = "correct horse"


@pytest.fixture
def ada(settings):
    with session_scope(settings.database_url) as s:
        requesters.create_requester(s, "ada", RIGHT)


def signed_in(client) -> bool:
    return client.get("/admin/review").status_code == 200


def post_json(client, body, path="/admin/login", token=None):
    """What a program sends: a JSON body, the page's CSRF token as a header, JSON asked for."""
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post(path, data=data, content_type="application/json",
                       headers={"X-CSRFToken": token or csrf_token(client), "Accept": "application/json"})


# ---- what the sign-in reads -----------------------------------------------------------------------------


def test_a_json_object_of_two_strings_signs_in(client, ada):
    assert post_json(client, {"username": "ada", "password": RIGHT}).status_code == 302
    assert signed_in(client)


NOT_ONE_STRING = [5, 2.5, True, None, {"name": "ada"}, ["ada", "bob"], ["ada"], [], "\ud800", "ada\udfff",
                  "ada\x00"]


@pytest.mark.parametrize("field", ["username", "password"])
@pytest.mark.parametrize("value", NOT_ONE_STRING, ids=repr)
def test_a_json_sign_in_value_that_is_not_one_clean_string_is_a_400_naming_the_field(client, ada, field, value):
    response = post_json(client, {"username": "ada", "password": RIGHT, field: value})
    assert response.status_code == 400
    assert response.get_json()["field"] == field
    assert not signed_in(client)


NESTED = '{"username": "ada", "password": ' + "[" * 100_000 + "]" * 100_000 + "}"


@pytest.mark.parametrize("body", [json.dumps(["ada", RIGHT]), json.dumps([{"username": "ada", "password": RIGHT}]),
                                  '"ada"', "5", "null", NESTED, "[" * 100_000 + "]" * 100_000],
                         ids=["list", "list of objects", "string", "number", "null", "nested value", "nested list"])
def test_a_json_sign_in_that_is_not_one_object_of_strings_is_a_400_naming_the_body(client, ada, body):
    response = post_json(client, body)
    assert response.status_code == 400
    assert response.get_json()["field"] == "body"
    assert not signed_in(client)


def test_a_json_sign_in_with_a_field_too_many_or_too_few_names_it(client, ada):
    extra = post_json(client, {"username": "ada", "password": RIGHT, "remember": "yes"})
    assert extra.status_code == 400 and extra.get_json()["field"] == "remember"
    missing = post_json(client, {"username": "ada"})
    assert missing.status_code == 400 and missing.get_json()["field"] == "password"
    assert not signed_in(client)


def test_a_username_sent_twice_in_a_form_is_a_400_and_signs_nobody_in(client, ada):
    response = client.post("/admin/login", data={"csrf_token": csrf_token(client), "username": ["ada", "bob"],
                                                 "password": RIGHT})
    assert response.status_code == 400
    assert "username:" in response.get_data(as_text=True)
    assert not signed_in(client)


def test_wrong_passwords_answer_json_to_json_clients(client, ada):
    response = post_json(client, {"username": "ada", "password": "not the password"})
    assert response.status_code == 401 and response.get_json() == {"error": "Wrong username or password."}


# ---- block and unblock read their note the same way ----------------------------------------------------


@pytest.fixture
def worker(settings, ada) -> int:
    with session_scope(settings.database_url) as s:
        found = Worker(external_id="T-1", role="teacher", name="Terry", onboarded=True)
        s.add(found)
        s.flush()
        return found.id


def worker_status(settings, worker_id: int) -> WorkerStatus:
    with session_scope(settings.database_url) as s:
        return s.get(Worker, worker_id).status


@pytest.mark.parametrize("body", [{"note": 5}, {"note": {"text": "x"}}, {"note": ["fine", "bad"]},
                                  {"note": "\ud800"}, {"note": None}, {"note": "ok", "worker": 3}, ["note"],
                                  '{"note": ' + "[" * 100_000 + "]" * 100_000 + "}"],
                         ids=lambda body: repr(body)[:40])
def test_a_json_block_with_a_note_that_is_not_one_string_is_a_400_and_changes_nothing(client, settings, worker,
                                                                                      body):
    sign_in(client)
    response = post_json(client, body, f"/admin/workers/{worker}/block", csrf_token(client, "/admin/review"))
    assert response.status_code == 400
    assert response.get_json()["field"] in ("note", "worker", "body")
    assert worker_status(settings, worker) == WorkerStatus.active


def test_a_json_block_with_a_string_note_blocks(client, settings, worker):
    sign_in(client)
    response = post_json(client, {"note": "copies the document"}, f"/admin/workers/{worker}/block",
                         csrf_token(client, "/admin/review"))
    assert response.status_code == 302
    assert worker_status(settings, worker) == WorkerStatus.blocked


# ---- the CSRF token is renewed at sign-in ---------------------------------------------------------------


def test_a_csrf_token_from_before_the_sign_in_is_refused_after_it(client, ada):
    planted = csrf_token(client)  # what a page seen before signing in (or an attacker who set it up) holds
    assert sign_in(client).status_code == 302
    refused = client.post("/admin/logout", data={"csrf_token": planted})
    assert refused.status_code == 400 and "CSRF" in refused.get_data(as_text=True)
    assert signed_in(client)
    fresh = csrf_token(client, "/admin/review")
    assert fresh != planted
    assert client.post("/admin/logout", data={"csrf_token": fresh}).status_code == 302
    assert not signed_in(client)


# ---- the throttle under real concurrency ---------------------------------------------------------------


@pytest.fixture
def gunicorn(settings, ada, tmp_path: Path) -> Iterator[str]:
    """The app as deployed: gunicorn with three processes of four threads each, on a free port, with no
    control socket shared with any other gunicorn on the machine."""
    url = f"http://127.0.0.1:{free_port()}"
    served = settings.model_copy(update={"public_url": url})
    with open(tmp_path / "gunicorn.log", "wb") as log:
        command = gunicorn_command("turkflow.web:create_app()", url.removeprefix("http://"), workers=3, threads=4,
                                   options=["--timeout", "120"])
        process = subprocess.Popen(command, env=settings_env(served), stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            wait_for(lambda: requests.get(f"{url}/admin/login", timeout=5).status_code == 200, "gunicorn", 120,
                     process)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def guesses_at_once(url: str, passwords: list[str]) -> Counter:
    """Send every password for ada at the same moment, each on its own connection; count the answers."""
    browser = requests.Session()
    page = browser.get(f"{url}/admin/login", timeout=60).text
    token = re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', page).group(1)
    cookies = browser.cookies.get_dict()
    start = threading.Barrier(len(passwords))
    answers: list[int] = []

    def guess(password: str) -> None:
        start.wait()
        response = requests.post(f"{url}/admin/login", data={"csrf_token": token, "username": "ada",
                                                             "password": password},
                                 cookies=cookies, allow_redirects=False, timeout=300)
        answers.append(response.status_code)

    threads = [threading.Thread(target=guess, args=(p,)) for p in passwords]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Counter(answers)


def test_sixty_simultaneous_guesses_get_only_the_limit_checked_and_then_the_right_password_is_refused(
        gunicorn, settings):
    limit = settings.sign_in_failures
    wrong = guesses_at_once(gunicorn, [f"guess {n}" for n in range(60)])
    assert wrong == Counter({401: limit, 429: 60 - limit})  # 401: the password was checked and was wrong

    with_right = guesses_at_once(gunicorn, [RIGHT] + [f"guess {n}" for n in range(60, 119)])
    assert with_right == Counter({429: 60})  # the right password among them signs nobody in


# ---- several web machines: a clock a little ahead signs nobody out ------------------------------------------


@contextmanager
def clock_ahead(seconds: float) -> Iterator[None]:
    """This process's clock as another web machine's, ``seconds`` ahead, for what it signs meanwhile."""
    real = time.time
    fake = types.SimpleNamespace(time=lambda: real() + seconds)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(itsdangerous.timed, "time", fake)
        yield


@pytest.mark.parametrize("ahead", [2, CLOCK_SKEW_SECONDS - 1])
def test_a_sign_in_made_on_a_machine_whose_clock_is_ahead_works_on_the_others(app, client, settings, ada, ahead):
    _, join_url = invite(settings, "student")
    worker = app.test_client()
    with clock_ahead(ahead):  # the machine the browsers reached first
        assert sign_in(client).status_code == 302
        assert worker.get(urlsplit(join_url).path).status_code == 303
    assert signed_in(client)  # the next request reaches another machine, on time
    assert worker.get("/queue").status_code == 200


def test_a_token_signed_further_ahead_than_the_stated_skew_signs_nobody_in(app, client, settings, ada):
    _, join_url = invite(settings, "student")
    worker = app.test_client()
    with clock_ahead(CLOCK_SKEW_SECONDS + 30):
        assert sign_in(client).status_code == 302
        assert worker.get(urlsplit(join_url).path).status_code == 303
    assert not signed_in(client)
    assert worker.get("/queue").status_code == 403
