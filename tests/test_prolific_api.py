"""Prolific's API as turkflow calls it, against the fake Prolific that holds every request and response to
Prolific's OpenAPI description."""

from __future__ import annotations

import ast
import socket
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
import requests
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from turkflow.hits.prolific import api

from tests.fake_prolific import FakeProlific, Refused

pytest_plugins = ["tests.fake_prolific"]

CODE = "TURN-DONE"
INTERNAL_NAME = "turkflow abc batch 7 student"


@pytest.fixture
def prolific(fake_prolific: FakeProlific) -> api.ProlificClient:
    return api.ProlificClient(fake_prolific.token, base_url=fake_prolific.url)


def draft(client: api.ProlificClient, places: int = 3, **overrides: object) -> dict:
    values = dict(name="Write the next message of a how-to chat", description="One message of a chat.",
                  page_url="https://turkflow.example.org/prolific/turn?b=7&r=student", completion_code=CODE,
                  reward_cents=20, places=places, estimated_minutes=2, internal_name=INTERNAL_NAME)
    values.update(overrides)
    return api.create_study(client, api.study_body(**values))


def published(client: api.ProlificClient, places: int = 3) -> str:
    study_id = draft(client, places)["id"]
    api.transition_study(client, study_id, "PUBLISH")
    return study_id


def finished(fake: FakeProlific, study_id: str, participant_id: str) -> str:
    submission_id = fake.start(study_id, participant_id)
    fake.complete(submission_id, CODE)
    return submission_id


# ---- the account and the contract check itself --------------------------------------------------------


def test_the_token_is_sent_and_a_wrong_one_is_refused_with_prolifics_words(fake_prolific, prolific):
    assert api.get_me(prolific)["email"] == fake_prolific.user["email"]
    with pytest.raises(api.ProlificError) as refused:
        api.get_me(api.ProlificClient("wrong", base_url=fake_prolific.url))
    assert refused.value.prolific_status == 401 and "Invalid token" in str(refused.value)


def test_a_client_needs_a_token():
    with pytest.raises(ValueError, match="token"):
        api.ProlificClient("")


def test_a_request_without_the_authorization_header_breaks_the_contract(fake_prolific):
    assert requests.get(f"{fake_prolific.url}/api/v1/users/me/", timeout=5).status_code == 401
    assert any("Security" in v for v in fake_prolific.take_violations())


def test_a_study_body_the_spec_refuses_is_caught_before_prolific_would_take_it(fake_prolific, prolific):
    with pytest.raises(api.ProlificError) as refused:
        api.create_study(prolific, {**api.study_body(
            name="x", description="y", page_url="https://t.example.org/p", completion_code=CODE,
            reward_cents=20, places=1, estimated_minutes=2, internal_name="t"), "reward": "twenty cents"})
    assert refused.value.prolific_status == 400 and "reward" in refused.value.detail
    [violation] = fake_prolific.take_violations()
    assert violation.startswith("POST /api/v1/studies/ request") and "reward" in violation
    assert not fake_prolific.studies


def test_a_response_the_spec_refuses_is_caught_too(fake_prolific, prolific, monkeypatch):
    monkeypatch.setattr(fake_prolific, "_get_me", lambda request: (200, {"id": 7}))
    api.get_me(prolific)
    [violation] = fake_prolific.take_violations()
    assert "response 200" in violation and "email" in violation and "id" in violation


def test_no_answer_at_all_is_a_prolific_error_with_status_zero():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(api.ProlificError) as failed:
        api.get_me(api.ProlificClient("t", base_url=f"http://127.0.0.1:{port}", connect_timeout=1))
    assert failed.value.prolific_status == 0 and "no answer" in str(failed.value)
    assert failed.value.sent is False  # nothing reached Prolific, so nothing can have happened there


def test_an_answer_too_slow_may_still_have_had_its_effect(fake_prolific, monkeypatch):
    def slow(request):  # noqa: ANN001, ANN202
        time.sleep(0.5)
        return 200, dict(fake_prolific.user)

    monkeypatch.setattr(fake_prolific, "_get_me", slow)
    with pytest.raises(api.ProlificError) as failed:
        api.get_me(api.ProlificClient(fake_prolific.token, base_url=fake_prolific.url, read_timeout=0.1))
    assert failed.value.prolific_status == 0 and failed.value.sent is True


def test_the_prolific_folder_imports_no_framework_and_its_api_only_turkflows_errors():
    folder = Path(api.__file__).parent
    for module in folder.glob("*.py"):
        imported = _imports(module)
        assert not {"flask", "celery", "click", "workers", "turkflow.pipeline"} & imported, module.name
    assert {name for name in _imports(folder / "api.py") if name.startswith("turkflow")} <= {
        "turkflow", "turkflow.errors"}


def _imports(module: Path) -> set[str]:
    """Every module a file imports, with each of its parent packages."""
    found = set()
    for node in ast.walk(ast.parse(module.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        for name in names:
            parts = name.split(".")
            found.update(".".join(parts[:n]) for n in range(1, len(parts) + 1))
    return found


def test_workspaces_and_their_balance(fake_prolific, prolific):
    [workspace] = api.list_workspaces(prolific)
    assert workspace["id"] == fake_prolific.workspace_id
    balance = api.get_workspace_balance(prolific, workspace["id"])
    assert balance["available_balance"] == fake_prolific.balance_cents and balance["currency_code"] == "GBP"


# ---- studies -------------------------------------------------------------------------------------------


def test_a_study_lets_one_participant_submit_once_per_turn_and_tells_our_page_who_came():
    body = api.study_body(name="n", description="d", page_url="https://t.example.org/turn?b=7",
                          completion_code=CODE, reward_cents=20, places=4, estimated_minutes=2,
                          internal_name=INTERNAL_NAME, allow_groups=["g-student"], block_groups=["g-blocked"],
                          maximum_minutes=15, project="p1")
    assert body["external_study_url"] == ("https://t.example.org/turn?b=7&PROLIFIC_PID={{%PROLIFIC_PID%}}"
                                          "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}")
    assert body["prolific_id_option"] == "url_parameters"
    assert body["submissions_config"] == {"max_submissions_per_participant": -1}
    assert body["filters"] == [{"filter_id": "participant_group_allowlist", "selected_values": ["g-student"]},
                               {"filter_id": "participant_group_blocklist", "selected_values": ["g-blocked"]}]
    assert body["completion_codes"] == [{"code": CODE, "code_type": "COMPLETED",
                                         "actions": [{"action": "MANUALLY_REVIEW"}]}]
    assert (body["reward"], body["total_available_places"], body["maximum_allowed_time"]) == (20, 4, 15)
    assert api.study_url("https://t.example.org/turn").startswith("https://t.example.org/turn?PROLIFIC_PID=")
    assert api.completion_url(CODE) == "https://app.prolific.com/submissions/complete?cc=TURN-DONE"


def test_a_draft_is_created_found_by_its_internal_name_and_published(fake_prolific, prolific):
    created = draft(prolific)
    assert created["status"] == "UNPUBLISHED"
    found = [s["id"] for s in api.list_studies(prolific) if s["internal_name"] == INTERNAL_NAME]
    assert found == [created["id"]]
    assert api.transition_study(prolific, created["id"], "PUBLISH")["status"] == "PUBLISHING"
    assert api.get_study(prolific, created["id"])["status"] == "ACTIVE"


def test_a_study_is_publishing_for_a_moment_and_a_scheduled_draft_waits(fake_prolific, prolific):
    """Prolific's study statuses beside the transition table's: PUBLISHING (moves refused meanwhile) and
    SCHEDULED, which a person sets in Prolific's app."""
    fake_prolific.publishing_requests = 2
    study_id = draft(prolific)["id"]
    assert api.transition_study(prolific, study_id, "PUBLISH")["status"] == "PUBLISHING"
    with pytest.raises(api.ProlificError, match="cannot PAUSE while it is PUBLISHING"):
        api.transition_study(prolific, study_id, "PAUSE")
    with pytest.raises(Refused, match="not taking participants"):
        fake_prolific.start(study_id, "too-early")
    assert api.get_study(prolific, study_id)["status"] == "PUBLISHING"
    assert api.get_study(prolific, study_id)["status"] == "ACTIVE"
    later = draft(prolific)["id"]
    scheduled = prolific.call("POST", f"/api/v1/studies/{later}/transition/",
                              json={"action": "SCHEDULE_PUBLISH", "publish_at": "2030-01-01T09:00:00Z"})
    assert scheduled["status"] == "SCHEDULED"
    with pytest.raises(api.ProlificError, match="cannot PUBLISH while it is SCHEDULED"):
        api.transition_study(prolific, later, "PUBLISH")


def test_a_maximum_time_of_a_day_or_more_is_refused(prolific):
    with pytest.raises(api.ProlificError, match="less than 24 hours"):
        draft(prolific, maximum_minutes=24 * 60)
    assert draft(prolific, maximum_minutes=24 * 60 - 1)["maximum_allowed_time"] == 1439


def test_prolific_pauses_a_study_that_underpays_at_its_median_completion_time(fake_prolific, prolific):
    """20p for an estimated 2 minutes is GBP 6 an hour; at a median of 5 minutes it is GBP 2.40, and Prolific
    pauses the study and asks for adjustment payments."""
    study_id = published(prolific, places=6)
    for number in range(3):
        submission_id = fake_prolific.start(study_id, f"p{number}")
        fake_prolific.complete(submission_id, CODE, minutes=5)
    assert fake_prolific.median_minutes(study_id) == pytest.approx(5, abs=0.01)
    assert api.get_study(prolific, study_id)["status"] == "PAUSED"
    assert fake_prolific.studies[study_id].paused_by_prolific
    quick = published(prolific, places=6)
    for number in range(3):
        fake_prolific.complete(fake_prolific.start(quick, f"q{number}"), CODE, minutes=1.5)
    assert api.get_study(prolific, quick)["status"] == "ACTIVE"


def test_a_study_pauses_resumes_and_stops_and_refuses_other_moves(prolific):
    study_id = published(prolific)
    assert api.transition_study(prolific, study_id, "PAUSE")["status"] == "PAUSED"
    with pytest.raises(api.ProlificError, match="cannot PAUSE while it is PAUSED"):
        api.transition_study(prolific, study_id, "PAUSE")
    assert api.transition_study(prolific, study_id, "START")["status"] == "ACTIVE"
    assert api.transition_study(prolific, study_id, "STOP")["status"] == "COMPLETED"
    with pytest.raises(ValueError, match="PUBLISH, PAUSE, START, STOP"):
        api.transition_study(prolific, study_id, "EXPLODE")


def test_a_published_study_only_grows_its_places(fake_prolific, prolific):
    study_id = published(prolific, places=2)
    assert api.update_study(prolific, study_id, {"total_available_places": 5})["total_available_places"] == 5
    with pytest.raises(api.ProlificError, match="only be increased") as shrink:
        api.update_study(prolific, study_id, {"total_available_places": 4})
    assert shrink.value.prolific_status == 400
    with pytest.raises(api.ProlificError, match="reward: This field cannot be changed"):
        api.update_study(prolific, study_id, {"reward": 30})


def test_a_study_awaiting_review_takes_new_participants_only_once_started(fake_prolific, prolific):
    study_id = published(prolific, places=1)
    fake_prolific.fill_places(study_id, CODE)
    assert api.update_study(prolific, study_id, {"total_available_places": 2})["status"] == "AWAITING REVIEW"
    with pytest.raises(Refused, match="not taking participants"):
        fake_prolific.start(study_id, "next")
    assert api.transition_study(prolific, study_id, "START")["status"] == "ACTIVE"
    assert fake_prolific.start(study_id, "next")


def test_a_study_waits_for_review_when_its_places_run_out_and_grows_active_again(fake_prolific, prolific):
    study_id = published(prolific, places=2)
    done = fake_prolific.fill_places(study_id, CODE)
    assert len(done) == 2 and api.get_study(prolific, study_id)["status"] == "AWAITING REVIEW"
    with pytest.raises(Refused, match="not taking participants"):
        fake_prolific.start(study_id, "late-participant")
    api.bulk_approve_submissions(prolific, done)
    assert api.get_study(prolific, study_id)["status"] == "COMPLETED"
    assert api.update_study(prolific, study_id, {"total_available_places": 3})["status"] == "ACTIVE"
    assert fake_prolific.start(study_id, "late-participant")


def test_returned_and_timed_out_submissions_give_their_places_back(fake_prolific, prolific):
    study_id = published(prolific, places=2)
    first, second = fake_prolific.start(study_id, "p1"), fake_prolific.reserve(study_id, "p2")
    assert fake_prolific.places_free(study_id) == 0
    fake_prolific.return_submission(first)
    fake_prolific.time_out(second)
    assert fake_prolific.places_free(study_id) == 2
    assert {s["status"] for s in api.list_submissions(prolific, study_id)} == {"RETURNED", "TIMED-OUT"}


def test_a_test_study_goes_to_test_participants_only_once_one_exists(fake_prolific, prolific):
    study_id = draft(prolific)["id"]
    with pytest.raises(api.ProlificError, match="test participant"):
        api.create_test_study(prolific, study_id)
    participant_id = api.create_test_participant(prolific, "tester@example.org")
    assert participant_id in fake_prolific.test_participants
    test = api.create_test_study(prolific, study_id)
    assert test["study_id"] != study_id and test["study_url"].startswith("https://")
    with pytest.raises(Refused, match="test participant only"):
        fake_prolific.start(test["study_id"], "a-real-participant")


def test_a_researcher_has_one_test_participant_whose_pay_is_charged_then_refunded_within_a_day(
        fake_prolific, prolific):
    """Prolific's test studies: one test participant per researcher account; what they are paid comes out
    of the workspace's balance and is refunded within 24 hours."""
    tester = api.create_test_participant(prolific, "tester@example.org")
    with pytest.raises(api.ProlificError, match="one per researcher account") as second:
        api.create_test_participant(prolific, "second@example.org")
    assert second.value.prolific_status == 400
    test_id = api.create_test_study(prolific, draft(prolific)["id"])["study_id"]
    before = fake_prolific.balance_cents
    submission_id = fake_prolific.start(test_id, tester)
    fake_prolific.complete(submission_id, CODE)
    api.transition_submission(prolific, submission_id, "APPROVE")
    assert fake_prolific.balance_cents == before - 20
    assert fake_prolific.refund_test_charges(now=time.time()) == 0  # not a day yet
    assert fake_prolific.refund_test_charges(now=time.time() + 24 * 3600) == 20
    assert fake_prolific.balance_cents == before


def test_test_studies_are_a_feature_prolific_enables_per_workspace(fake_prolific, prolific):
    fake_prolific.test_studies_enabled = False
    with pytest.raises(api.ProlificError, match="not enabled for this workspace") as refused:
        api.create_test_participant(prolific, "tester@example.org")
    assert refused.value.prolific_status == 403


# ---- submissions ---------------------------------------------------------------------------------------


def test_submissions_are_listed_page_by_page_until_a_short_page(fake_prolific, prolific):
    study_id = published(prolific, places=5)
    made = [finished(fake_prolific, study_id, f"p{n}") for n in range(5)]
    other = published(prolific, places=1)
    finished(fake_prolific, other, "p-other")
    listed = list(api.list_submissions(prolific, study_id, page_size=2))
    assert [s["id"] for s in listed] == made
    assert sum(1 for method, path in fake_prolific.requests if path == "/api/v1/submissions/") == 3
    assert {s["participant_id"] for s in listed} == {f"p{n}" for n in range(5)}


def test_a_submission_in_full_shows_its_participant_and_the_code_it_came_back_with(fake_prolific, prolific):
    study_id = published(prolific)
    submission_id = finished(fake_prolific, study_id, "p1")
    found = api.get_submission(prolific, submission_id)
    assert (found["participant"], found["status"], found["entered_code"]) == ("p1", "AWAITING REVIEW", CODE)
    assert found["bonus_payments"] == []


def test_approving_twice_is_harmless_but_work_in_progress_cannot_be_approved(fake_prolific, prolific):
    study_id = published(prolific)
    submission_id = finished(fake_prolific, study_id, "p1")
    assert api.transition_submission(prolific, submission_id, "APPROVE")["status"] == "APPROVED"
    assert api.transition_submission(prolific, submission_id, "APPROVE")["status"] == "APPROVED"
    in_progress = fake_prolific.start(study_id, "p2")
    with pytest.raises(api.ProlificError, match="ACTIVE cannot be approved"):
        api.transition_submission(prolific, in_progress, "APPROVE")


def test_a_rejection_needs_prolifics_long_message_and_a_category(fake_prolific, prolific):
    study_id = published(prolific)
    submission_id = finished(fake_prolific, study_id, "p1")
    with pytest.raises(api.ProlificError, match="100"):
        api.transition_submission(prolific, submission_id, "REJECT", message="no",
                                  rejection_category="LOW_EFFORT")
    rejected = api.transition_submission(prolific, submission_id, "REJECT", message="x" * 100,
                                         rejection_category="LOW_EFFORT")
    assert rejected["status"] == "REJECTED"


def test_bulk_approval_sends_prolifics_recommended_chunks(fake_prolific, prolific, monkeypatch):
    monkeypatch.setattr(api, "MAX_APPROVALS_PER_REQUEST", 2)
    study_id = published(prolific, places=3)
    made = [finished(fake_prolific, study_id, f"p{n}") for n in range(3)]
    api.bulk_approve_submissions(prolific, made)
    assert {fake_prolific.submissions[s].status for s in made} == {"APPROVED"}
    assert fake_prolific.requests.count(("POST", "/api/v1/submissions/bulk-approve/")) == 2


def test_participants_of_a_study_can_be_messaged_through_it(fake_prolific, prolific):
    study_id = published(prolific)
    finished(fake_prolific, study_id, "p1")
    api.send_message(prolific, study_id, ["p1"], "Thank you for your turns.")
    assert fake_prolific.messages == [(study_id, "p1", "Thank you for your turns.")]
    with pytest.raises(api.ProlificError, match="Not participants of this study: p2"):
        api.send_message(prolific, study_id, ["p2"], "Hello")


# ---- bonuses -------------------------------------------------------------------------------------------


def test_the_bonus_csv_writes_decimal_amounts_from_cents():
    assert api.bonus_csv({"s1": 8, "s2": 1205, "p3": 100}) == "s1,0.08\ns2,12.05\np3,1.00\n"
    with pytest.raises(ValueError, match="positive"):
        api.bonus_csv({"s1": 0})


def test_a_bonus_is_set_up_then_paid_exactly_once(fake_prolific, prolific):
    fake_prolific.fee_percent = 50  # a made-up rate, to see fees counted; not Prolific's
    study_id = published(prolific)
    submission_id = finished(fake_prolific, study_id, "p1")
    bulk = api.set_up_bonus_payments(prolific, study_id, {submission_id: 8})
    assert (bulk["amount"], bulk["fees"], bulk["total_amount"]) == (8, 4, 12)
    assert fake_prolific.paid(submission_id) == []  # setting up pays nothing
    api.pay_bonus_payments(prolific, bulk["id"])
    assert fake_prolific.paid(submission_id) == [8]
    assert api.get_submission(prolific, submission_id)["bonus_payments"] == [8]
    balance = api.get_workspace_balance(prolific, fake_prolific.workspace_id)
    assert balance["available_balance"] == 100_000 - 12


def test_paying_the_same_bulk_bonus_twice_pays_twice_as_the_spec_warns(fake_prolific, prolific):
    study_id = published(prolific)
    submission_id = finished(fake_prolific, study_id, "p1")
    bulk = api.set_up_bonus_payments(prolific, study_id, {submission_id: 8})
    api.pay_bonus_payments(prolific, bulk["id"])
    api.pay_bonus_payments(prolific, bulk["id"])
    assert fake_prolific.paid(submission_id) == [8, 8]


def test_a_payment_shows_on_the_submission_only_once_prolific_has_made_it(fake_prolific, prolific):
    fake_prolific.pay_later = True
    study_id = published(prolific)
    submission_id = finished(fake_prolific, study_id, "p1")
    api.pay_bonus_payments(prolific, api.set_up_bonus_payments(prolific, study_id, {submission_id: 8})["id"])
    assert api.get_submission(prolific, submission_id)["bonus_payments"] == []
    fake_prolific.settle_payments()
    assert api.get_submission(prolific, submission_id)["bonus_payments"] == [8]


def test_a_bonus_may_name_the_participant_and_must_name_someone_who_took_part(fake_prolific, prolific):
    study_id = published(prolific)
    submission_id = finished(fake_prolific, study_id, "p1")
    api.pay_bonus_payments(prolific, api.set_up_bonus_payments(prolific, study_id, {"p1": 150})["id"])
    assert fake_prolific.paid(submission_id) == [150]
    with pytest.raises(api.ProlificError, match="did not take part.*stranger") as refused:
        api.set_up_bonus_payments(prolific, study_id, {"stranger": 8})
    assert refused.value.prolific_status == 400
    with pytest.raises(ValueError, match="between 1 and 200"):
        api.set_up_bonus_payments(prolific, study_id, {})


def test_paying_a_bulk_id_prolific_never_set_up_is_refused(prolific):
    with pytest.raises(api.ProlificError) as refused:
        api.pay_bonus_payments(prolific, "bulk-unknown")
    assert refused.value.prolific_status == 404


# ---- participant groups --------------------------------------------------------------------------------


def test_participants_are_added_to_and_removed_from_a_group(fake_prolific, prolific):
    group = api.create_participant_group(prolific, fake_prolific.workspace_id, "turkflow blocked", "kept out",
                                         participant_ids=["p0"])
    assert api.add_to_participant_group(prolific, group["id"], ["p1", "p2", "p1"]) == ["p0", "p1", "p2"]
    assert api.remove_from_participant_group(prolific, group["id"], ["p0", "not-a-member"]) == ["p1", "p2"]
    assert api.list_participant_group_members(prolific, group["id"]) == ["p1", "p2"]
    [listed] = api.list_participant_groups(prolific, fake_prolific.workspace_id)
    assert (listed["id"], listed["name"], listed["participant_count"]) == (group["id"], "turkflow blocked", 2)


def test_a_blocklist_group_keeps_its_members_out_of_a_published_study_at_once(fake_prolific, prolific):
    blocked = api.create_participant_group(prolific, fake_prolific.workspace_id, "blocked")["id"]
    students = api.create_participant_group(prolific, fake_prolific.workspace_id, "students",
                                            participant_ids=["p1"])
    study_id = draft(prolific, allow_groups=[students["id"]], block_groups=[blocked])["id"]
    api.transition_study(prolific, study_id, "PUBLISH")
    with pytest.raises(Refused, match="none of the study's allowed groups"):
        fake_prolific.start(study_id, "p2")
    api.add_to_participant_group(prolific, blocked, ["p1"])
    with pytest.raises(Refused, match="a group the study blocks"):
        fake_prolific.start(study_id, "p1")
    api.remove_from_participant_group(prolific, blocked, ["p1"])
    assert fake_prolific.start(study_id, "p1")


# ---- webhooks ------------------------------------------------------------------------------------------


def test_a_subscription_needs_the_workspaces_secret_first(fake_prolific, prolific):
    workspace, event = fake_prolific.workspace_id, "submission.status.change"
    target = "https://turkflow.example.org/prolific/events"
    with pytest.raises(api.ProlificError, match="secret"):
        api.create_webhook_subscription(prolific, workspace, event, target)
    secret = api.create_webhook_secret(prolific, workspace)
    assert [s["value"] for s in api.list_webhook_secrets(prolific, workspace)] == [secret]
    created, hook_secret = api.create_webhook_subscription(prolific, workspace, event, target)
    assert (created["event_type"], created["target_url"], created["is_enabled"]) == (event, target, False)
    assert hook_secret == fake_prolific.hook_secrets[created["id"]]  # the X-Hook-Secret response header
    with pytest.raises(api.ProlificError, match="not the secret"):
        api.confirm_webhook_subscription(prolific, created["id"], "guessed")
    assert api.confirm_webhook_subscription(prolific, created["id"], hook_secret)["is_enabled"] is True
    assert [s["id"] for s in api.list_webhook_subscriptions(prolific, workspace)] == [created["id"]]
    api.delete_webhook_subscription(prolific, created["id"])
    assert api.list_webhook_subscriptions(prolific, workspace) == []


@pytest.mark.parametrize("prolific_reads", ["body", "path"])
def test_a_subscription_is_confirmed_whichever_way_prolific_reads_the_hook_secret(
        fake_prolific, prolific, prolific_reads):
    """Prolific's API description takes the X-Hook-Secret in the body of a POST to the subscription; its
    guide puts it where the subscription's id goes. Confirming works with a Prolific that reads either."""
    fake_prolific.hook_confirmation = prolific_reads
    workspace = fake_prolific.workspace_id
    api.create_webhook_secret(prolific, workspace)
    created, hook_secret = api.create_webhook_subscription(prolific, workspace, "submission.status.change",
                                                           "https://turkflow.example.org/prolific/webhook")
    assert api.confirm_webhook_subscription(prolific, created["id"], hook_secret)["is_enabled"] is True
    assert fake_prolific.subscriptions[created["id"]]["is_enabled"]


class Receiver:
    """Our end of a webhook: answers 204 to what ``verify_webhook`` accepts, 401 otherwise."""

    def __init__(self, secret: str):
        self.secret, self.accepted = secret, []
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.port}/prolific/events"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def _wsgi(self, environ: dict, start_response):  # noqa: ANN001, ANN202
        request = Request(environ)
        try:
            api.verify_webhook(self.secret, request.headers, request.get_data())
        except api.InvalidSignature as exc:
            return Response(str(exc), status=401)(environ, start_response)
        self.accepted.append(request.get_json())
        return Response(status=204)(environ, start_response)


@pytest.fixture
def receiver(fake_prolific: FakeProlific, prolific: api.ProlificClient) -> Iterator[Receiver]:
    ours = Receiver(api.create_webhook_secret(prolific, fake_prolific.workspace_id))
    ours._thread.start()
    yield ours
    ours._server.shutdown()
    ours._server.server_close()


def test_a_webhook_prolific_signed_is_accepted(fake_prolific, prolific, receiver):
    study_id = published(prolific)
    event = fake_prolific.submission_event(finished(fake_prolific, study_id, "p1"))
    assert fake_prolific.send_webhook(receiver.url, event).status_code == 204
    assert receiver.accepted == [event] and event["status"] == "AWAITING REVIEW"


def test_a_webhook_signed_with_another_secret_or_tampered_with_is_refused(fake_prolific, receiver):
    event = {"event_type": "submission.status.change", "resource_id": "s1", "status": "APPROVED"}
    answer = fake_prolific.send_webhook(receiver.url, event, secret="not-our-secret")
    assert answer.status_code == 401 and "does not match" in answer.text
    assert fake_prolific.send_webhook(receiver.url, event, signature="AAAA").status_code == 401
    assert receiver.accepted == []


def test_a_stale_or_unsigned_webhook_is_refused():
    body, secret = b'{"status": "APPROVED"}', "s3cret"
    signed_at = 1_800_000_000

    def headers(at: int) -> dict[str, str]:
        return {api.TIMESTAMP_HEADER: str(at), api.SIGNATURE_HEADER: api.sign_webhook(secret, str(at), body)}

    api.verify_webhook(secret, headers(signed_at), body, now=signed_at + 299)
    with pytest.raises(api.InvalidSignature, match="more than 300s"):
        api.verify_webhook(secret, headers(signed_at), body, now=signed_at + 301)
    with pytest.raises(api.InvalidSignature, match="more than 300s"):
        api.verify_webhook(secret, headers(signed_at + 3600), body, now=signed_at)
    with pytest.raises(api.InvalidSignature, match="lacks"):
        api.verify_webhook(secret, {api.TIMESTAMP_HEADER: str(signed_at)}, body, now=signed_at)
    with pytest.raises(api.InvalidSignature, match="not a UNIX time"):
        api.verify_webhook(secret, {**headers(signed_at), api.TIMESTAMP_HEADER: "yesterday"}, body)
    with pytest.raises(api.InvalidSignature, match="does not match"):
        api.verify_webhook(secret, headers(signed_at), body + b" ", now=signed_at)
    api.verify_webhook(secret, headers(int(time.time())), body)
