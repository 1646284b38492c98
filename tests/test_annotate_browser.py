"""An annotation batch over a simulated Frames batch, in real headless Chromium: an annotator takes a turn from
the queue, sees it in its dialog, and labels it by clicks only: two acts, a slot value made of the turn's own
words, and the frame the turn refers to; the labels are stored as clicked."""

from __future__ import annotations

import random

import pytest
from sqlmodel import select

from tests.test_star_browser import join, sent
from tests.test_accessibility import serious_violations
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
    assert page.inner_text("#turn-pay").startswith("Pays $")  # what labelling the turn pays, as every turn page says
    assert "You have earned $0.00 so far" in page.inner_text("#turn-pay")
    assert serious_violations(page) == []  # the annotator's page, for a screen reader (axe-core)
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


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_annotator_searches_a_listed_value_among_the_databases_values_and_the_queue_speaks_of_labels(
        live_server, browser_context, settings, providers):
    with session_scope(settings.database_url) as s:
        frames_id, truth = sim.play_frames(s, providers.get("local"), 1, random.Random(5))
        _, hits = annotate.launch(s, frames_id, load_scheme("frames"), 1, name="labels")
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
        oldest = min(hit.id for hit in hits)
    destination = next(s["value"] for a in truth[min(truth)]["acts"] for s in a["slots"]
                       if s["slot"] == "destination")

    page = join(browser_context, live_server, settings, "annotator")
    queue = page.inner_text("main")
    assert "Waiting for an annotator" in queue and "label" in queue
    assert "teacher" not in queue and "first message" not in queue
    page.locator(f'#open-turns form[action="/queue/take/{oldest}"] button').click()
    page.wait_for_url("**/annotate/turn/*")
    assert page.locator("select").count() == 0  # no list to scroll
    page.locator("#acts").get_by_text("inform", exact=True).click()
    page.locator("#slots").get_by_text("destination", exact=True).click()
    box = page.locator("#listed-value")
    assert box.get_attribute("list") == "values-destination"
    offered = page.eval_on_selector_all("#values-destination option", "os => os.map(o => o.value)")
    assert destination in offered and len(offered) == len(set(offered)) > 1
    typed = destination[:3]
    matching = [v for v in offered if typed.lower() in v.lower()]
    assert destination in matching and len(matching) < len(offered)  # typing narrows what is offered

    box.fill("Nowhere-on-the-list")
    page.click("#add-act")
    assert "value: pick the value from the words of the turn or the listed values" in page.inner_text(
        "#error-summary")
    page.locator("#acts").get_by_text("inform", exact=True).click()
    page.locator("#slots").get_by_text("destination", exact=True).click()
    page.locator("#listed-value").fill(destination)
    page.click("#add-act")
    assert page.inner_text("#summary") == f"inform(destination={destination})"
