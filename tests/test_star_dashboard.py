"""The review dashboard shows STAR batches as it shows Wizard of Tasks ones: every page of a STAR batch,
its conversation and its workers answers, and the conversation page holds what was said."""

from __future__ import annotations

from sqlmodel import select

from tests.test_dashboard import seeded, sign_in  # noqa: F401 - seeded: a fixture (the admin, a batch)
from tests.test_star_dialog import USER_1, USER_2, WIZARD_1, command, launch_star, library_dialog
from turkflow.protocols import surveys
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


def test_the_end_of_dialog_answers_show_on_the_conversation_page_and_are_counted_on_the_batch_page(
        settings, providers, client, seeded):  # noqa: F811
    batch_id = launch_star(settings, providers)
    with session_scope(settings.database_url) as s:
        conversation_id = s.exec(select(Conversation.id).where(Conversation.batch_id == batch_id)).one()
    library_dialog(settings, providers, conversation_id)
    with session_scope(settings.database_url) as s:
        user = s.exec(select(Worker).where(Worker.external_id == USER_2)).one()  # wrote the last user turn
        assert surveys.answer_survey(s, conversation_id, user, {"task_done": "no", "calm": "yes"})
    assert sign_in(client).status_code == 302

    page = client.get(f"/admin/conversations/{conversation_id}").get_data(as_text=True)
    answers = page[page.index('id="survey-answers"'):]
    assert "Did the assistant get your task done?</dt><dd>no" in answers
    assert "Did the assistant stay calm and helpful throughout the dialogue?</dt><dd>yes" in answers
    assert "Not answered yet." in answers  # the wizard's questions

    counted = client.get(f"/admin/batches/{batch_id}").get_data(as_text=True)
    table = counted[counted.index('id="surveys"'):]
    task_done = table[table.index("Did the assistant get your task done?"):]
    assert task_done.index("Yes: 0") < task_done.index("No: 1") < task_done.index("</tr>")

    listed = command(settings, "batch", "surveys", str(batch_id))
    assert listed.returncode == 0, listed.stderr
    assert "Yes: 0, No: 1" in listed.stdout and "Yes: 1, No: 0" in listed.stdout  # task_done, calm
    refused = command(settings, "batch", "surveys", "999999")
    assert refused.returncode == 1 and refused.stderr.strip().startswith("error: no batch 999999")
