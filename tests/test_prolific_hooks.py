"""Prolific's webhooks as Prolific documents them ("Monitoring study progress", the hooks reference),
against the fake Prolific: a subscription is confirmed through the API with the ``X-Hook-Secret`` its
creation returns as a header, nothing posted to our URL confirms anything or makes us call Prolific, and an
event delivered again inside the signature's time window (same ``X-Event-ID``) is dropped."""

from __future__ import annotations

import time
import uuid

from click.testing import CliRunner

from turkflow.cli.main import App, main
from turkflow.hits.prolific import api

from tests.fake_prolific import FakeProlific
from tests.test_prolific_web import arrives, assignment, launch, post_webhook, settings, study_of  # noqa: F401

pytest_plugins = ["tests.fake_prolific"]


def test_the_webhook_command_leaves_an_enabled_subscription_by_prolifics_documented_flow(
        settings, fake_prolific: FakeProlific):
    """Fails if the fake stops returning X-Hook-Secret with a new subscription as Prolific does, or if
    turkflow stops confirming with it: the two cannot drift apart unnoticed again."""
    https = settings.model_copy(update={"public_url": "https://turkflow.example.org"})
    result = CliRunner().invoke(main, ["prolific", "webhook"], obj=App(settings_=https), catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    [subscription] = fake_prolific.subscriptions.values()
    assert subscription["is_enabled"] and subscription["target_url"] == "https://turkflow.example.org/prolific/webhook"
    assert f"subscription {subscription['id']}: submission.status.change to " in result.stdout
    assert "(enabled)" in result.stdout
    assert ("POST", f"/api/v1/hooks/subscriptions/{subscription['id']}/") in fake_prolific.requests


def test_an_unsigned_post_with_a_hook_secret_never_makes_us_call_prolific(settings, client, fake_prolific):
    asked = len(fake_prolific.requests)
    for _ in range(3):
        answer = client.post("/prolific/webhook", headers={api.HOOK_SECRET_HEADER: "anything"})
        assert answer.status_code == 403
    assert len(fake_prolific.requests) == asked


def test_an_event_delivered_again_inside_the_window_is_dropped(settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers)
    first, _, _ = arrives(client, fake_prolific, study_of(settings, batch_id, "student"), "p1")
    fake_prolific.return_submission(first)
    event = fake_prolific.submission_event(first)
    sent_at, event_id = int(time.time()), uuid.uuid4().hex  # Prolific's event ids are globally unique
    applied = post_webhook(client, fake_prolific, event, timestamp=sent_at, event_id=event_id)
    assert applied.status_code == 204
    assert assignment(settings, first).status == "abandoned"
    # the same event again, even re-signed a second later: dropped by its X-Event-ID
    again = post_webhook(client, fake_prolific, event, timestamp=sent_at + 1, event_id=event_id)
    assert again.status_code == 200 and "delivered already" in again.get_json()["ignored"]
    # the very same signed request with the event id stripped: dropped by its signature
    bare = post_webhook(client, fake_prolific, event, timestamp=sent_at)
    assert bare.status_code == 200


def test_spend_shows_the_fees_prolific_charged_on_bonuses_beside_the_assumed_ones(
        settings, providers, client, fake_prolific):
    """Prolific's bonus set-up says what it charges; when that is not what turkflow assumes, spend says both."""
    from tests.test_prolific_web import bonus_on_a_stored_turn
    from turkflow import pipeline

    fake_prolific.fee_percent = 40
    bonus_id, _ = bonus_on_a_stored_turn(settings, providers, client, fake_prolific)
    assert pipeline.pay_bonus(settings, providers, bonus_id)
    spent = CliRunner().invoke(main, ["prolific", "spend"], obj=App(settings_=settings, providers_=providers),
                               catch_exceptions=False)
    assert spent.exit_code == 0, spent.stderr
    assert "Prolific charged $0.03 in fees and VAT on $0.08 of bonuses; turkflow counts $0.00" in spent.stdout
