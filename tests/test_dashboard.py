"""The review dashboard over HTTP: login, CSRF, one-click decisions with their audit trail, every page."""

from __future__ import annotations

import html
import re

import pytest
from sqlmodel import select

from tests.quality_factories import STUDENT_LINES, TEACHER_LINES, seed_dashboard
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.models import Event, ReviewEntry, ReviewStatus, Worker, WorkerStatus
from turkflow.quality import activity

@pytest.fixture
def seeded(settings, providers):
    return seed_dashboard(settings, providers)


def csrf_token(client, path="/admin/login") -> str:
    page = client.get(path).get_data(as_text=True)
    return re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', page).group(1)


def sign_in(client, username="ada", password="correct horse"):
    return client.post("/admin/login", data={"csrf_token": csrf_token(client), "username": username,
                                             "password": password})


def test_dashboard_redirects_anonymous_users_to_the_login_page(client, seeded):
    for path in ["/admin/", "/admin/review", f"/admin/workers/{seeded['teacher'].id}", "/admin/batches",
                 f"/admin/conversations/{seeded['conversation']}"]:
        response = client.get(path)
        assert response.status_code == 302, path
        assert response.headers["Location"].startswith("/admin/login?next=")


def test_anonymous_post_cannot_unblock_a_worker(client, seeded):
    token = csrf_token(client)
    response = client.post(f"/admin/workers/{seeded['teacher'].id}/unblock", data={"csrf_token": token})
    assert response.status_code == 302 and "/admin/login" in response.headers["Location"]
    with session_scope(client.application.config["TURKFLOW_SETTINGS"].database_url) as s:
        assert s.get(Worker, seeded["teacher"].id).status == WorkerStatus.temporarily_blocked


def test_wrong_password_is_refused(client, seeded):
    response = sign_in(client, password="not the password")
    assert response.status_code == 401
    assert "Wrong username or password" in response.get_data(as_text=True)
    assert client.get("/admin/review").status_code == 302


def test_post_without_csrf_token_is_refused_with_400(client, seeded, settings):
    assert sign_in(client).status_code == 302
    response = client.post(f"/admin/workers/{seeded['teacher'].id}/unblock", data={"note": "looks fine"})
    assert response.status_code == 400
    assert "CSRF" in response.get_data(as_text=True)
    forged = client.post(f"/admin/workers/{seeded['teacher'].id}/block", data={"csrf_token": "forged"})
    assert forged.status_code == 400
    with session_scope(settings.database_url) as s:
        assert s.get(Worker, seeded["teacher"].id).status == WorkerStatus.temporarily_blocked


def test_blocked_worker_unblocked_from_the_dashboard_can_work_again(client, seeded, settings):
    teacher = seeded["teacher"]
    sign_in(client)
    queue = client.get("/admin/review").get_data(as_text=True)
    assert "Terry" in queue and "Block permanently" in queue

    response = client.post(f"/admin/workers/{teacher.id}/unblock",
                           data={"csrf_token": csrf_token(client, "/admin/review"), "note": "honest mistakes",
                                 "next": "/admin/review"})
    assert response.status_code == 302 and response.headers["Location"] == "/admin/review"

    crowd = seeded["crowd"]
    conversation = crowd.conversations()[5]
    crowd.submit(seeded["students"][2], conversation, STUDENT_LINES[0])
    crowd.submit(teacher, conversation, TEACHER_LINES[0])  # takes and submits a turn again
    with session_scope(settings.database_url) as s:
        assert s.get(Worker, teacher.id).status == WorkerStatus.active
        entry = s.exec(select(ReviewEntry).where(ReviewEntry.worker_id == teacher.id)).one()
        assert (entry.status, entry.resolved_by, entry.note) == (ReviewStatus.unblocked, "requester:ada",
                                                                 "honest mistakes")
        audit = s.exec(select(Event).where(Event.worker_id == teacher.id, Event.kind == "worker_unblocked")).one()
        assert audit.actor == "requester:ada" and audit.data["note"] == "honest mistakes"
    assert "nobody is waiting" in client.get("/admin/review").get_data(as_text=True).lower()


def test_permanent_block_from_the_dashboard_is_recorded_and_keeps_the_worker_out(client, seeded, settings):
    teacher = seeded["teacher"]
    sign_in(client)
    token = csrf_token(client, "/admin/review")
    client.post(f"/admin/workers/{teacher.id}/block", data={"csrf_token": token, "note": "copies the document"})
    again = client.post(f"/admin/workers/{teacher.id}/block", data={"csrf_token": token})
    assert "already blocked permanently" in client.get(again.headers["Location"]).get_data(as_text=True)
    with session_scope(settings.database_url) as s:
        worker = s.get(Worker, teacher.id)
        assert worker.status == WorkerStatus.blocked
        blocks = s.exec(select(Event).where(Event.worker_id == teacher.id, Event.kind == "worker_blocked")
                        .order_by(Event.id)).all()
        assert [(e.actor, e.data["permanent"]) for e in blocks] == [("system", False), ("requester:ada", True)]
        hit = seeded["crowd"].hit_for(seeded["crowd"].conversations()[5])
        with pytest.raises(lifecycle.Forbidden):
            lifecycle.take_turn(s, worker, hit.id, lease_seconds=60)


def test_a_note_longer_than_500_characters_is_a_400_naming_the_field(client, seeded):
    sign_in(client)
    response = client.post(f"/admin/workers/{seeded['teacher'].id}/unblock",
                           data={"csrf_token": csrf_token(client, "/admin/review"), "note": "x" * 501})
    assert response.status_code == 400
    assert "note:" in response.get_data(as_text=True)


@pytest.mark.parametrize("path, field", [("/admin/review?day=yesterday", "day"),
                                         ("/admin/review?after=s12:wizard", "after"),
                                         ("/admin/workers?before=abc", "before"),
                                         ("/admin/workers?status=sleepy", "status")])
def test_bad_query_values_are_a_400_naming_the_field(client, seeded, path, field):
    sign_in(client)
    response = client.get(path)
    assert response.status_code == 400
    assert f"{field}:" in response.get_data(as_text=True)


def test_unknown_worker_is_a_404(client, seeded):
    sign_in(client)
    assert client.get("/admin/workers/99999").status_code == 404


def test_every_page_escapes_worker_text(client, seeded, settings):
    sign_in(client)
    teacher = seeded["teacher"]
    pages = ["/admin/review", f"/admin/workers/{teacher.id}", f"/admin/workers/{teacher.id}/turns",
             f"/admin/workers/{seeded['students'][1].id}/given", f"/admin/workers/{teacher.id}/received",
             f"/admin/conversations/{seeded['conversation']}",
             f"/admin/conversations/{seeded['crowd'].conversations()[6]}"]
    for path in pages:
        html = client.get(path).get_data(as_text=True)
        assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html, path
        assert "<script>window.__pwned" not in html and '<b id="pwned">' not in html, path


def test_batch_pages_show_progress_charts_and_conversations(client, seeded, settings):
    sign_in(client)
    batch_id = seeded["crowd"].batch_id
    html = client.get(f"/admin/batches/{batch_id}").get_data(as_text=True)
    assert "Progress and money counted just now" in html and "16 <span class=\"muted\">submitted" in html
    with session_scope(settings.database_url) as s:
        activity.snapshot_batches(s)
    html = client.get(f"/admin/batches/{batch_id}").get_data(as_text=True)
    assert "Progress and money as of" in html and "16 <span class=\"muted\">submitted" in html
    assert "Turns per hour" in html and "<svg" in html
    assert 'aria-label="student labels"' in html and 'aria-label="Quality over time"' in html
    assert "Block policy: <code>k=5,p=0.5, judged off</code>" in html  # launched without a judged rule
    assert "Stuck conversations" in html
    listing = client.get(f"/admin/batches/{batch_id}/conversations?status=active").get_data(as_text=True)
    assert listing.count("/admin/conversations/") == 7
    assert client.get("/admin/batches").status_code == 200


def test_sign_in_lands_on_the_batches_and_the_batch_page_counts_its_numbers_again_on_request(client, seeded,
                                                                                                settings):
    response = sign_in(client)
    assert response.status_code == 302 and response.headers["Location"] == "/admin/batches"
    assert client.get("/admin/").headers["Location"] == "/admin/batches"
    batch_id, crowd = seeded["crowd"].batch_id, seeded["crowd"]
    with session_scope(settings.database_url) as s:
        activity.snapshot_batches(s)
    crowd.submit(seeded["students"][2], crowd.conversations()[5], STUDENT_LINES[0])  # after beat's count
    page = client.get(f"/admin/batches/{batch_id}").get_data(as_text=True)
    assert "16 <span class=\"muted\">submitted" in page and "Count now" in page  # the count, and how old it is
    assert re.search(r"as of [\d-]+ [\d:]+ UTC, \d+ min ago", page)
    counted = client.post(f"/admin/batches/{batch_id}/count", data={"csrf_token": csrf_token(client, "/admin/batches")})
    assert counted.status_code == 303 and counted.headers["Location"] == f"/admin/batches/{batch_id}"
    page = client.get(f"/admin/batches/{batch_id}").get_data(as_text=True)
    assert "17 <span class=\"muted\">submitted" in page and ", 0 min ago" in page
    assert client.post("/admin/batches/999/count", data={"csrf_token": csrf_token(client, "/admin/batches")}
                       ).status_code == 404


def test_the_dashboard_counts_in_words_and_shows_no_tab_of_a_platform_not_set_up(client, seeded, settings):
    sign_in(client)
    from turkflow.reports import batch_progress
    from turkflow.words import counted

    assert (counted(1, "open HIT"), counted(0, "open HIT"), counted(2, "reply", "replies")) == (
        "1 open HIT", "0 open HITs", "2 replies")
    with session_scope(settings.database_url) as s:
        open_hits = batch_progress(s, seeded["crowd"].batch_id).hits_open
    page = client.get(f"/admin/batches/{seeded['crowd'].batch_id}").get_data(as_text=True)
    assert f'id="open-hits">{counted(open_hits, "open HIT")} (' in page
    assert "Prolific bonuses" not in page and not settings.prolific_token
    prolific = settings.model_copy(update={"prolific_token": "a-token"})
    client.application.config["TURKFLOW_SETTINGS"] = prolific
    assert "Prolific bonuses" in client.get("/admin/batches").get_data(as_text=True)


BIDI = ["\u202e", "\u202d", "\u202a", "\u202b", "\u202c", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f",
        "\u061c"]


def test_bidi_controls_in_worker_text_are_shown_as_markers_on_every_page(client, seeded, settings):
    """A right-to-left override in a turn would make the page show other text than the worker wrote (here
    "I approve" for "evorppa I"); in a name it would reverse the words after it. The requester sees each
    control as a marker instead, in the order it was written."""
    crowd = seeded["crowd"]
    eve = crowd.worker("student", "S-\u2067eve", name="Eve \u202eevE")
    conversation = crowd.conversations()[5]
    written = "Refund me \u202eevorppa I\u202c please " + "".join(BIDI) + " thanks"
    crowd.submit(eve, conversation, written)
    sign_in(client)
    blocked = client.post(f"/admin/workers/{eve.id}/block", data={"csrf_token": csrf_token(client, "/admin/review"),
                                                                  "note": "note \u2066from ada\u2069 ok"},
                          follow_redirects=True)
    flashed = html.unescape(blocked.get_data(as_text=True))
    assert "Eve ⟨U+202E⟩evE is blocked permanently" in flashed and "\u202e" not in flashed
    pages = [f"/admin/workers/{eve.id}", f"/admin/workers/{eve.id}/turns", f"/admin/workers/{eve.id}/blocks",
             f"/admin/conversations/{conversation}", "/admin/workers"]
    for path in pages:
        shown = html.unescape(client.get(path, follow_redirects=True).get_data(as_text=True))
        assert not [c for c in BIDI if c in shown], path
        assert "Eve ⟨U+202E⟩evE" in shown, path
    turn_page = html.unescape(client.get(f"/admin/conversations/{conversation}").get_data(as_text=True))
    assert "Refund me ⟨U+202E⟩evorppa I⟨U+202C⟩ please ⟨U+202E⟩⟨U+202D⟩⟨U+202A⟩" in turn_page
    assert "⟨U+2069⟩⟨U+200E⟩⟨U+200F⟩⟨U+061C⟩" in turn_page
    blocks = html.unescape(client.get(f"/admin/workers/{eve.id}/blocks").get_data(as_text=True))
    assert "note ⟨U+2066⟩from ada⟨U+2069⟩ ok" in blocks
