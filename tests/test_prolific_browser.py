"""A student and a teacher from Prolific write a whole conversation in headless Chromium: each arrives
through their study's link as Prolific sends them, writes a turn, and lands on Prolific's completion URL;
the real Celery worker opens each next turn, whose place then appears on the other role's study."""

from __future__ import annotations

import pytest
from sqlmodel import select

from tests.conftest import wait_until
from tests.test_browser_conversation import rate_previous
from tests.test_prolific_web import launch, settings, study_link  # noqa: F401 - the Prolific settings fixture
from tests.test_worker_pages import submitted_turns
from turkflow.db import session_scope
from turkflow.hits.prolific import api, sync
from turkflow.models import Conversation, ProlificStudy

from tests.fake_prolific import FakeProlific

pytest_plugins = ["tests.fake_prolific"]
pytestmark = pytest.mark.browser


@pytest.fixture
def participants(chromium):  # noqa: ANN001, ANN201
    """Two people with their own browsers; Prolific's completion page is answered in the browser, since
    Prolific cannot be reached from here."""
    contexts = [chromium.new_context(), chromium.new_context()]
    for context in contexts:
        context.route(f"{api.COMPLETE_URL.split('?')[0]}*", lambda route: route.fulfill(
            status=200, content_type="text/plain", body="Prolific: complete"))
    yield [context.new_page() for context in contexts]
    for context in contexts:
        context.close()


def open_study(settings, batch_id: int, role: str, fake: FakeProlific) -> str:  # noqa: ANN001
    """The role's study once a turn of it waits: published, active, with a free place."""

    def ready():
        with session_scope(settings.database_url) as s:
            study_id = s.exec(select(ProlificStudy.study_id).where(ProlificStudy.batch_id == batch_id,
                                                                   ProlificStudy.role == role)).first()
        live = study_id and fake.studies[study_id].status == "ACTIVE" and fake.places_free(study_id)
        return study_id if live else None

    return wait_until(ready, interval=0.05)


def take_turn(page, live_server, settings, fake: FakeProlific, batch_id: int, role: str,  # noqa: ANN001
              who: str) -> str:
    """The participant starts the role's study on Prolific and follows its link to the turn page."""
    study_id = open_study(settings, batch_id, role, fake)
    submission_id = fake.start(study_id, who)
    page.goto(study_link(fake, study_id, who, submission_id, base=live_server.url))
    assert page.locator("#submit-turn").is_visible()
    wait_until(lambda: fake.places_free(study_id) >= 1)  # the spare place, kept by the task after the take
    return submission_id


def submit(page, providers, fake: FakeProlific, batch_id: int, role: str,  # noqa: ANN001
           submission_id: str) -> None:
    """Submit the turn: the browser lands on Prolific's completion URL with the study's code, and the
    participant finishes the submission there."""
    code = providers.get("prolific").completion_code(batch_id, role)
    page.click("#submit-turn")
    page.wait_for_url(api.completion_url(code))
    fake.complete(submission_id, code)
    study_id = fake.submissions[submission_id].study_id
    assert fake.places_free(study_id) >= 1  # a spare place: the study never drops to AWAITING REVIEW
    assert fake.studies[study_id].status in ("ACTIVE", "PAUSED")


def student_turn(page, live_server, settings, providers, fake, batch_id, intent, text,  # noqa: ANN001
                 real_life=""):
    submission_id = take_turn(page, live_server, settings, fake, batch_id, "student", "p-student")
    if real_life:
        rate_previous(page)
        page.fill("textarea[name=real_life]", real_life)
    page.check(f"input[name=intent][value={intent}]")
    page.fill("textarea[name=response]", text)
    submit(page, providers, fake, batch_id, "student", submission_id)


def teacher_turn(page, live_server, settings, providers, fake, batch_id, action, text,  # noqa: ANN001
                 share=()):
    submission_id = take_turn(page, live_server, settings, fake, batch_id, "teacher", "p-teacher")
    rate_previous(page)
    page.check(f"input[name=action][value={action}]")
    for item in share:
        page.check(f"input[name=shared][value={item}]")
    page.fill("textarea[name=response]", text)
    submit(page, providers, fake, batch_id, "teacher", submission_id)


def test_a_student_and_a_teacher_from_prolific_complete_a_six_turn_conversation_in_the_browser(
        live_server, participants, settings, providers, celery_worker, fake_prolific):
    batch_id = launch(settings, providers, max_turns=6)
    student, teacher = participants
    args = (live_server, settings, providers, fake_prolific, batch_id)

    student_turn(student, *args, "request_items", "Hi! What do I need for pancakes?")
    teacher_turn(teacher, *args, "return_items", "Flour, baking powder and buttermilk.",
                 share=("item-1", "item-2"))
    student_turn(student, *args, "request_step", "Got them. How do I start?", real_life="Put it all out.")
    teacher_turn(teacher, *args, "return_step", "Whisk the dry things together first.", share=("step-1",))
    student_turn(student, *args, "question_step", "How long should I whisk?", real_life="Whisk flour.")
    teacher_turn(teacher, *args, "answer_document", "Just until combined, then add the wet mix.")

    def completed():
        with session_scope(settings.database_url) as s:
            conversation = s.exec(select(Conversation)).one()
            return conversation if conversation.status == "completed" else None

    assert (completed_conversation := wait_until(completed))
    assert (completed_conversation.end_reason, completed_conversation.turn_count) == ("max_turns", 6)
    turns = submitted_turns(settings)
    assert [t.role for t in turns] == ["student", "teacher"] * 3
    assert turns[1].answers["shared"] == ["item-1", "item-2"]
    submissions = [s for s in fake_prolific.submissions.values() if s.status == "AWAITING REVIEW"]
    assert len(submissions) == 6 and {s.participant_id for s in submissions} == {"p-student", "p-teacher"}
    provider = providers.get("prolific")
    members = {role: list(fake_prolific.groups[provider.role_group(role)].members)
               for role in ("student", "teacher")}
    assert members == {"student": ["p-student"], "teacher": ["p-teacher"]}  # kept out of the other's study

    found = sync.poll(settings, providers.get("prolific"))  # the batch is over: both studies end
    assert sorted(found.studies.values()) == ["COMPLETED", "COMPLETED"]
    with session_scope(settings.database_url) as s:
        assert all(row.ended_at for row in s.exec(select(ProlificStudy)))


def test_a_participants_turn_refused_turn_and_return_pages_pass_axe(live_server, chromium, settings, providers,
                                                                    fake_prolific):
    from tests.test_accessibility import serious_violations
    from tests.test_prolific_web import study_of

    study_id = study_of(settings, launch(settings, providers), "student")
    early = fake_prolific.start(study_id, "p1")
    fake_prolific.studies[study_id].fields["total_available_places"] += 1  # places ran one ahead
    late = fake_prolific.start(study_id, "p2")
    context = chromium.new_context()
    page = context.new_page()
    page.goto(study_link(fake_prolific, study_id, "p1", early, base=live_server.url))
    assert page.locator("#submit-turn").is_visible()
    problems = [f"the turn: {v}" for v in serious_violations(page)]
    page.evaluate("document.getElementById('turn-form').noValidate = true")  # as a browser without checks
    page.click("#submit-turn")  # nothing answered: the page again, with its errors
    page.wait_for_selector("#error-summary")
    problems += [f"the turn refused: {v}" for v in serious_violations(page)]
    page.goto(study_link(fake_prolific, study_id, "p2", late, base=live_server.url))
    assert page.locator("#prolific-return").is_visible()  # no turn left for the second: return the submission
    problems += [f"the return page: {v}" for v in serious_violations(page)]
    context.close()
    assert problems == [], "\n".join(problems)


def test_the_prolific_bonuses_page_with_a_bonus_to_decide_passes_axe(live_server, chromium, settings, providers,
                                                                     fake_prolific):
    from tests.test_accessibility import serious_violations
    from tests.test_prolific_settle import bonus_on_a_turn, claimed_ago
    from turkflow import pipeline
    from turkflow.requesters import create_requester

    bonus_id, _ = bonus_on_a_turn(settings, providers, fake_prolific)
    fake_prolific.lose_pays = 1  # the pay call fails on Prolific's side: nobody can tell it was paid
    with pytest.raises(api.ProlificError):
        pipeline.pay_bonus(settings, providers, bonus_id)
    settings.prolific_bonus_unknown_after_seconds = 0
    claimed_ago(settings, bonus_id, sync.PAYS_WITHIN)
    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")
    context = chromium.new_context()
    page = context.new_page()
    page.goto(f"{live_server.url}/admin/login")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "correct horse")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/batches")
    page.goto(f"{live_server.url}/admin/prolific/bonuses")
    assert page.locator(f"#bonus-{bonus_id}").is_visible()
    problems = serious_violations(page)
    context.close()
    assert problems == [], "\n".join(problems)
