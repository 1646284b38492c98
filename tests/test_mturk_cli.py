"""``turkflow mturk ...``, ``batch expire`` and the MTurk side of ``batch launch``, through click's runner with
the stubbed MTurk client injected (``main(obj=App(...))``)."""

from __future__ import annotations

import pytest
from botocore.stub import ANY
from click.testing import CliRunner
from sqlmodel import select

from tests.test_mturk import (  # noqa: F401 - fixtures
    QUALS,
    Matches,
    add_quals,
    expect_create_hit,
    launch,
    mturk_client,
    mturk_id,
    mturk_providers,
    mturk_settings,
    publish,
    requirements,
    stubber,
    submitted,
)
from turkflow.cli.main import App, main
from turkflow.db import session_scope
from turkflow.protocols.wot import sample_tasks_path
from turkflow.hits import lifecycle
from turkflow.models import (Assignment, AssignmentStatus, Batch, BatchStatus, Bonus, BonusStatus, MTurkQualification,
                             utcnow)


@pytest.fixture
def turkflow(mturk_settings, mturk_providers):  # noqa: ANN001, ANN201
    def run(*args: str, input: str | None = None):  # noqa: ANN202
        app = App(settings_=mturk_settings, providers_=mturk_providers)
        return CliRunner().invoke(main, list(args), obj=app, input=input, catch_exceptions=False)

    return run


def balance(stubber, amount: str = "10000.00") -> None:  # noqa: ANN001
    stubber.add_response("get_account_balance", {"AvailableBalance": amount}, {})


def test_check_shows_the_sandbox_balance_and_what_is_missing(turkflow, stubber):
    balance(stubber)
    result = turkflow("mturk", "check")
    assert result.exit_code == 1
    assert "MTurk sandbox (no real money): credentials work, available balance $10,000.00" in result.stdout
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]  # one line
    assert "run `turkflow mturk quals`" in result.stderr
    stubber.assert_no_pending_responses()


def test_check_reports_refused_credentials_in_one_line(turkflow, stubber):
    stubber.add_client_error("get_account_balance", service_error_code="RequestError",
                             service_message="The security token included in the request is invalid.",
                             http_status_code=400)
    result = turkflow("mturk", "check")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.startswith("error: MTurk sandbox (no real money) at "
                                    "https://mturk-requester-sandbox.us-east-1.amazonaws.com refused the credentials")
    stubber.assert_no_pending_responses()


def test_quals_creates_the_role_tests_and_the_soft_block_once(turkflow, stubber, mturk_settings):
    for purpose, name in (("role:student", "turkflow: student"), ("role:teacher", "turkflow: teacher"),
                          ("blocked", "turkflow: paused")):
        stubber.add_response("list_qualification_types", {"QualificationTypes": [], "NumResults": 0},
                             {"Query": name, "MustBeRequestable": False, "MustBeOwnedByCaller": True,
                              "MaxResults": 100})
        expected = {"Name": name, "Description": ANY, "QualificationTypeStatus": "Active", "Keywords": "turkflow"}
        if purpose.startswith("role:"):
            expected.update(Test=Matches(lambda t: t.startswith("<QuestionForm"), "the onboarding quiz"),
                            AnswerKey=Matches(lambda k: "<PercentageMapping>" in k, "its answer key"),
                            TestDurationInSeconds=1200)
        stubber.add_response("create_qualification_type",
                             {"QualificationType": {"QualificationTypeId": QUALS[purpose]}}, expected)
    first = turkflow("mturk", "quals")
    assert first.exit_code == 0, first.output
    second = turkflow("mturk", "quals")  # nothing left to create: no MTurk call
    assert second.exit_code == 0 and all(type_id in second.stdout for type_id in QUALS.values())
    with session_scope(mturk_settings.database_url) as s:
        assert {q.purpose: q.type_id for q in s.exec(select(MTurkQualification))} == QUALS
    balance(stubber)
    assert turkflow("mturk", "check").exit_code == 0
    stubber.assert_no_pending_responses()


def test_quals_adopts_a_type_mturk_already_has_after_a_database_reset(turkflow, stubber, mturk_settings):
    stubber.add_response("list_qualification_types", {"QualificationTypes": [
        {"QualificationTypeId": QUALS["role:student"], "Name": "turkflow: student"}], "NumResults": 1}, None)
    stubber.add_response("list_qualification_types", {"QualificationTypes": [
        {"QualificationTypeId": QUALS["role:teacher"], "Name": "turkflow: teacher"}], "NumResults": 1}, None)
    stubber.add_response("list_qualification_types", {"QualificationTypes": [
        {"QualificationTypeId": "3SOMEONEELSESPAUSED0000000001", "Name": "turkflow: paused, but not ours"}],
        "NumResults": 1}, None)
    stubber.add_response("create_qualification_type", {"QualificationType": {"QualificationTypeId": QUALS["blocked"]}},
                         None)
    assert turkflow("mturk", "quals").exit_code == 0
    with session_scope(mturk_settings.database_url) as s:
        assert {q.purpose: q.type_id for q in s.exec(select(MTurkQualification))} == QUALS
    stubber.assert_no_pending_responses()


def test_a_live_launch_shows_the_cost_with_fees_and_publishes_nothing_unless_confirmed(turkflow, stubber,
                                                                                      mturk_settings):
    add_quals(mturk_settings, live=True)
    args = ("batch", "launch", "--provider", "mturk", "--tasks", str(sample_tasks_path()), "-n", "2",
            "--max-turns", "4", "--live")
    refused = turkflow(*args, input="n\n")
    assert refused.exit_code == 1
    assert "LIVE marketplace" in refused.stdout
    assert "at most $2.72: $1.60 rewards + $0.64 bonuses + $0.48 fees" in refused.stdout
    assert "MTurk fee: 20% of each reward and bonus, at least $0.01 each" in refused.stdout
    with session_scope(mturk_settings.database_url) as s:
        assert s.exec(select(Batch)).all() == []
    live = [dict(r, QualificationTypeId=r["QualificationTypeId"] + "L") for r in requirements("student")]
    for n in (1, 2):
        expect_create_hit(stubber, n, "student", mturk_id("3HIT", n),
                          reqs=Matches(lambda reqs: reqs[:3] == live and len(reqs) == 6, "live requirements"))
    done = turkflow(*args, "--yes")
    assert done.exit_code == 0, done.output
    with session_scope(mturk_settings.database_url) as s:
        assert [b.live for b in s.exec(select(Batch))] == [True]
    stubber.assert_no_pending_responses()


def test_a_launch_the_budget_cannot_pay_for_is_refused_in_one_line(turkflow, stubber, mturk_settings):
    add_quals(mturk_settings)
    result = turkflow("batch", "launch", "--provider", "mturk", "--tasks", str(sample_tasks_path()), "-n", "3",
                      "--budget", "0.50")
    assert result.exit_code == 1 and "launch at most 2" in result.stderr and "Traceback" not in result.output
    with session_scope(mturk_settings.database_url) as s:
        assert s.exec(select(Batch)).all() == []
    stubber.assert_no_pending_responses()


def test_batch_expire_ends_the_hits_of_a_cancelled_batch(turkflow, stubber, mturk_settings, mturk_providers):
    batch_id, hit_ids = launch(mturk_settings, conversations=2)
    for n, hit_id in enumerate(hit_ids, 1):
        expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", n))
        publish(mturk_settings, mturk_providers, hit_id)
    assert turkflow("batch", "expire", str(batch_id)).exit_code == 1  # still active: cancel first
    with session_scope(mturk_settings.database_url) as s:
        lifecycle.set_batch_status(s, s.get(Batch, batch_id), BatchStatus.cancelled, "requester:test")
    for n in (1, 2):
        stubber.add_response("update_expiration_for_hit", {}, {"HITId": mturk_id("3HIT", n), "ExpireAt": ANY})
    result = turkflow("batch", "expire", str(batch_id))
    assert result.exit_code == 0 and "2 MTurk HITs expired" in result.stdout
    stubber.assert_no_pending_responses()


def test_spend_counts_approved_rewards_paid_bonuses_and_fees(turkflow, stubber, mturk_settings, mturk_providers):
    _, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", mturk_id("3HIT", 1))
    publish(mturk_settings, mturk_providers, hit_id)
    turn_id = submitted(mturk_settings, hit_id, mturk_id("3ASG", 1), "AWORKER1")
    assert "$0.00 spent" in turkflow("mturk", "spend").stdout and "$0.24 pending" in turkflow("mturk", "spend").stdout
    with session_scope(mturk_settings.database_url) as s:
        assignment = s.exec(select(Assignment)).one()
        assignment.status = AssignmentStatus.approved
        s.add(Bonus(turn_id=turn_id, worker_id=assignment.worker_id, assignment_id=assignment.id, amount_cents=8,
                    request_token="b", status=BonusStatus.paid, paid_at=utcnow()))
    result = turkflow("mturk", "spend", "--workers")
    assert "$0.34 spent = $0.20 rewards + $0.08 bonuses + $0.06 fees; $0.00 pending" in result.stdout
    assert "AWORKER1" in result.stdout
    stubber.assert_no_pending_responses()
