"""An annotation batch over a simulated Frames batch, in real headless Chromium: an annotator takes a turn from
the queue, sees it in its dialog, and labels it by clicks only: two acts, a slot value made of the turn's own
words, and the frame the turn refers to; the labels are stored as clicked."""

from __future__ import annotations

import random

import pytest
from sqlmodel import select

from tests.test_star_browser import join, sent
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.models import Turn
from turkflow.protocols.annotate import dialog as annotate
from turkflow.protocols.annotate.scheme import load_scheme
from turkflow.simulator import annotate as sim

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_annotator_labels_acts_a_slot_value_and_a_frame_reference_by_clicks(
        live_server, browser_context, settings, providers):
    with session_scope(settings.database_url) as s:
        frames_id, truth = sim.play_frames(s, providers.get("local"), 1, random.Random(5))
        _, hits = annotate.launch(s, frames_id, load_scheme("frames"), 1, name="labels")
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
        oldest = min(hit.id for hit in hits)  # the dialog's first turn (each queue starts at a place of its own)
    first = truth[min(truth)]
    destination = next(s["value"] for a in first["acts"] for s in a["slots"] if s["slot"] == "destination")

    page = join(browser_context, live_server, settings, "annotator")
    page.locator(f'#open-turns form[action="/queue/take/{oldest}"] button').click()
    page.wait_for_url("**/annotate/turn/*")
    assert page.inner_text("#target").endswith(f"to {destination}.")
    page.locator("#acts").get_by_text("greeting", exact=True).click()
    page.click("#add-act")
    page.locator("#acts").get_by_text("inform", exact=True).click()
    page.locator("#slots").get_by_text("destination", exact=True).click()
    for word in destination.split():
        page.locator("#words").get_by_text(word, exact=True).click()
    page.click("#add-act")
    page.locator("#relations").get_by_text("refers", exact=True).click()
    page.locator("#frame-numbers").get_by_text("1", exact=True).click()
    page.click("#add-frame")
    assert page.inner_text("#summary") == f"greeting; inform(destination={destination}); ref=[1]"
    page.click("#submit-turn")
    sent(page)

    with session_scope(settings.database_url) as s:
        (labelled,) = s.exec(select(Turn).where(Turn.role == "annotator", Turn.status == "submitted")).all()
        assert labelled.answers["labels"] == {
            "acts": [{"act": "greeting", "slots": []},
                     {"act": "inform", "slots": [{"slot": "destination", "value": destination}]}],
            "frames": [{"relation": "refers", "frame": 1}]}
