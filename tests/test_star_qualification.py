"""STAR's staged qualification: per role a tutorial and a quiz per stage (10 questions, at most 6 hints),
stage 1 unlocking single-task conversations and stage 2, offered after it, multi-task ones; hints counted
by the server, each attempt graded once, and no way to a turn of a stage the worker has not passed."""

from __future__ import annotations


import itertools
import re
from urllib.parse import urlsplit

import pytest
from sqlalchemy import func
from sqlmodel import select

from tests.test_mturk import mturk_client, mturk_providers, mturk_settings, stubber  # noqa: F401 - fixtures
from tests.test_star_dialog import SAMPLE
from turkflow.invites import invite_url
from turkflow.protocols.registry import load_tasks
from turkflow.protocols.star.dialog import make_scenarios, read_tasks
from turkflow.db import session_scope
from turkflow.errors import Conflict, Forbidden, InvalidAnswer, InvalidInput, NotFound
from turkflow.hits import lifecycle, onboarding
from turkflow.protocols.star import stages
from turkflow.models import Conversation, Task, Event, Hit, StageAttempt, StageHint, Worker

JSON = {"Accept": "application/json"}


def launch_star(settings, providers, conversations: int = 1, tasks_per_dialog: int = 1,
                provider: str = "local", publish: bool = True) -> int:
    """A STAR batch over the sample tasks, its first (user) turns opened and, unless told, published."""
    with session_scope(settings.database_url) as s:
        load_tasks(s, read_tasks(SAMPLE))
        tasks = list(s.exec(select(Task).where(Task.protocol == "star").order_by(Task.key)))
        scenarios = make_scenarios(tasks, conversations, tasks_per_dialog=tasks_per_dialog)
        batch, hits = lifecycle.launch_batch(s, tasks, conversations, name="star", protocol="star",
                                             provider=provider, scenarios=scenarios)
        for hit in hits if publish else ():
            lifecycle.publish_hit(s, providers.get(provider), hit.id)
        return batch.id


def right(stage: stages.Stage) -> dict[str, str]:
    return {q.name: q.answer for q in stage.questions}


def wrong_key(q: stages.StageQuestion) -> str:
    return next(key for key, _ in q.options if key != q.answer)


def new_worker(settings, role: str, external_id: str, **fields) -> int:
    with session_scope(settings.database_url) as s:
        worker = Worker(external_id=external_id, role=role, **fields)
        s.add(worker)
        s.flush()
        return worker.id


def get_worker(s, worker_id: int) -> Worker:
    return s.get(Worker, worker_id)


# ---- the quizzes, and grading as a plain function ------------------------------------------------------


def test_every_role_has_two_stages_of_ten_questions_each_with_a_hint_and_one_right_answer():
    for role in ("user", "wizard"):
        for number in (1, 2):
            stage = stages.stage_for(role, number)
            assert (stage.role, stage.number, len(stage.questions), stage.max_hints) == (role, number, 10, 6)
            assert stage.tutorial and all(q.hint for q in stage.questions)
            assert len({q.name for q in stage.questions}) == 10
            assert all(q.answer in [key for key, _ in q.options] for q in stage.questions)
    with pytest.raises(InvalidInput) as refused:
        stages.stage_for("user", 3)
    assert refused.value.field == "stage"
    with pytest.raises(InvalidInput) as refused:
        stages.stage_for("student", 1)
    assert refused.value.field == "role"


def test_grading_passes_all_right_answers_with_at_most_six_hints_and_says_why_it_fails():
    stage = stages.stage_for("wizard", 1)
    assert stages.grade(stage, right(stage), 6) == stages.StageGrade(True, [], 6, [])
    too_many = stages.grade(stage, right(stage), 7)
    assert not too_many.passed and too_many.reasons == ["hints: used 7, at most 6 may be used"]
    first, second = stage.questions[0], stage.questions[1]
    answers = {**right(stage), first.name: wrong_key(first)}
    del answers[second.name]
    failed = stages.grade(stage, answers, 0)
    assert not failed.passed and failed.wrong == [first.name, second.name]
    assert failed.reasons == [f"{first.name}: not the right answer", f"{second.name}: not answered"]


def test_answers_outside_the_options_or_sent_twice_are_refused_naming_the_question():
    stage = stages.stage_for("user", 1)
    q = stage.questions[3]
    for hostile in ("nonsense", ["a", "b"], 7, {"x": 1}):
        with pytest.raises(InvalidAnswer) as refused:
            stages.clean_answers(stage, {q.name: hostile})
        assert refused.value.field == q.name
    assert stages.clean_answers(stage, {q.name: [q.answer], "csrf_token": "x"}) == {q.name: q.answer}


def test_wizard_of_tasks_quizzes_are_untouched():
    # the Wizard of Tasks' two quizzes are still there (side by side's judge quiz sits beside them)
    assert {"student", "teacher"} <= set(onboarding.QUIZZES)
    assert not {"user", "wizard"} & set(onboarding.QUIZZES)
    assert stages.has_stages("user") and not stages.has_stages("student")


# ---- attempts: hints recorded on the server, graded once ----------------------------------------------


def test_the_hint_budget_is_kept_by_the_server_and_an_attempt_is_graded_once(settings):
    worker_id = new_worker(settings, "wizard", "W-quiz")
    stage = stages.stage_for("wizard", 1)
    with session_scope(settings.database_url) as s:
        worker = get_worker(s, worker_id)
        attempt = stages.start_attempt(s, worker, stage)
        assert stages.start_attempt(s, worker, stage).id == attempt.id  # starting twice is one start
        attempt_id = attempt.id
    names = [q.name for q in stage.questions]
    with session_scope(settings.database_url) as s:
        worker = get_worker(s, worker_id)
        for name in names[:6]:
            assert stages.request_hint(s, worker, stage, attempt_id, name) == stage.question(name).hint
        assert stages.request_hint(s, worker, stage, attempt_id, names[0])  # the same hint again is free
        with pytest.raises(Conflict, match="all 6 hints"):
            stages.request_hint(s, worker, stage, attempt_id, names[6])
        with pytest.raises(InvalidInput) as refused:
            stages.request_hint(s, worker, stage, attempt_id, "no-such-question")
        assert refused.value.field == "hint"
    with session_scope(settings.database_url) as s:
        assert s.exec(select(func.count()).select_from(StageHint)).one() == 6
        # a seventh hint that got in anyway (two requests at once) fails the attempt when graded
        s.add(StageHint(attempt_id=attempt_id, question=names[6]))
    with session_scope(settings.database_url) as s:
        result = stages.grade_attempt(s, get_worker(s, worker_id), stage, attempt_id, right(stage))
    assert not result.passed and result.reasons == ["hints: used 7, at most 6 may be used"]
    with session_scope(settings.database_url) as s:
        again = stages.grade_attempt(s, get_worker(s, worker_id), stage, attempt_id, right(stage))
        assert again == result and get_worker(s, worker_id).onboarded is False
        with pytest.raises(Conflict, match="graded already"):
            stages.request_hint(s, get_worker(s, worker_id), stage, attempt_id, names[7])
        graded = s.exec(select(func.count()).select_from(Event).where(Event.kind == "stage_graded")).one()
        assert graded == 1


def test_passing_stage_one_onboards_and_only_then_is_stage_two_offered(settings):
    worker_id = new_worker(settings, "user", "U-quiz")
    one, two = stages.stage_for("user", 1), stages.stage_for("user", 2)
    with session_scope(settings.database_url) as s:
        worker = get_worker(s, worker_id)
        assert stages.next_stage(worker) == one
        with pytest.raises(Forbidden, match="once you passed stage 1"):
            stages.start_attempt(s, worker, two)
        attempt = stages.start_attempt(s, worker, one)
        assert stages.grade_attempt(s, worker, one, attempt.id, right(one)).passed
    with session_scope(settings.database_url) as s:
        worker = get_worker(s, worker_id)
        assert (worker.onboarded, worker.stage, stages.next_stage(worker)) == (True, 1, two)
        with pytest.raises(Conflict, match="passed user stage 1 already"):
            stages.start_attempt(s, worker, one)
        attempt = stages.start_attempt(s, worker, two)
        assert stages.grade_attempt(s, worker, two, attempt.id, right(two)).passed
    with session_scope(settings.database_url) as s:
        worker = get_worker(s, worker_id)
        assert (worker.stage, stages.next_stage(worker)) == (2, None)


def test_attempts_are_limited_and_belong_to_their_worker(settings):
    worker_id = new_worker(settings, "user", "U-retry")
    other_id = new_worker(settings, "user", "U-other")
    stage = stages.stage_for("user", 1)
    for _ in range(stage.max_attempts):
        with session_scope(settings.database_url) as s:
            worker = get_worker(s, worker_id)
            attempt = stages.start_attempt(s, worker, stage)
            assert not stages.grade_attempt(s, worker, stage, attempt.id, {}).passed
    with session_scope(settings.database_url) as s:
        with pytest.raises(Forbidden, match="all 3 attempts"):
            stages.start_attempt(s, get_worker(s, worker_id), stage)
        mine = s.exec(select(StageAttempt).where(StageAttempt.worker_id == worker_id)).first()
        with pytest.raises(NotFound):
            stages.grade_attempt(s, get_worker(s, other_id), stage, mine.id, right(stage))
        with pytest.raises(NotFound):
            stages.request_hint(s, get_worker(s, other_id), stage, mine.id, stage.questions[0].name)


# ---- stage gating where turns are picked ------------------------------------------------------------------


SCENARIOS = [
    ({}, False),
    ({"tasks": ["a"], "multi_task": False}, False),
    ({"tasks": ["a", "b"], "multi_task": True}, True),
    ({"tasks": ["a", "b"]}, True),
    ({"tasks": ["a"], "multi_task": True}, True),
    ({"MultiTask": True}, True),
    ({"tasks": "a,b", "multi_task": "yes"}, False),
    ({"tasks": {"0": "a", "1": "b"}, "multi_task": 1}, False),
    ({"tasks": [], "multi_task": None}, False),
]


def test_multi_task_in_sql_agrees_with_python_on_every_scenario(settings, providers):
    batch_id = launch_star(settings, providers, conversations=len(SCENARIOS))
    with session_scope(settings.database_url) as s:
        conversations = list(s.exec(select(Conversation).where(Conversation.batch_id == batch_id)
                                    .order_by(Conversation.id)))
        for conversation, (scenario, _) in zip(conversations, SCENARIOS):
            conversation.scenario = scenario
            s.add(conversation)
    with session_scope(settings.database_url) as s:
        flagged = dict(s.exec(select(Conversation.id, stages.multi_task(Conversation.scenario))
                              .order_by(Conversation.id)).all())
    expected = [multi for _, multi in SCENARIOS]
    assert [bool(flagged[c.id]) for c in conversations] == expected
    assert [stages.is_multi_task(scenario) for scenario, _ in SCENARIOS] == expected


def test_the_queue_never_offers_a_multi_task_turn_before_stage_two(settings, providers):
    single = launch_star(settings, providers, conversations=2)
    multi = launch_star(settings, providers, conversations=2, tasks_per_dialog=2)
    first_stage = new_worker(settings, "user", "U-stage1", onboarded=True, stage=1)
    invited = new_worker(settings, "user", "U-invited", onboarded=True)  # --onboarded: stage 1 as passed
    second_stage = new_worker(settings, "user", "U-stage2", onboarded=True, stage=2)
    with session_scope(settings.database_url) as s:
        batch_of = {h.id: lifecycle.batch_of_hit(s, h).id for h in s.exec(select(Hit))}
        multi_hits = [hit_id for hit_id, batch_id in batch_of.items() if batch_id == multi]
        for worker_id in (first_stage, invited):
            worker = get_worker(s, worker_id)
            offered = [h.id for h in lifecycle.open_hits_for(s, worker)]
            assert {batch_of[h] for h in offered} == {single}
            assert {e["hit_id"] for e in lifecycle.queue_entries(s, worker)} == set(offered)
            with pytest.raises(Forbidden, match="multi-task"):
                lifecycle.take_turn(s, worker, multi_hits[0], lease_seconds=60)
        worker = get_worker(s, second_stage)
        assert {batch_of[h.id] for h in lifecycle.open_hits_for(s, worker)} == {single, multi}
        assignment = lifecycle.take_turn(s, worker, multi_hits[0], lease_seconds=60)
        assert assignment.worker_id == second_stage


def test_a_worker_who_never_passed_stage_one_takes_no_star_turn(settings, providers):
    launch_star(settings, providers, conversations=1)
    newcomer = new_worker(settings, "user", "U-new")
    with session_scope(settings.database_url) as s:
        hit = s.exec(select(Hit)).one()
        with pytest.raises(Forbidden, match="onboarding"):
            lifecycle.take_turn(s, get_worker(s, newcomer), hit.id, lease_seconds=60)


# ---- the pages ------------------------------------------------------------------------------------------


_joined = itertools.count()


def joined_star_worker(app, settings, role: str):
    """A browser that opened a new, not yet qualified STAR worker's invite link; its POSTs carry the CSRF
    token as the page's forms do."""
    worker_id = new_worker(settings, role, f"local-{role}-{next(_joined)}")
    with session_scope(settings.database_url) as s:
        url = invite_url(settings.secret_key, settings.public_url, s.get(Worker, worker_id))
    client = app.test_client()
    client.get(urlsplit(url).path)
    client.environ_base["HTTP_X_CSRFTOKEN"] = client.get("/queue", headers=JSON).get_json()["csrf_token"]
    client.worker_id = worker_id
    return client


def attempt_on(page) -> str:
    return re.search(r'name="attempt" value="(\d+)"', page.get_data(as_text=True)).group(1)


def stored(settings) -> tuple[int, ...]:
    with session_scope(settings.database_url) as s:
        return tuple(s.exec(select(func.count()).select_from(model)).one()
                     for model in (StageAttempt, StageHint, Event))


def test_a_local_wizard_reads_the_tutorial_takes_hints_and_passes_stage_one_then_stage_two(app, settings):
    browser = joined_star_worker(app, settings, "wizard")
    assert browser.get("/queue").headers["Location"] == "/onboarding"  # the quiz comes before any turn
    page = browser.get("/onboarding").get_data(as_text=True)
    one = stages.stage_for("wizard", 1)
    assert one.title in page and one.tutorial[1] in page and 'id="start"' in page
    assert browser.get("/onboarding?stage=2").status_code == 403  # offered after stage 1 only

    started = browser.post("/onboarding/stage/1/start")
    assert (started.status_code, started.headers["Location"]) == (303, "/onboarding?stage=1#quiz")
    page = browser.get("/onboarding").get_data(as_text=True)
    attempt = attempt_on(browser.get("/onboarding"))
    first = one.questions[0]
    hinted = browser.post("/onboarding/stage/1/hint",
                          data={"attempt": attempt, "hint": first.name, first.name: first.answer})
    text = hinted.get_data(as_text=True)
    assert hinted.status_code == 200 and first.hint in text and "Hints left: 5 of 6" in text
    assert f'value="{first.answer}" required checked' in text  # the answer given so far stays ticked

    wrong = browser.post("/onboarding/stage/1",
                         data={"attempt": attempt, **right(one), first.name: wrong_key(first)})
    assert wrong.status_code == 200 and f"{first.name}: not the right answer" in wrong.get_data(as_text=True)
    before = stored(settings)
    again = browser.post("/onboarding/stage/1", data={"attempt": attempt, **right(one)})  # double POST
    assert again.status_code == 200 and stored(settings) == before  # graded once: still the first grade
    with session_scope(settings.database_url) as s:
        assert get_worker(s, browser.worker_id).onboarded is False

    browser.post("/onboarding/stage/1/start")
    attempt = attempt_on(browser.get("/onboarding"))
    passed = browser.post("/onboarding/stage/1", data={"attempt": attempt, **right(one)})
    assert (passed.status_code, passed.headers["Location"]) == (303, "/queue")
    assert browser.get("/queue").status_code == 200

    two = stages.stage_for("wizard", 2)
    assert two.tutorial[0] in browser.get("/onboarding").get_data(as_text=True)
    attempt = browser.post("/onboarding/stage/2/start", headers=JSON).get_json()["attempt"]
    hint = browser.post("/onboarding/stage/2/hint", headers=JSON, data={"attempt": attempt, "hint": "tabs"})
    assert hint.status_code == 400 and hint.get_json()["field"] == "hint"
    hint = browser.post("/onboarding/stage/2/hint", headers=JSON, data={"attempt": attempt, "hint": "switch"})
    assert hint.get_json() == {"question": "switch", "hint": two.question("switch").hint, "hints_left": 5}
    graded = browser.post("/onboarding/stage/2", headers=JSON, data={"attempt": attempt, **right(two)})
    assert graded.get_json() == {"passed": True, "reasons": [], "hints_used": 1, "stage": 2}
    assert "You passed both stages" in browser.get("/onboarding").get_data(as_text=True)
    with session_scope(settings.database_url) as s:
        assert get_worker(s, browser.worker_id).stage == 2


@pytest.mark.parametrize("path, data, field", [
    ("/onboarding/stage/1", {"attempt": "abc"}, "attempt"),
    ("/onboarding/stage/1", {"attempt": "{attempt}", "goal": "nowhere"}, "goal"),
    ("/onboarding/stage/1", {"attempt": "{attempt}", "goal": ["scenario", "assistant"]}, "goal"),
    ("/onboarding/stage/3", {"attempt": "{attempt}"}, "stage"),
    ("/onboarding/stage/1/hint", {"attempt": "{attempt}"}, "hint"),
    ("/onboarding/stage/1/hint", {"attempt": "{attempt}", "hint": "x" * 5000}, "hint"),
    ("/onboarding/stage/1/hint", {"attempt": "99999999999999999999", "hint": "goal"}, "attempt"),
    ("/onboarding/stage/3/start", {}, "stage"),
])
def test_hostile_quiz_posts_are_a_4xx_naming_the_field_and_store_nothing(app, settings, path, data, field):
    browser = joined_star_worker(app, settings, "user")
    attempt = browser.post("/onboarding/stage/1/start", headers=JSON).get_json()["attempt"]
    data = {name: value.replace("{attempt}", str(attempt)) if isinstance(value, str) else value
            for name, value in data.items()}
    before = stored(settings)
    response = browser.post(path, headers=JSON, data=data)
    assert 400 <= response.status_code < 500 and response.get_json()["field"] == field, response.get_json()
    assert stored(settings) == before
    page = browser.post(path, data=data)  # the page variant refuses alike
    assert 400 <= page.status_code < 500 and stored(settings) == before


def test_another_workers_attempt_is_not_found_and_wizard_of_tasks_onboarding_is_unchanged(app, settings):
    owner = joined_star_worker(app, settings, "user")
    attempt = owner.post("/onboarding/stage/1/start", headers=JSON).get_json()["attempt"]
    intruder = joined_star_worker(app, settings, "user")
    assert intruder.post("/onboarding/stage/1", headers=JSON, data={"attempt": attempt}).status_code == 404
    student = joined_star_worker(app, settings, "student")
    page = student.get("/onboarding").get_data(as_text=True)
    assert "Student onboarding" in page and "Hints left" not in page
    quiz = onboarding.quiz_for("student")
    passed = student.post("/onboarding", data={q.name: q.answer for q in quiz.questions})
    assert (passed.status_code, passed.headers["Location"]) == (303, "/queue")


# ---- MTurk: a qualification type per role and stage ----------------------------------------------------


STAR_QUALS = {f"star:{role}:{n}": f"3STAR{role.upper()}{n}QUALIFICATION".ljust(30, "0")
              for role in ("user", "wizard") for n in (1, 2)} | {"blocked": "3PAUSEDQUALIFICATION000000001"}


def test_mturk_quals_for_star_make_one_test_per_role_and_stage_once(mturk_settings, mturk_providers, stubber):
    from botocore.stub import ANY
    from click.testing import CliRunner

    from tests.test_mturk import Matches
    from turkflow.cli.main import App, main
    from turkflow.hits.mturk import qualifications

    tests = {}
    for purpose, type_id in STAR_QUALS.items():
        name = qualifications.qualification_names("turkflow")[purpose][0]
        stubber.add_response("list_qualification_types", {"QualificationTypes": [], "NumResults": 0},
                             {"Query": name, "MustBeRequestable": False, "MustBeOwnedByCaller": True,
                              "MaxResults": 100})
        expected = {"Name": name, "Description": ANY, "QualificationTypeStatus": "Active",
                    "Keywords": "turkflow"}
        if purpose != "blocked":
            tests[purpose] = Matches(lambda t: t.startswith("<QuestionForm"), "the stage's quiz")
            expected.update(Test=tests[purpose], AnswerKey=ANY, TestDurationInSeconds=1200)
        created = {"QualificationType": {"QualificationTypeId": type_id}}
        stubber.add_response("create_qualification_type", created, expected)

    def run(*args):
        return CliRunner().invoke(main, list(args), obj=App(mturk_settings, mturk_providers),
                                  catch_exceptions=False)

    first = run("mturk", "quals", "--protocol", "star")
    assert first.exit_code == 0, first.output
    assert run("mturk", "quals", "--protocol", "star").exit_code == 0  # nothing left to create: no call
    stubber.assert_no_pending_responses()
    with session_scope(mturk_settings.database_url) as s:
        assert qualifications.qualification_ids(s, False, "star") == STAR_QUALS
    shown = tests["star:wizard:2"].seen[0]
    two = stages.stage_for("wizard", 2)
    assert all(q.text.replace("'", "&apos;") in shown or q.text in shown for q in two.questions)
    assert not any(q.hint in shown for q in two.questions)  # MTurk's test form counts no hints: none offered
    key = qualifications.answer_key_xml(qualifications.quiz_of("star:wizard:2"))
    assert key.count("<AnswerScore>1</AnswerScore>") == 10 and "<MaximumSummedScore>10<" in key


def test_a_star_turn_hit_requires_the_stage_its_conversation_needs(mturk_settings, mturk_providers, stubber):
    from tests.test_mturk import expect_create_hit, mturk_id
    from turkflow.hits.mturk.qualifications import qualification_requirements
    from turkflow.models import MTurkQualification

    def required(role, stage):
        return qualification_requirements(mturk_settings, STAR_QUALS, role, False, stage)

    assert required("user", 1) == [
        {"QualificationTypeId": STAR_QUALS["star:user:1"], "Comparator": "EqualTo", "IntegerValues": [100],
         "ActionsGuarded": "Accept"},
        {"QualificationTypeId": STAR_QUALS["star:wizard:1"], "Comparator": "DoesNotExist",
         "ActionsGuarded": "DiscoverPreviewAndAccept"},
        {"QualificationTypeId": STAR_QUALS["blocked"], "Comparator": "DoesNotExist",
         "ActionsGuarded": "DiscoverPreviewAndAccept"}]
    assert required("wizard", 2)[:2] == [
        {"QualificationTypeId": STAR_QUALS[f"star:wizard:{n}"], "Comparator": "EqualTo",
         "IntegerValues": [100], "ActionsGuarded": "Accept"} for n in (1, 2)]

    with session_scope(mturk_settings.database_url) as s:
        for purpose, type_id in STAR_QUALS.items():
            s.add(MTurkQualification(purpose=purpose, live=False, type_id=type_id, name=purpose))
    single = launch_star(mturk_settings, mturk_providers, conversations=1, provider="mturk", publish=False)
    multi = launch_star(mturk_settings, mturk_providers, conversations=1, tasks_per_dialog=2,
                        provider="mturk", publish=False)
    with session_scope(mturk_settings.database_url) as s:
        hits = {lifecycle.batch_of_hit(s, h).id: h.id for h in s.exec(select(Hit))}
    expect_create_hit(stubber, hits[single], "user", mturk_id("3HIT", 1), reqs=required("user", 1))
    expect_create_hit(stubber, hits[multi], "user", mturk_id("3HIT", 2), reqs=required("user", 2))
    for batch_id in (single, multi):
        with session_scope(mturk_settings.database_url) as s:
            lifecycle.publish_hit(s, mturk_providers.get("mturk"), hits[batch_id])
    stubber.assert_no_pending_responses()


# ---- Prolific: a submission's next turn ---------------------------------------------------------------


def test_a_prolific_participant_is_given_only_turns_of_a_stage_they_passed(settings, providers):
    from turkflow.hits.prolific import pages
    from turkflow.models import HitStatus

    multi = launch_star(settings, providers, conversations=2, tasks_per_dialog=2, provider="prolific",
                        publish=False)
    with session_scope(settings.database_url) as s:
        for hit in s.exec(select(Hit)):  # as publishing leaves them (the study's id is each HIT's)
            hit.status, hit.external_id = HitStatus.open, "STUDY"
            s.add(hit)
    first = new_worker(settings, "user", "prolific:P1", onboarded=True, stage=1)
    second = new_worker(settings, "user", "prolific:P2", onboarded=True, stage=2)
    with session_scope(settings.database_url) as s:
        assert pages.take_next_turn(s, get_worker(s, first), multi, "user", "SUB1", 600) is None
        taken = pages.take_next_turn(s, get_worker(s, second), multi, "user", "SUB2", 600)
        assert taken is not None and taken.worker_id == second
