"""``turkflow prolific ...`` and the Prolific side of ``batch launch``, through click's runner against the
fake Prolific (every request and response checked against Prolific's OpenAPI description)."""

from __future__ import annotations

import re
import socket

import pytest
from click.testing import CliRunner
from sqlmodel import select

from tests.test_prolific_web import bonus_on_a_stored_turn, settings  # noqa: F401 - settings: a fixture
from turkflow import pipeline
from turkflow.cli.main import App, main
from turkflow.cli.prolific import prolific
from turkflow.db import session_scope
from turkflow.protocols.wot import sample_tasks_path
from turkflow.hits.prolific import api
from turkflow.models import Batch

from tests.fake_prolific import FakeProlific

pytest_plugins = ["tests.fake_prolific"]


@pytest.fixture
def turkflow(settings, providers):  # noqa: ANN001, ANN201
    def run(*args: str, input: str | None = None, **changed):  # noqa: ANN202
        app = App(settings_=settings.model_copy(update=changed), providers_=None if changed else providers)
        return CliRunner().invoke(main, list(args), obj=app, input=input, catch_exceptions=False)

    return run


def one_line(text: str) -> str:
    assert len(text.strip().splitlines()) == 1, text
    return text.strip()


def test_check_shows_the_token_the_balance_and_what_is_missing(turkflow):
    result = turkflow("prolific", "check", prolific_role_groups="", public_url="http://127.0.0.1:5000")
    assert result.exit_code == 1
    assert "the token works (lab@example.org)" in result.stdout
    assert 'workspace "Lab": available balance £1,000.00' in result.stdout
    assert "students: no onboarding study yet (`turkflow prolific onboarding --role student`)" \
        in result.stdout
    assert "pay: at least £0.20 a turn (£6.00 an hour at 2 minutes a turn)" in result.stdout
    assert "study links would point at http://127.0.0.1:5000/prolific/turn, which is not an https address" \
        in one_line(result.stderr)
    assert "no onboarding study for students or teachers" in result.stderr


def test_check_passes_with_an_https_address_and_the_role_groups(turkflow, fake_prolific: FakeProlific):
    client = api.ProlificClient(fake_prolific.token, fake_prolific.url)
    student, teacher = (api.create_participant_group(client, fake_prolific.workspace_id, f"{role}s",
                                                     participant_ids=[f"p-{role}"])["id"]
                        for role in ("student", "teacher"))
    result = turkflow("prolific", "check", public_url="https://turkflow.example.org",
                      prolific_role_groups=f"student={student},teacher={teacher}")
    assert result.exit_code == 0, result.stderr
    assert f'teachers: hand-made participant group "teachers" ({teacher}), 1 participant' in result.stdout
    assert "study links: https://turkflow.example.org/prolific/turn" in result.stdout
    missing = turkflow("prolific", "check", public_url="https://turkflow.example.org",
                       prolific_role_groups="student=group-404")
    assert missing.exit_code == 1 and "names group-404 for students" in one_line(missing.stderr)


def test_a_refused_token_or_a_missing_one_is_one_line(turkflow):
    refused = turkflow("prolific", "check", prolific_token="wrong")
    assert refused.exit_code == 1 and "refused the token" in one_line(refused.stderr)
    missing = turkflow("prolific", "groups", prolific_token="")
    assert missing.exit_code == 1 and "TURKFLOW_PROLIFIC_TOKEN is not set" in one_line(missing.stderr)


def test_groups_lists_the_block_list_group_and_test_participants_are_created(turkflow, fake_prolific):
    result = turkflow("prolific", "groups")
    assert result.exit_code == 0 and "blocked: every study of ours keeps them out" in result.stdout
    created = turkflow("prolific", "test-participant", "tester@lab.example.org")
    assert created.exit_code == 0 and fake_prolific.test_participants[0] in created.stdout


def test_webhook_needs_https_and_subscribes_our_url_once(turkflow, fake_prolific, settings):
    assert "not an https address" in one_line(turkflow("prolific", "webhook", public_url="http://127.0.0.1:5000").stderr)
    for _ in range(2):
        result = turkflow("prolific", "webhook", public_url="https://turkflow.example.org")
        assert result.exit_code == 0, result.stderr
        assert f"TURKFLOW_PROLIFIC_WEBHOOK_SECRET={settings.prolific_webhook_secret}" in result.stdout
    [subscription] = fake_prolific.subscriptions.values()
    assert subscription["target_url"] == "https://turkflow.example.org/prolific/webhook"


def test_launch_refuses_a_reward_below_prolifics_hourly_minimum(turkflow, fake_prolific):
    result = turkflow("batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                      "-n", "1", "--reward", "0.15", "-y")
    assert result.exit_code == 1
    assert "--reward" in one_line(result.stderr) and "at least £0.20 a turn" in result.stderr
    assert fake_prolific.studies == {}


def test_launch_on_prolific_counts_the_service_fee_and_opens_the_student_study(
        turkflow, fake_prolific, settings):
    result = turkflow("batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                      "-n", "2", "--max-turns", "6", "--reward", "0.50", "--budget", "20", "-y")
    assert result.exit_code == 0, result.stderr
    assert "Prolific service fee: 33.33% of each reward and bonus" in result.stdout
    [study] = fake_prolific.studies.values()
    assert (study.status, study.fields["reward"], fake_prolific.places_free(study.id)) == ("ACTIVE", 50, 2)
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Batch.fee_percent)).one() == pytest.approx(33.33)
    spent = turkflow("prolific", "spend")
    assert spent.exit_code == 0 and "(prolific)" in spent.stdout


def test_launch_on_prolific_asks_before_spending_real_money(turkflow, fake_prolific):
    declined = turkflow("batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                        "-n", "1", "--reward", "0.50", input="n\n")
    assert declined.exit_code == 1 and "Publish on Prolific, paying up to" in declined.stdout
    assert fake_prolific.studies == {}


def test_launch_while_prolific_cannot_be_reached_is_one_line_and_creates_nothing(turkflow, settings):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{closed.getsockname()[1]}"
    result = turkflow("batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                      "-n", "1", "--reward", "0.50", "-y", prolific_base_url=nowhere)
    assert result.exit_code == 1
    assert one_line(result.stderr) == (f"error: cannot reach Prolific at {nowhere}: the connection was refused; "
                                       "check the network or TURKFLOW_PROLIFIC_BASE_URL")
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Batch.status)).all() == []


def test_prolific_help_lists_every_command():
    result = CliRunner().invoke(main, ["prolific", "--help"])
    listed = re.findall(r"^  (\S+) ", result.stdout.split("\nCommands:\n")[1], re.MULTILINE)
    assert listed == ["bonuses", "check", "groups", "onboarding", "rehearse", "spend", "studies", "test-participant",
                      "webhook"]
    assert listed == sorted(prolific.commands)  # a new command shows in the list


def test_spend_names_the_bulk_payments_of_bonuses_sent_but_not_shown_paid(
        turkflow, settings, providers, client, fake_prolific, monkeypatch):
    fake_prolific.pay_later = True
    bonus_id, _ = bonus_on_a_stored_turn(settings, providers, client, fake_prolific)
    pay = api.pay_bonus_payments

    def pay_then_die(*args):  # noqa: ANN002, ANN202
        pay(*args)
        raise SystemExit("worker killed before recording the payment")

    with monkeypatch.context() as dying:
        dying.setattr(api, "pay_bonus_payments", pay_then_die)
        with pytest.raises(SystemExit):
            pipeline.pay_bonus(settings, providers, bonus_id)
    [bulk_id] = fake_prolific.bulk_bonuses
    spent = turkflow("prolific", "spend")
    assert spent.exit_code == 0
    assert re.search(rf"1 of the pending bonuses \(\$0\.08\) went to prolific .*\(payments {bulk_id}\)",
                     spent.stdout.replace("\n", " "))
    fake_prolific.settle_payments()
    assert pipeline.pay_bonus(settings, providers, bonus_id)
    assert "went to prolific" not in turkflow("prolific", "spend").stdout


def test_spend_shows_test_studies_apart_from_real_ones(turkflow, settings, providers, client, fake_prolific):
    """A test study's participant is paid from the workspace's balance and Prolific refunds it within 24
    hours: its spend is not part of the real spend."""
    bonus_id, _ = bonus_on_a_stored_turn(settings, providers, client, fake_prolific)
    assert pipeline.pay_bonus(settings, providers, bonus_id)
    real = turkflow("prolific", "spend")
    assert "Prolific, real studies: $0.08 spent, $0.20 pending (1 batch)" in real.stdout  # the bonus; a turn pending
    assert "test studies" not in real.stdout
    with session_scope(settings.database_url) as s:
        batch = s.exec(select(Batch)).one()
        batch.platform_terms = {**batch.platform_terms, "test": True}
        s.add(batch)
    trial = turkflow("prolific", "spend")
    assert "Prolific, real studies: $0.00 spent, $0.00 pending (0 batches)" in trial.stdout
    assert "Prolific, test studies: $0.08 spent, $0.20 pending (1 batch); charged to the workspace and refunded " \
           "by Prolific within 24 hours, not part of the real spend" in trial.stdout
    assert f"batch {batch.id} \"prolific\" (prolific test studies)" in trial.stdout


def test_studies_shows_each_roles_study_with_its_status_and_median_time(turkflow, settings, providers, client,
                                                                        fake_prolific):
    bonus_on_a_stored_turn(settings, providers, client, fake_prolific)
    shown = turkflow("prolific", "studies")
    assert shown.exit_code == 0, shown.stderr
    assert "real studies" in shown.stdout and "student" in shown.stdout and "active" in shown.stdout
    assert "2 min" in shown.stdout  # the estimate participants were told
    assert turkflow("prolific", "studies", "99").exit_code == 1


def test_the_webhook_is_confirmed_with_a_prolific_that_reads_the_secret_where_its_guide_says(
        turkflow, fake_prolific, settings):
    fake_prolific.hook_confirmation = "path"
    result = turkflow("prolific", "webhook")
    assert result.exit_code == 0, result.stderr
    assert "(enabled)" in result.stdout
    [subscription] = fake_prolific.subscriptions.values()
    assert subscription["is_enabled"]
