"""Launching on Prolific as a lab would on its first paid batch, against the fake Prolific (which refuses what
Prolific refuses, and checks every request and response against Prolific's OpenAPI description): every
protocol's turn studies admit only the role's onboarded group, Prolific's rules are checked at launch before
anything is created or paid, each refusal is one line naming what to change, and a fresh database never
takes over a study it did not create."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from sqlmodel import select

from turkflow import pipeline
from turkflow.cli.main import App, main
from turkflow.config import Settings
from turkflow.db import session_scope, upgrade
from turkflow.errors import ProviderError
from turkflow.hits import lifecycle, registry
from turkflow.hits.prolific import api, rules
from turkflow.models import Batch, Task
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.simulator import fake_prolific as fake_module

from tests.fake_prolific import SPEC_PATH, FakeProlific

pytest_plugins = ["tests.fake_prolific"]


def prolific_settings(tmp_path: Path, database_url: str, fake: FakeProlific, **changed) -> Settings:  # noqa: ANN003
    return Settings(data_dir=tmp_path / "var", database_url=database_url, secret_key="test-secret",
                    worker_hash_key="test-hash-key", public_url="https://turkflow.example.org", provider="prolific",
                    prolific_rehearsal_host="turkflow.example.org",
                    prolific_token=fake.token, prolific_workspace_id=fake.workspace_id, prolific_base_url=fake.url,
                    **changed)


def run(settings: Settings, *args: str, input: str | None = None):  # noqa: ANN201
    return CliRunner().invoke(main, list(args), obj=App(settings_=settings), input=input, catch_exceptions=False)


def one_line(text: str) -> str:
    assert len(text.strip().splitlines()) == 1, text
    return text.strip()


def role_groups(fake: FakeProlific, *members: str) -> str:
    """Hand-made groups (TURKFLOW_PROLIFIC_ROLE_GROUPS) holding ``members`` (someone known, if none is named: a
    group with nobody in it admits nobody), as a lab makes them by hand."""
    return ",".join(f"{role}={fake.make_group(f'{role}s', list(members or ('p-known',)))}"
                    for role in ("student", "teacher"))


def launch(settings: Settings, reward_cents: int = 40) -> list[int]:
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        _, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), 1, name="first", provider="prolific",
                                         reward_cents=reward_cents)
        return [h.id for h in hits]


# ---- item 1: no turn study before onboarding -------------------------------------------------------------


def test_a_wizard_of_tasks_batch_is_refused_before_onboarding_and_nothing_is_created(
        tmp_path, database_url, fake_prolific):
    settings = prolific_settings(tmp_path, database_url, fake_prolific)
    result = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                 "-n", "1", "--reward", "0.50", "-y")
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert "no onboarding study for students or teachers" in line
    assert "turkflow prolific onboarding --role student" in line
    assert fake_prolific.studies == {}
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Batch)).all() == []


def test_a_turn_study_is_never_created_open_to_everyone(tmp_path, database_url, fake_prolific):
    """Whatever publishes the first turn (a Celery task, the simulator), a study without the role's group
    is refused before Prolific is asked to create it."""
    settings = prolific_settings(tmp_path, database_url, fake_prolific)
    providers = registry.providers(settings)
    [hit_id] = launch(settings)
    with pytest.raises(ProviderError, match="no onboarding study for students"):
        with session_scope(settings.database_url) as s:
            lifecycle.publish_hit(s, providers.get("prolific"), hit_id)
    assert fake_prolific.studies == {}


def test_a_launched_turn_study_admits_only_the_roles_group(tmp_path, database_url, fake_prolific):
    groups = role_groups(fake_prolific, "p-student")
    settings = prolific_settings(tmp_path, database_url, fake_prolific, prolific_role_groups=groups)
    result = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                 "-n", "1", "--reward", "0.50", "-y")
    assert result.exit_code == 0, result.stderr
    [study] = fake_prolific.studies.values()
    allow = [f["selected_values"] for f in study.fields["filters"] if f["filter_id"] == "participant_group_allowlist"]
    assert allow == [[groups.split(",")[0].split("=")[1]]]
    with pytest.raises(fake_module.Refused, match="none of the study's allowed groups"):
        fake_prolific.start(study.id, "a-stranger")
    assert fake_prolific.start(study.id, "p-student")


# ---- item 5: Prolific's rules, at launch and in the fake ----------------------------------------------------


def test_a_maximum_time_under_prolifics_rule_is_refused_at_the_dry_run(tmp_path, database_url, fake_prolific):
    settings = prolific_settings(tmp_path, database_url, fake_prolific, prolific_role_groups=role_groups(fake_prolific),
                                 prolific_estimated_minutes=10, prolific_max_minutes=20)
    result = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                 "-n", "1", "--reward", "2.00", "--dry-run")
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert "TURKFLOW_PROLIFIC_MAX_MINUTES" in line and "at least 29" in line  # 2 + 20 + 6.3 minutes
    assert fake_prolific.studies == {}


def test_a_reward_under_prolifics_hourly_minimum_is_refused_in_the_workspaces_currency(
        tmp_path, database_url, fake_prolific):
    fake_prolific.currency = "USD"  # USD 8 an hour: 27 cents at 2 minutes
    settings = prolific_settings(tmp_path, database_url, fake_prolific, prolific_role_groups=role_groups(fake_prolific))
    result = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                 "-n", "1", "--reward", "0.20", "--dry-run")
    assert result.exit_code == 1
    assert "--reward: $0.20 is below Prolific's minimum pay: at least $0.27 a turn" in one_line(result.stderr)


def test_a_wizard_of_tasks_batch_may_ask_for_session_places_whose_study_pays_the_session(
        tmp_path, database_url, fake_prolific):
    """--session-minutes 20 on a batch that keeps nobody: the study tells Prolific 20 minutes (maximum 51, its
    least) and pays the session; under the hourly minimum on 20 minutes it is refused naming --reward; on the
    local queue the option is refused."""
    groups = role_groups(fake_prolific, "p-student")
    settings = prolific_settings(tmp_path, database_url, fake_prolific, prolific_role_groups=groups)
    args = ("batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()), "-n", "1",
            "--session-minutes", "20", "-y")
    low = run(settings, *args, "--reward", "1.50")
    assert low.exit_code == 1
    assert "--reward: £1.50 is below Prolific's minimum pay for a place of --session-minutes 20: at least £2.00 " \
           "a session" in one_line(low.stderr)
    launched = run(settings, *args, "--reward", "2.00")
    assert launched.exit_code == 0, launched.stderr
    assert "at £2.00 a session place of 20 minutes" in launched.stdout
    assert "places: a session of 20 minutes, turn after turn in one submission, paid £2.00 once" in launched.stdout
    [study] = fake_prolific.studies.values()
    assert (study.fields["estimated_completion_time"], study.fields["maximum_allowed_time"],
            study.fields["reward"]) == (20, 51, 200)
    local = run(settings, "batch", "launch", "--provider", "local", "--tasks", str(sample_tasks_path()), "-n", "1",
                "--session-minutes", "20", "--dry-run")
    assert local.exit_code == 1 and "--session-minutes applies to --provider prolific only" in one_line(local.stderr)


def test_the_least_maximum_time_is_prolifics_formula():
    assert [rules.least_maximum_minutes(x) for x in (1, 2, 3, 10)] == [6, 9, 12, 29]
    assert rules.least_hourly_cents("GBP") == 600 and rules.least_hourly_cents("usd") == 800
    assert rules.least_hourly_cents("GBP", own_floor=900) == 900


@pytest.mark.parametrize("broken, field", [
    ({"surprise": True}, "surprise"),
    ({"filters": [{"filter_id": "favourite_colour", "selected_values": ["blue"]}]}, "filters"),
    ({"filters": [{"filter_id": "participant_group_allowlist", "selected_values": ["no-such-group"]}]}, "filters"),
    ({"reward": 1}, "reward"),
    ({"maximum_allowed_time": 1}, "maximum_allowed_time"),
])
def test_the_fake_refuses_what_prolific_refuses(fake_prolific, broken, field):
    client = api.ProlificClient(fake_prolific.token, fake_prolific.url)
    body = {**api.study_body(name="n", description="d", page_url="https://x.example.org/p", completion_code="C",
                             reward_cents=40, places=1, estimated_minutes=2, internal_name="i"), **broken}
    with pytest.raises(api.ProlificError) as refused:
        api.create_study(client, body)
    assert refused.value.prolific_status == 400 and field in refused.value.detail
    assert fake_prolific.studies == {}


def test_the_fakes_study_fields_are_the_contracts():
    """The fake refuses a field Prolific does not have; the list must stay the contract's own."""
    spec = yaml.safe_load(SPEC_PATH.read_text())
    assert fake_module.STUDY_FIELDS == set(spec["components"]["schemas"]["BaseStudy"]["properties"])


# ---- a fresh database never takes over another installation's study ----------------------------------------


def test_a_fresh_database_never_adopts_a_study_it_did_not_create(tmp_path, database_url, fake_prolific):
    groups = role_groups(fake_prolific, "p1")
    first = prolific_settings(tmp_path, database_url, fake_prolific, prolific_role_groups=groups)
    [hit_id] = launch(first)
    pipeline.publish(first, registry.providers(first), hit_id, "prolific")
    [theirs] = fake_prolific.studies.values()
    places = theirs.fields["total_available_places"]
    fresh_url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade(fresh_url)  # the same secret key, a new data folder: batch 1 again
    fresh = prolific_settings(tmp_path, fresh_url, fake_prolific, prolific_role_groups=groups)
    [fresh_hit] = launch(fresh)
    pipeline.publish(fresh, registry.providers(fresh), fresh_hit, "prolific")
    assert len(fake_prolific.studies) == 2
    assert theirs.fields["total_available_places"] == places


# ---- money shown as money ------------------------------------------------------------------------------


def test_a_running_batch_pauses_before_a_turn_whose_reward_and_fee_would_exceed_the_budget(sqlite_url):
    from turkflow.models import BatchStatus, Turn, TurnStatus
    from tests.test_pipeline import STUDENT_ANSWERS

    with session_scope(sqlite_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, [hit] = lifecycle.launch_batch(s, list(s.exec(select(Task))), 1, name="p", provider="prolific",
                                              reward_cents=20, budget_cents=55)
        batch.fee_percent = 50.0  # the first turn holds 30 of the 55; the next would make 60
        turn = s.get(Turn, hit.turn_id)
        turn.status, turn.answers = TurnStatus.submitted, dict(STUDENT_ANSWERS)
        batch_id, conversation_id = batch.id, turn.conversation_id
    with session_scope(sqlite_url) as s:
        assert lifecycle.advance_conversation(s, conversation_id) is None
        assert s.get(Batch, batch_id).status == BatchStatus.paused


def test_the_dry_run_shows_the_workspaces_currency_and_never_more_than_the_budget(
        tmp_path, database_url, fake_prolific):
    settings = prolific_settings(tmp_path, database_url, fake_prolific, prolific_role_groups=role_groups(fake_prolific),
                                 prolific_fee_percent=33.33, prolific_vat_percent=20)
    result = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                 "-n", "20", "--max-turns", "12", "--reward", "0.50", "--budget", "150", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert "£0.50 a turn on Prolific (real studies)" in result.stdout
    at_most = result.stdout.split("at most £")[1].split(":")[0]
    assert float(at_most.replace(",", "")) <= 150 and "$" not in result.stdout
    assert "39.996% of each reward and bonus" in result.stdout  # 33.33% and 20% VAT on it


def test_batch_status_and_the_dashboard_show_a_prolific_batch_in_the_workspaces_currency(
        tmp_path, database_url, fake_prolific):
    settings = prolific_settings(tmp_path, database_url, fake_prolific, prolific_role_groups=role_groups(fake_prolific))
    launched = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                   "-n", "1", "--reward", "0.50", "--budget", "20", "-y")
    assert launched.exit_code == 0, launched.stderr
    status = run(settings, "batch", "status", "1")
    assert status.exit_code == 0 and "of a £20.00 budget" in status.stdout and "$" not in status.stdout
    spent = run(settings, "prolific", "spend")
    assert spent.exit_code == 0 and "£0.00 spent" in spent.stdout


# ---- a newcomer's path ---------------------------------------------------------------------------------


def test_check_on_a_fresh_data_folder_migrates_it_as_every_command_does(tmp_path, fake_prolific):
    fresh = prolific_settings(tmp_path, f"sqlite:///{tmp_path / 'new' / 'turkflow.db'}", fake_prolific)
    result = run(fresh, "prolific", "check")
    assert "turkflow db upgrade" not in result.stderr
    assert "students: no onboarding study yet" in result.stdout


def test_the_real_launch_says_no_tasks_are_loaded_before_asking_to_pay(tmp_path, database_url, fake_prolific):
    settings = prolific_settings(tmp_path, database_url, fake_prolific, prolific_role_groups=role_groups(fake_prolific))
    result = run(settings, "batch", "launch", "--provider", "prolific", "--all", "-n", "1", "--reward", "0.50",
                 input="y\n")
    assert result.exit_code == 1 and "real money" not in result.stdout
    assert "no task documents loaded; run `turkflow tasks load FILE` first" in one_line(result.stderr)


def test_the_example_in_prolific_help_works_against_the_fake(tmp_path, database_url, fake_prolific):
    settings = prolific_settings(tmp_path, database_url, fake_prolific)
    help_text = run(settings, "prolific", "--help").stdout
    lines = [line.split() for line in map(str.strip, help_text.splitlines())
             if line.split()[:2] in (["turkflow", "tasks"], ["turkflow", "prolific"], ["turkflow", "batch"])
             and "check" not in line]  # check exits non-zero here: the fake's public URL is not HTTPS
    assert len(lines) == 4, lines
    for words in lines:
        result = run(settings, *words[1:])
        assert result.exit_code == 0, (words, result.stderr)
    assert "at most £" in result.stdout


def test_groups_say_which_role_each_is_and_a_trial_on_test_studies_works_end_to_end(
        tmp_path, database_url, fake_prolific):
    """README step 5: test participants, groups of them for the roles, test studies; the test participant
    takes the test study (Prolific keeps its allow list)."""
    settings = prolific_settings(tmp_path, database_url, fake_prolific, prolific_test_studies=True)
    tester = run(settings, "prolific", "test-participant", "you@lab.example.org").stdout.split()[2]
    groups = {}
    for role in ("student", "teacher"):
        made = run(settings, "prolific", "groups", "create", f"Trial {role}s", "--participant", tester)
        assert made.exit_code == 0, made.stderr
        groups[role] = made.stdout.split()[1]
    assert run(settings, "prolific", "groups", "add", groups["student"], "p-friend").stdout.strip() == \
        f"group {groups['student']} now has 2 participants"
    trial = settings.model_copy(update={"prolific_role_groups": f"student={groups['student']},teacher={groups['teacher']}"})
    listed = run(trial, "prolific", "groups").stdout
    assert "students onboarded" in listed and "hand-made" in listed and "blocked" in listed
    launched = run(trial, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                   "-n", "1", "--reward", "0.50")
    assert launched.exit_code == 0, launched.stderr
    [test_copy] = [s for s in fake_prolific.studies.values() if s.status == "ACTIVE"]
    assert fake_prolific.start(test_copy.id, tester)


def test_rehearse_prints_where_the_fake_prolific_runs_and_the_token(tmp_path):
    result = CliRunner().invoke(main, ["prolific", "rehearse", "--stop-after", "0"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    exports = dict(line.removeprefix("export ").split("=", 1) for line in result.stdout.splitlines()
                   if line.startswith("export "))
    assert exports["TURKFLOW_PROLIFIC_BASE_URL"].startswith("http://127.0.0.1:")
    assert exports["TURKFLOW_PROLIFIC_TOKEN"] and exports["TURKFLOW_PROLIFIC_WORKSPACE_ID"]


def test_a_rehearsal_participant_takes_a_turn_in_a_browser_and_completes_it_on_the_fake(
        tmp_path, database_url, redis_url, fake_prolific):
    """The rehearsal's participant pages: take a place, land on our turn page, write the turn, and come back
    to the fake with the completion code where Prolific's completion page would be."""
    import requests

    from tests.test_pipeline import STUDENT_ANSWERS
    from tests.test_prolific_web import VOUCHED, form_token, launch as launch_published, prolific_settings as web
    from turkflow.web import create_app

    settings = web(tmp_path, database_url, redis_url, fake_prolific, VOUCHED)
    providers = registry.providers(settings)
    client = create_app(settings).test_client()
    batch_id = launch_published(settings, providers)
    [study_id] = fake_prolific.studies
    browser = requests.Session()
    taken = browser.get(f"{fake_prolific.url}/participant/take?study={study_id}&participant=p1",
                        allow_redirects=False, timeout=10)
    assert taken.status_code == 303
    page_path = taken.headers["Location"].removeprefix(settings.public_url)
    page = client.get(page_path)
    assert page.status_code == 200
    sent = client.post(page_path, data={**STUDENT_ANSWERS, "turkflow_form": form_token(page.text)})
    code = sent.location.split("cc=")[1]
    assert code == providers.get("prolific").completion_code(batch_id, "student")
    done = browser.get(f"{fake_prolific.url}/participant/complete?cc={code}", timeout=10)
    assert done.status_code == 200 and "AWAITING REVIEW" in done.text


def test_a_balance_that_cannot_pay_the_first_turns_is_refused_before_anything_is_created(
        tmp_path, database_url, fake_prolific):
    """Prolific publishes a study, or grows its places, only if the workspace's balance covers them."""
    fake_prolific.balance_cents = 150
    settings = prolific_settings(tmp_path, database_url, fake_prolific, prolific_role_groups=role_groups(fake_prolific))
    result = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                 "-n", "4", "--reward", "0.50", "-y")
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert "available balance, £1.50, does not cover the first 4 turns" in line and "Finance" in line
    assert fake_prolific.studies == {}
    client = api.ProlificClient(fake_prolific.token, fake_prolific.url)  # and the fake refuses it too
    draft = api.create_study(client, api.study_body(name="n", description="d", page_url="https://x.example.org/p",
                                                     completion_code="C", reward_cents=50, places=4,
                                                     estimated_minutes=2, internal_name="i"))
    with pytest.raises(api.ProlificError, match="Insufficient funds"):
        api.transition_study(client, draft["id"], "PUBLISH")


def test_the_dashboard_shows_a_test_batchs_spend_apart_and_each_roles_study(tmp_path, database_url, fake_prolific):
    import re

    from turkflow.requesters import create_requester
    from turkflow.web import create_app

    tester = api.create_test_participant(api.ProlificClient(fake_prolific.token, fake_prolific.url), "lab@example.org")
    settings = prolific_settings(tmp_path, database_url, fake_prolific, prolific_test_studies=True,
                                 prolific_role_groups=role_groups(fake_prolific, tester))
    launched = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                   "-n", "1", "--reward", "0.50")
    assert launched.exit_code == 0, launched.stderr
    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")
    client = create_app(settings).test_client()
    login = client.get("/admin/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', login).group(1)
    client.post("/admin/login", data={"csrf_token": token, "username": "ada", "password": "correct horse"})
    page = client.get("/admin/batches/1").get_data(as_text=True)
    assert 'id="test-spend"' in page and "refunded by Prolific within 24 hours" in page
    assert 'id="prolific-studies"' in page and "test studies, for the test participant only" in page
    assert "Prolific places: one turn a place, paid £0.50" in page  # the Wizard of Tasks keeps nobody
    [test_copy] = [s for s in fake_prolific.studies.values() if s.test]
    assert test_copy.id in page
