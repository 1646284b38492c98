"""The review dashboard shows STAR batches as it shows Wizard of Tasks ones: every page of a STAR batch,
its conversation and its workers answers, and the conversation page holds what was said."""

from __future__ import annotations

from sqlmodel import select

from tests.test_dashboard import seeded, sign_in  # noqa: F401 - seeded: a fixture (the admin, a batch)
from tests.test_star_dialog import USER_1, WIZARD_1, launch_star, library_dialog
from turkflow.db import session_scope
from turkflow.models import Conversation, Worker


def test_every_dashboard_page_of_a_star_batch_answers_and_shows_the_dialog(settings, providers, client,
                                                                           seeded):  # noqa: F811
    batch_id = launch_star(settings, providers)
    with session_scope(settings.database_url) as s:
        conversation_id = s.exec(select(Conversation.id).where(Conversation.batch_id == batch_id)).one()
    library_dialog(settings, providers, conversation_id)
    with session_scope(settings.database_url) as s:
        workers = [s.exec(select(Worker.id).where(Worker.external_id == ref)).one()
                   for ref in (USER_1, WIZARD_1)]
    assert sign_in(client).status_code == 302

    for path in ["/admin/review", "/admin/batches", f"/admin/batches/{batch_id}",
                 f"/admin/batches/{batch_id}/conversations", *(f"/admin/workers/{w}" for w in workers)]:
        assert client.get(path).status_code == 200, path
    page = client.get(f"/admin/conversations/{conversation_id}")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert "Paper Rivers by M. Ruiz is on floor 2." in text and "Thanks, bye!" in text
