"""Sessions and sign-in: throttled password guessing, server-side dashboard sessions, a worker identity of
its own that no other site can switch, CSRF tokens on every local worker form, and the cookie and header
flags that go with them."""

from __future__ import annotations

import hashlib
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from itsdangerous import URLSafeTimedSerializer
from sqlmodel import select, update

from tests.test_dashboard import csrf_token, sign_in
from tests.test_pipeline import launch
from tests.test_worker_pages import FIRST_STUDENT_ANSWERS, JSON, count, invite, joined
from turkflow import invites, requesters
from turkflow.db import session_scope
from turkflow.models import Assignment, Event, LoginSession, Requester, SignInFailure, utcnow
from turkflow.simulator.stack import free_port
from turkflow.web import create_app

OTHER_PORT = {"Origin": "http://127.0.0.1:8080", "Referer": "http://127.0.0.1:8080/"}


@pytest.fixture
def ada(settings):
    with session_scope(settings.database_url) as s:
        requesters.create_requester(s, "ada", "correct horse")


def signed_in_to_dashboard(client) -> bool:
    return client.get("/admin/review").status_code == 200


def me(client):
    return client.get("/queue", headers=JSON).get_json()["worker"]["external_id"]


# ---- guessing passwords ---------------------------------------------------------------------------------


def test_repeated_wrong_passwords_lock_the_username_even_for_the_right_password(client, ada, settings):
    for _ in range(settings.sign_in_failures):
        assert sign_in(client, password="not the password").status_code == 401
    refused = sign_in(client)
    assert refused.status_code == 429
    assert "Too many failed sign-ins" in refused.get_data(as_text=True)
    assert 0 < int(refused.headers["Retry-After"]) <= settings.sign_in_window_seconds
    assert not signed_in_to_dashboard(client)


def test_a_client_guessing_many_usernames_is_throttled_and_other_clients_are_not(client, ada, settings):
    settings.sign_in_failures = 1  # so a client may fail 4 times across usernames
    for name in ["bob", "carl", "dora", "ed"]:
        assert sign_in(client, username=name, password="guess").status_code == 401
    assert sign_in(client).status_code == 429

    elsewhere = client.application.test_client()
    token = csrf_token(elsewhere)
    signed = elsewhere.post("/admin/login", data={"csrf_token": token, "username": "ada", "password": "correct horse"},
                            environ_base={"REMOTE_ADDR": "10.0.0.7"})
    assert signed.status_code == 302 and signed_in_to_dashboard(elsewhere)


def test_failed_sign_ins_stop_counting_after_the_window(client, ada, settings):
    for _ in range(settings.sign_in_failures):
        sign_in(client, password="not the password")
    assert sign_in(client).status_code == 429
    with session_scope(settings.database_url) as s:
        s.execute(update(SignInFailure).values(at=utcnow() - timedelta(seconds=settings.sign_in_window_seconds + 1)))
    assert sign_in(client).status_code == 302 and signed_in_to_dashboard(client)


def test_every_failed_sign_in_is_in_the_event_log(client, ada, settings):
    sign_in(client, password="not the password")
    sign_in(client, username="nobody", password="guess")
    with session_scope(settings.database_url) as s:
        logged = s.exec(select(Event).where(Event.kind == "sign_in_failed").order_by(Event.id)).all()
    assert [(e.data["username"], e.data["client"], e.actor) for e in logged] == [
        ("ada", "127.0.0.1", "anonymous"), ("nobody", "127.0.0.1", "anonymous")]
    assert all("guess" not in str(e.data) and "not the password" not in str(e.data) for e in logged)


def test_an_unknown_username_costs_a_password_check_like_a_known_one(client, ada, settings, monkeypatch):
    """The answer time must not tell which usernames exist: an unknown one is checked against a hash made
    the same way as real ones."""
    checked = []

    def spy(pwhash, password):
        checked.append(pwhash.split("$")[0])
        return real(pwhash, password)

    real = requesters.check_password_hash
    monkeypatch.setattr(requesters, "check_password_hash", spy)
    assert sign_in(client, username="nobody", password="guess").status_code == 401
    assert sign_in(client, username="ada", password="guess").status_code == 401
    with session_scope(settings.database_url) as s:
        method = s.exec(select(Requester)).one().password_hash.split("$")[0]
    assert checked == [method, method]


# ---- dashboard sessions ---------------------------------------------------------------------------------


def test_a_saved_session_cookie_stops_working_after_logout(client, ada, settings):
    assert sign_in(client).status_code == 302
    saved = client.get_cookie("session").value
    assert client.post("/admin/logout", data={"csrf_token": csrf_token(client, "/admin/review")}).status_code == 302
    assert not signed_in_to_dashboard(client)
    client.set_cookie("session", saved)  # the cookie from before the logout, replayed
    assert client.get("/admin/review").headers["Location"].startswith("/admin/login")
    with session_scope(settings.database_url) as s:
        [row] = s.exec(select(LoginSession)).all()
        assert row.revoked_at is not None
        assert s.exec(select(Event).where(Event.kind == "requester_signed_out")).one().actor == "requester:ada"


def test_the_database_holds_only_a_hash_of_the_session_token(client, ada, settings):
    sign_in(client)
    app = client.application
    cookie = app.session_interface.get_signing_serializer(app).loads(client.get_cookie("session").value)
    token = cookie["_user_id"]
    with session_scope(settings.database_url) as s:
        [row] = s.exec(select(LoginSession)).all()
    assert row.id == hashlib.sha256(token.encode()).hexdigest() and token != row.id
    assert timedelta(seconds=settings.admin_session_seconds - 60) < row.expires_at - utcnow() <= timedelta(
        seconds=settings.admin_session_seconds)


def test_an_expired_dashboard_session_signs_nobody_in_and_is_dropped_at_the_next_sign_in(client, ada, settings):
    sign_in(client)
    assert signed_in_to_dashboard(client)
    with session_scope(settings.database_url) as s:
        s.execute(update(LoginSession).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert not signed_in_to_dashboard(client)
    sign_in(client)
    with session_scope(settings.database_url) as s:
        [current] = s.exec(select(LoginSession)).all()
    assert current.expires_at > utcnow() and signed_in_to_dashboard(client)


# ---- the worker's identity ------------------------------------------------------------------------------


def test_opening_a_join_link_does_not_sign_the_admin_out(client, ada, settings):
    sign_in(client)
    _, url = invite(settings, "student")
    assert client.get(urlsplit(url).path).status_code == 303
    assert signed_in_to_dashboard(client)
    assert client.get("/queue", headers=JSON).status_code == 200


def test_another_workers_link_switches_the_identity_only_after_a_confirming_post(app, settings):
    browser = joined(app, settings, "student", name="Ann")
    other, url = invite(settings, "student", name="Mallory")
    path = urlsplit(url).path

    asked = browser.get(path)  # what a foreign page sending the browser to the link achieves
    page = asked.get_data(as_text=True)
    assert asked.status_code == 200 and "Switch to Mallory" in page and "signed in as <strong>Ann" in page
    assert me(browser) == browser.worker.external_id
    assert browser.get(path, headers=JSON).status_code == 409

    forged = browser.post(path, headers=OTHER_PORT, environ_base={"HTTP_X_CSRFTOKEN": ""})
    assert forged.status_code == 400 and me(browser) == browser.worker.external_id

    token = csrf_token(browser, path)
    confirmed = browser.post(path, data={"csrf_token": token})
    assert (confirmed.status_code, confirmed.headers["Location"]) == (303, "/queue")
    assert me(browser) == other.external_id


def test_worker_posts_without_the_pages_csrf_token_are_refused(app, settings, providers):
    launch(settings, providers)
    victim = joined(app, settings, "student")
    hit_id = victim.get("/queue", headers=JSON).get_json()["open"][0]["hit_id"]
    victim.environ_base.pop("HTTP_X_CSRFTOKEN")  # a form on another port of this host has no token
    for path in [f"/queue/take/{hit_id}", "/onboarding"]:
        refused = victim.post(path, headers=OTHER_PORT)
        assert refused.status_code == 400 and "CSRF token" in refused.get_data(as_text=True), path
    assert count(settings, Assignment) == 0

    page = victim.get("/queue").get_data(as_text=True)
    assert f'action="/queue/take/{hit_id}"' in page and 'name="csrf_token"' in page
    token = csrf_token(victim, "/queue")
    taken = victim.post(f"/queue/take/{hit_id}", data={"csrf_token": token})
    assert taken.status_code == 303
    turn_url = taken.headers["Location"]
    assert 'name="csrf_token"' in victim.get(turn_url).get_data(as_text=True)
    assert victim.post(turn_url, data=FIRST_STUDENT_ANSWERS, headers=OTHER_PORT).status_code == 400
    assert count(settings, Event, Event.kind == "turn_submitted") == 0


def test_json_clients_send_the_queues_token_as_a_header(app, settings, providers, celery_worker):
    """How the crowd simulator works the pages: the token comes with the queue, every POST sends it back."""
    launch(settings, providers)
    program = joined(app, settings, "student")
    queue = program.get("/queue", headers=JSON).get_json()
    # the same session token, signed anew with the time of each answer (a second apart, they differ)
    signed = URLSafeTimedSerializer(settings.secret_key, salt="wtf-csrf-token")
    assert signed.loads(program.environ_base["HTTP_X_CSRFTOKEN"]) == signed.loads(queue["csrf_token"])
    taken = program.post(f"/queue/take/{queue['open'][0]['hit_id']}", headers=JSON)
    assert taken.status_code == 200
    stored = program.post(taken.get_json()["turn_url"], data=FIRST_STUDENT_ANSWERS, headers=JSON)
    assert stored.status_code == 200 and stored.get_json()["created"] is True


def test_a_worker_cookie_lasts_the_configured_time(app, settings, monkeypatch):
    settings.worker_session_seconds = 600
    worker, url = invite(settings, "student")
    browser = app.test_client()
    cookie = browser.get(urlsplit(url).path).headers["Set-Cookie"]
    assert cookie.startswith("worker=") and "Max-Age=600" in cookie
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie

    with monkeypatch.context() as m:  # the same cookie, issued longer ago than it lasts
        m.setattr(time, "time", lambda: 1_000_000_000.0)
        stale = invites.session_token(settings.secret_key, worker)
    browser.set_cookie("worker", stale)
    assert browser.get("/queue", headers=JSON).status_code == 403


def test_cookies_are_secure_and_host_only_when_the_public_url_is_https(settings, ada):
    app = create_app(settings.model_copy(update={"public_url": "https://turkflow.example.org"}))
    browser = app.test_client()
    _, url = invite(settings, "student")
    https = {"base_url": "https://turkflow.example.org"}
    worker_cookie = browser.get(urlsplit(url).path, **https).headers["Set-Cookie"]
    assert worker_cookie.startswith("__Host-worker=") and "Secure" in worker_cookie and "Path=/" in worker_cookie

    login = "https://turkflow.example.org/admin/login"
    page = browser.get("/admin/login", **https)
    assert "__Host-session=" in page.headers["Set-Cookie"] and "Secure" in page.headers["Set-Cookie"]
    token = csrf_token(browser, "https://turkflow.example.org/admin/login")
    signed = browser.post("/admin/login", data={"csrf_token": token, "username": "ada", "password": "correct horse"},
                          headers={"Referer": login}, **https)
    assert signed.status_code == 302
    assert browser.get("/admin/review", **https).status_code == 200


def test_static_files_and_error_pages_say_nosniff_and_carry_a_policy(client):
    for response in (client.get("/static/worker.css"), client.get("/no-such-page"), client.get("/admin/login"),
                     client.post("/queue/take/1")):
        assert response.headers["X-Content-Type-Options"] == "nosniff", response.request.path
        assert "object-src 'none'" in response.headers["Content-Security-Policy"], response.request.path
    assert "frame-ancestors 'none'" in client.get("/static/worker.css").headers["Content-Security-Policy"]


# ---- a page on another port of the same host, in a real browser --------------------------------------


class ForeignSite:
    """A page on another port of this host: same-site for the browser, so SameSite=Lax cookies go along."""

    def __init__(self, html: str):
        page = html.encode()

        class Page(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Page)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.browser
def test_a_page_on_another_port_can_neither_take_a_turn_nor_switch_the_worker(live_server, browser_context,
                                                                                settings, providers):
    launch(settings, providers)
    worker, url = invite(settings, "student", name="Ann", base_url=live_server.url)
    _, mallory = invite(settings, "student", name="Mallory", base_url=live_server.url)
    page = browser_context.new_page()
    page.goto(url)
    hit_id = page.locator("#open-turns li").first.get_attribute("data-hit-id")

    take = ForeignSite(f'<form id="f" method="post" action="{live_server.url}/queue/take/{hit_id}"></form>'
                       '<script>document.getElementById("f").submit()</script>')
    try:
        with page.expect_navigation(url=f"**/queue/take/{hit_id}"):
            page.goto(take.url)
        assert "CSRF token" in page.content()
    finally:
        take.close()
    assert count(settings, Assignment) == 0

    switch = ForeignSite(f'<script>location.href = "{mallory}"</script>')
    try:
        with page.expect_navigation(url=mallory):
            page.goto(switch.url)
        assert "Switch to Mallory" in page.content()
    finally:
        switch.close()
    page.goto(f"{live_server.url}/queue")
    assert "Ann" in page.locator(".who").inner_text()
