"""The error paths a worker can meet, on both databases: text that is not text (a lone surrogate in JSON,
bytes that are not UTF-8 in a form or a query string), storage that takes no writes (a read-only database, a
full disk), a body too large, a turn sent twice with different text. Each answers a 4xx naming the field or
a 503 saying when to try again, never a 500; nothing of a refused request is stored, and nothing the worker
typed is lost.
"""

from __future__ import annotations

import itertools
import json
import socket
import sqlite3
import threading
from contextlib import contextmanager
from typing import Iterable, Iterator
from urllib.parse import urlencode, urlsplit

import psycopg
import pytest
from markupsafe import escape
from sqlalchemy import create_engine, event, make_url, text
from sqlmodel import func, select

from tests.test_frames_dialog import domain_copy, launch_frames
from tests.test_meep_dialog import ASK, launch_meep
from tests.test_pipeline import launch
from tests.test_star_dialog import launch_star
from tests.test_star_pages import send, star_worker, take
from tests.test_worker_pages import JSON, TEACHER_REPLY, answered_first_turn, joined, open_turns, take_first
from turkflow.db import dispose_engine, get_engine, session_scope
from turkflow.models import Assignment, AssignmentStatus, DialogEvent, Event, Hit, Turn, TurnStatus

# ---- turns held on every kind of turn page -----------------------------------------------------------------


def held_turn(protocol, app, settings, providers, tmp_path):
    """A worker (a browser-like client) holding the second turn of a dialog of ``protocol``, and the page
    it posts to: the plain turn page's teacher, or STAR's, Frames' or MEEP's wizard."""
    if protocol == "plain":
        answered_first_turn(settings, providers)
        teacher = joined(app, settings, "teacher")
        return teacher, take_first(teacher)
    if protocol == "star":
        launch_star(settings, providers)
        opening = "Hi, I'd like to borrow a novel."
    elif protocol == "frames":
        launch_frames(settings, providers, domain=domain_copy(tmp_path), success=1.0)
        opening = "Hi, a trip from Boston, please."
    else:
        launch_meep(settings, providers)
        opening = ASK
    user, wizard = star_worker(app, settings, "user"), star_worker(app, settings, "wizard")
    send(user, take(user), settings, providers, **({"text": opening} if protocol == "meep" else
                                                   {"action": "utter", "text": opening}))
    return wizard, take(wizard)


def stored(settings) -> tuple[int, ...]:
    """What a refused request must leave as it was."""
    with session_scope(settings.database_url) as s:
        return tuple(s.exec(select(func.count()).select_from(model).where(*where)).one() for model, where in [
            (Turn, [Turn.status == TurnStatus.submitted]), (DialogEvent, []), (Event, []), (Assignment, [])])


# ---- 4. a lone surrogate in a JSON body ---------------------------------------------------------------------

SURROGATE = "\ud800"

# A body each page reads, with the lone surrogate in one field, and the field the refusal must name.
SURROGATE_BODIES = [
    ("plain", "", dict(TEACHER_REPLY, response=f"You need flour {SURROGATE}"), "response"),
    ("star", "", {"action": "utter", "text": f"Hello {SURROGATE}"}, "text"),
    ("star", "/action", {"action": "query", "api": "library_search",
                         "form": {"Genre": SURROGATE, "Language": "English"}}, "form.Genre"),
    ("frames", "", {"action": "utter", "text": SURROGATE}, "text"),
    ("frames", "/action", {"action": "search", "constraints": {"origin": f"Bo{SURROGATE}ston"}},
     "constraints.origin"),
    ("meep", "", {"action": "send", "text": SURROGATE}, "text"),
    ("meep", "/action", {"action": "pick_template", "template": "t6", "fillers": ["x", SURROGATE]}, "fillers[1]"),
    ("meep", "/action", {"action": "call_api", SURROGATE: "find_place"}, "\\ud800"),
]


@pytest.mark.parametrize(("protocol", "route", "body", "field"), SURROGATE_BODIES,
                         ids=[f"{p}{r or '/submit'}:{f}" for p, r, _, f in SURROGATE_BODIES])
def test_a_lone_surrogate_in_a_json_body_is_a_400_naming_the_field_on_every_turn_page(
        app, settings, providers, tmp_path, protocol, route, body, field):
    worker, page = held_turn(protocol, app, settings, providers, tmp_path)
    before = stored(settings)
    sent = json.dumps(body)  # ASCII, the surrogate as the escape \ud800, as JavaScript's JSON.stringify sends it
    assert "\\ud800" in sent

    # as curl, fetch and browsers send it: JSON, without asking for JSON back
    refused = worker.post(page + route, data=sent, content_type="application/json")
    assert refused.status_code == 400, refused.get_data(as_text=True)[:300]
    assert f"{escape(field)}: this text is not valid Unicode" in refused.get_data(as_text=True)

    asked = worker.post(page + route, data=sent, content_type="application/json", headers=JSON)
    assert asked.status_code == 400
    assert asked.get_json()["field"] == field
    assert stored(settings) == before


def test_the_error_page_shows_any_message_even_one_holding_a_lone_surrogate(app):
    from turkflow.errors import InvalidInput

    @app.get("/test-raises-surrogate")
    def raises() -> None:
        raise InvalidInput(f"cannot use {SURROGATE}", f"field{SURROGATE}")

    page = app.test_client().get("/test-raises-surrogate")
    assert page.status_code == 400
    assert "cannot use \\ud800" in page.get_data(as_text=True)


# ---- 6. bytes that are not UTF-8 in a form or a query string ---------------------------------------------------

NOT_UTF8 = [("%FF%FE", "invalid UTF-8"), ("%ED%A0%80", "a lone surrogate encoded as UTF-8")]


@pytest.mark.parametrize(("escaped", "what"), NOT_UTF8, ids=[w for _, w in NOT_UTF8])
def test_a_form_field_that_is_not_utf8_is_a_400_naming_it_and_stores_nothing(app, settings, providers, tmp_path,
                                                                              escaped, what):
    teacher, page = held_turn("plain", app, settings, providers, tmp_path)
    before = stored(settings)
    form = "relevant=yes&useful=yes&action=return_items&shared=item-1&response=Flour+" + escaped
    refused = teacher.post(page, data=form, content_type="application/x-www-form-urlencoded")
    assert refused.status_code == 400, refused.get_data(as_text=True)[:300]
    assert "Response: this is not UTF-8 text" in refused.get_data(as_text=True)
    named = teacher.post(page, data="relevant=yes&" + escaped + "=1", headers=JSON,
                         content_type="application/x-www-form-urlencoded")
    assert named.status_code == 400 and named.get_json()["field"] == escaped
    assert stored(settings) == before

    wizard, star_page = held_turn("star", app, settings, providers, tmp_path)
    refused = wizard.get(f"{star_page}?draft=Hello+{escaped}")
    assert refused.status_code == 400
    assert "Draft: this is not UTF-8 text" in refused.get_data(as_text=True)
    assert wizard.get(f"{star_page}?draft=Hello", headers=JSON).status_code == 200


# ---- 5. storage that takes no writes ------------------------------------------------------------------------


@contextmanager
def read_only(settings) -> Iterator[None]:
    """The database read-only for real, as after a remount or a role made read-only: SQLite's file opened
    read-only (its connections refuse every write), PostgreSQL's database set to read-only transactions.
    The app's connections are all new ones while it lasts, and again after."""
    url = settings.database_url
    if url.startswith("sqlite"):
        settings.database_url = f"sqlite:///file:{make_url(url).database}?mode=ro&uri=true"
        try:
            yield
        finally:
            dispose_engine(settings.database_url)
            settings.database_url = url
        return
    name = make_url(url).database
    admin = create_engine(make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"ALTER DATABASE {name} SET default_transaction_read_only = on"))
    dispose_engine(url)
    try:
        yield
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"ALTER DATABASE {name} RESET default_transaction_read_only"))
        admin.dispose()
        dispose_engine(url)


@contextmanager
def disk_full(settings) -> Iterator[None]:
    """SQLite's file cannot grow by a page (``max_page_count``), which is what a full disk does to it: the
    database is vacuumed first so no free page is left inside it either."""
    url = settings.database_url
    dispose_engine(url)
    with get_engine(url).connect() as conn:
        conn.exec_driver_sql("VACUUM")
    dispose_engine(url)

    def cannot_grow(dbapi_connection, _record) -> None:  # noqa: ANN001
        cursor = dbapi_connection.cursor()
        pages = cursor.execute("PRAGMA page_count").fetchone()[0]
        cursor.execute(f"PRAGMA max_page_count = {pages}")
        cursor.close()

    engine = get_engine(url)
    event.listen(engine, "connect", cannot_grow)
    try:
        yield
    finally:
        event.remove(engine, "connect", cannot_grow)
        dispose_engine(url)


def refuses_for_now(response) -> None:  # noqa: ANN001
    assert response.status_code == 503, response.get_data(as_text=True)[:300]
    assert int(response.headers["Retry-After"]) > 0


LONG_REPLY = "You need flour and eggs. " * 70  # too long for any page's free space: the row must grow the file


@pytest.mark.parametrize("protocol", ["plain", "star", "frames"])
def test_a_read_only_database_answers_503_to_a_submit_keeps_the_typed_text_and_takes_it_afterwards(
        app, settings, providers, tmp_path, protocol):
    worker, page = held_turn(protocol, app, settings, providers, tmp_path)
    reply = "Here is what you asked for: <b>flour</b> & eggs."
    form = dict(TEACHER_REPLY, response=reply) if protocol == "plain" else {"action": "utter", "text": reply}
    before = stored(settings)
    with read_only(settings):
        shown = worker.post(page, data=form)
        refuses_for_now(shown)
        html = shown.get_data(as_text=True)
        assert str(escape(reply)) in html  # the page again, with what the worker wrote
        assert "try again" in html.lower() and "<form" in html
        refuses_for_now(worker.post(page, json=form, headers=JSON))
    assert stored(settings) == before

    sent = worker.post(page, data=form)  # the same form, sent again once the database takes writes
    assert sent.status_code == 303, sent.get_data(as_text=True)[:300]
    with session_scope(settings.database_url) as s:
        written = s.exec(select(Turn.text).where(Turn.status == TurnStatus.submitted).order_by(Turn.index)).all()
    assert written[-1] == reply and len(written) == before[0] + 1


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_full_disk_answers_503_to_a_submit_keeps_the_typed_text_and_takes_it_afterwards(
        app, settings, providers, tmp_path):
    teacher, page = held_turn("plain", app, settings, providers, tmp_path)
    form = dict(TEACHER_REPLY, response=LONG_REPLY.strip())
    before = stored(settings)
    with disk_full(settings):
        shown = teacher.post(page, data=form)
        refuses_for_now(shown)
        assert LONG_REPLY.strip() in shown.get_data(as_text=True)
    assert stored(settings) == before
    assert teacher.post(page, data=form).status_code == 303
    with session_scope(settings.database_url) as s:
        assert s.exec(select(func.count()).select_from(Turn).where(Turn.text == LONG_REPLY.strip())).one() == 1


@contextmanager
def locked_by_another_process(settings, monkeypatch) -> Iterator[None]:  # noqa: ANN001
    """Another program holds the database's write lock longer than turkflow waits for it (a backup, a person's
    ``sqlite3`` shell in a transaction, a migration): SQLite's file locked exclusively, PostgreSQL's tables
    the turn page writes locked against writes (reads go on). The wait is made 2 s here, not 30."""
    monkeypatch.setattr("turkflow.db.BUSY_TIMEOUT_SECONDS", 2)
    url = settings.database_url
    dispose_engine(url)  # the app's connections are made again, with the short wait
    if url.startswith("sqlite"):
        holder = sqlite3.connect(make_url(url).database, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
    else:
        holder = psycopg.connect(make_url(url).set(drivername="postgresql").render_as_string(hide_password=False))
        holder.execute("LOCK TABLE turn, assignment, hit, event IN EXCLUSIVE MODE")
    try:
        yield
    finally:
        holder.rollback()
        holder.close()
        dispose_engine(url)


@pytest.mark.both_backends  # the storage is the subject
def test_a_database_locked_by_another_process_answers_503_to_a_submit_keeps_the_typed_text_and_takes_it_afterwards(
        app, settings, providers, tmp_path, monkeypatch):
    teacher, page = held_turn("plain", app, settings, providers, tmp_path)
    reply = "Flour, eggs & a whisk: that is all."
    form = dict(TEACHER_REPLY, response=reply)
    before = stored(settings)
    with locked_by_another_process(settings, monkeypatch):
        shown = teacher.post(page, data=form)
        refuses_for_now(shown)
        assert str(escape(reply)) in shown.get_data(as_text=True)
        refused = teacher.post(page, json=form, headers=JSON)
        refuses_for_now(refused)
        assert "try again" in refused.get_json()["error"]
    assert stored(settings) == before
    assert teacher.post(page, data=form).status_code == 303
    with session_scope(settings.database_url) as s:
        assert s.exec(select(func.count()).select_from(Turn).where(Turn.text == reply)).one() == 1


def test_a_take_that_cannot_be_recorded_answers_503_and_leaves_the_turn_takeable(app, settings, providers):
    launch(settings, providers)
    first, second = joined(app, settings, "student"), joined(app, settings, "student")
    hit_id = open_turns(first)[0]["hit_id"]
    with read_only(settings):
        refused = first.post(f"/queue/take/{hit_id}")
        refuses_for_now(refused)
        assert "try again" in refused.get_data(as_text=True).lower()
        refuses_for_now(first.post(f"/queue/take/{hit_id}", headers=JSON))
    with session_scope(settings.database_url) as s:
        assert s.get(Hit, hit_id).lease_expires_at is None
        assert s.exec(select(func.count()).select_from(Assignment)).one() == 0
    assert [t["hit_id"] for t in open_turns(second)] == [hit_id]  # not leased to anybody
    taken = second.post(f"/queue/take/{hit_id}", headers=JSON)
    assert taken.status_code == 200, taken.get_data(as_text=True)


# ---- 6. a body too large without a Content-Length --------------------------------------------------------------


def post_chunked(url: str, path: str, chunks: Iterable[bytes], headers: dict[str, str]) -> int:
    """POST a form body in chunks (Transfer-Encoding: chunked, no Content-Length) and return the status the
    server answers, read while still sending (a server may answer before reading it all)."""
    parts = urlsplit(url)
    status: list[int] = []
    with socket.create_connection((parts.hostname, parts.port)) as conn:

        def read_status() -> None:
            received = b""
            while b"\r\n" not in received:
                try:
                    data = conn.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                received += data
            status.append(int(received.split(b" ", 2)[1]))

        reader = threading.Thread(target=read_status, daemon=True)
        reader.start()
        head = [f"POST {path} HTTP/1.1", f"Host: {parts.netloc}", "Transfer-Encoding: chunked",
                "Content-Type: application/x-www-form-urlencoded", "Connection: close",
                *(f"{k}: {v}" for k, v in headers.items())]
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        try:
            for chunk in chunks:
                if status:
                    break
                conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            conn.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server stopped reading: its answer is already on its way
        reader.join(timeout=60)
    assert status, "the server sent no status line"
    return status[0]


def test_a_50_mb_chunked_body_is_a_413_and_a_small_one_is_read(app, settings, providers, tmp_path, live_server):
    teacher, page = held_turn("plain", app, settings, providers, tmp_path)
    cookies = "; ".join(f"{c.key}={c.value}" for c in teacher._cookies.values())
    headers = {"Cookie": cookies, "X-CSRFToken": teacher.environ_base["HTTP_X_CSRFTOKEN"]}
    before = stored(settings)
    fifty_mb = itertools.chain([b"response="], itertools.repeat(b"a" * 65536, 50 * 16))
    assert post_chunked(live_server.url, page, fifty_mb, headers) == 413
    assert stored(settings) == before

    form = urlencode(dict(TEACHER_REPLY), doseq=True).encode()
    assert post_chunked(live_server.url, page, [form[:10], form[10:]], headers) == 303
    assert stored(settings)[0] == before[0] + 1


# ---- 6. a turn sent again with different text ---------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["plain", "frames"])
def test_a_turn_sent_again_with_other_text_is_a_409_naming_what_was_stored(app, settings, providers, tmp_path,
                                                                           protocol):
    worker, page = held_turn(protocol, app, settings, providers, tmp_path)
    first_text, other_text = "You need flour and eggs.", "Actually, you need butter."
    body = (lambda reply: dict(TEACHER_REPLY, response=reply)) if protocol == "plain" else (
        lambda reply: {"action": "utter", "text": reply})
    first = worker.post(page, json=body(first_text), headers=JSON)
    assert first.status_code == 200 and first.get_json()["created"]

    same = worker.post(page, json=body(first_text), headers=JSON)
    assert same.status_code == 200 and not same.get_json()["created"]
    assert same.get_json()["turn_id"] == first.get_json()["turn_id"]

    other = worker.post(page, json=body(other_text), headers=JSON)
    assert other.status_code == 409, other.get_data(as_text=True)[:300]
    assert first_text in other.get_json()["error"]
    page_409 = worker.post(page, data=body(other_text))
    assert page_409.status_code == 409 and first_text in page_409.get_data(as_text=True)
    with session_scope(settings.database_url) as s:
        assert s.get(Turn, first.get_json()["turn_id"]).text == first_text
        assert s.exec(select(func.count()).select_from(Assignment).where(
            Assignment.status == AssignmentStatus.submitted)).one() == 2
