"""Annotation batches (issue 26, item 1): the Frames scheme and a requester's scheme file, labels made only of
clicks, agreement per label, the queue giving each turn to different annotators, the monitor blocking an
annotator who disagrees with the majority, a person's decision and gold, and the exports that read the
labels (Frames' own JSON, SGD's acts from annotation only)."""

from __future__ import annotations

import json
import random

import pytest
from sqlmodel import select

from tests.test_dashboard import csrf_token, sign_in
from tests.test_star_dialog import command
from turkflow import invites, pipeline
from turkflow.dataset.sgd import export_sgd
from turkflow.db import session_scope
from turkflow.errors import Conflict, InvalidDocument, InvalidInput
from turkflow.hits import lifecycle
from turkflow.models import Hit, JudgedSignal, Task, Turn, TurnStatus, Worker, WorkerStatus
from turkflow.protocols.annotate import agreement, results
from turkflow.protocols.annotate import dialog as annotate
from turkflow.protocols.annotate.labels import collect, label_item, summary
from turkflow.protocols.annotate.scheme import load_scheme
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.quality.monitor import Policy
from turkflow.requesters import create_requester
from turkflow.simulator import annotate as sim

FRAMES_SCHEME = load_scheme("frames")
GREETING = {"acts": [{"act": "greeting", "slots": []}], "frames": []}


# ---- schemes and labels (pure) ----------------------------------------------------------------------------


def test_the_frames_scheme_holds_the_papers_acts_slot_types_and_frame_relations():
    assert len(FRAMES_SCHEME.acts) == 20 and FRAMES_SCHEME.frames
    assert {"switch_frame", "request_compare", "no_result", "hearmore", "canthelp"} <= set(FRAMES_SCHEME.acts)
    assert {"count", "ref_anaphora", "impl_anaphora", "intent", "action", "vicinity"} <= set(FRAMES_SCHEME.slots)
    assert [a.name for a in FRAMES_SCHEME.acts_for("user")].count("offer") == 0  # offer is the wizard's
    assert FRAMES_SCHEME.slots["intent"].values == ("book",)


@pytest.mark.parametrize("text, field", [
    ("name: mine\nacts: [{name: Inform}]\n", "acts[0].name"),
    ("name: mine\nacts: [{name: inform}, {name: inform}]\n", "acts[1].name"),
    ("name: mine\nacts: [{name: inform, colour: red}]\n", "acts[0].colour"),
    ("name: mine\nacts: []\n", "acts"),
    ("name: mine\nacts: [{name: inform}]\nframes: maybe\n", "frames"),
])
def test_a_requester_scheme_file_that_does_not_fit_is_refused_naming_the_field(tmp_path, text, field):
    path = tmp_path / "scheme.yaml"
    path.write_text(text)
    with pytest.raises(InvalidDocument) as refused:
        load_scheme(str(path))
    assert refused.value.field == field and str(path) in str(refused.value)


def test_a_slot_value_is_picked_from_the_turns_words_or_a_listed_value_never_typed():
    text = "I'd like to fly to New York, for $1,500 at most."
    pick = dict(scheme=FRAMES_SCHEME.with_columns(["destination"]), speaker="user", text=text)
    assert label_item(**pick, fields={"act": "inform", "slot": "destination", "words": ["5", "6"]}) == {
        "act": "inform", "slot": "destination", "value": "New York"}
    assert label_item(**pick, fields={"act": "inform", "slot": "intent", "value": "book"})["value"] == "book"
    assert label_item(**pick, fields={"act": "inform", "slot": "destination", "value": "Lisbon"},
                      database_values={"destination": ["Lisbon"]})["value"] == "Lisbon"
    for fields, field in (({"act": "inform", "slot": "destination", "words": ["4", "6"]}, "words"),
                          ({"act": "inform", "slot": "destination", "value": "Atlantis"}, "value"),
                          ({"act": "inform", "slot": "count", "value": "3"}, "value"),
                          ({"act": "offer"}, "act"),
                          ({"act": "inform", "slot": "colour"}, "slot"),
                          ({"act": "inform", "words": ["1"]}, "slot")):
        with pytest.raises(InvalidInput) as refused:
            label_item(**pick, fields=fields, database_values={"destination": ["Lisbon"]})
        assert refused.value.field == field, fields


def test_labels_are_canonical_and_written_as_the_paper_writes_them():
    labels = collect([{"act": "inform", "slot": "price", "value": "1500"}, {"relation": "refers", "frame": 2},
                      {"act": "greeting"}, {"act": "inform", "slot": "destination", "value": "Lisbon"},
                      {"act": "inform", "slot": "price", "value": "1500"}])
    assert summary(labels) == "greeting; inform(destination=Lisbon, price=1500); ref=[2]"


def test_alpha_per_label_is_one_where_annotators_agree_and_a_split_turn_has_no_majority():
    inform = collect([{"act": "inform", "slot": "price", "value": "9"}])
    by_turn = {1: {"a": inform, "b": inform}, 2: {"a": GREETING, "b": GREETING}, 3: {"a": inform, "b": GREETING}}
    alphas = {row.label: row.alpha for row in agreement.per_label(by_turn)}
    assert alphas["act greeting"] == alphas["act inform"] == alphas["slot inform.price"] < 1
    assert agreement.per_label({1: by_turn[1], 2: by_turn[2]})[0].alpha == 1.0
    assert agreement.majority([inform, inform, GREETING]) == inform and agreement.majority([inform, GREETING]) is None


# ---- on the pipeline ---------------------------------------------------------------------------------------


def frames_batch(settings, providers, conversations: int = 1) -> tuple[int, dict[int, dict]]:
    with session_scope(settings.database_url) as s:
        return sim.play_frames(s, providers.get("local"), conversations, random.Random(3))


def label(settings, providers, external_id: str, given: dict, *, truth: dict) -> int:
    """An annotator takes the first turn the queue offers them and labels it by clicks: ``given`` maps the
    turn's true labels to theirs. Returns the labelled source turn."""
    with session_scope(settings.database_url) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == external_id)).first() or sim.new_worker(
            s, external_id, "annotator")
        hit = lifecycle.open_hits_for(s, worker, limit=1)[0]
        assignment = lifecycle.take_turn(s, worker, hit.id, lease_seconds=60)
        turn = s.get(Turn, hit.turn_id)
        unit = annotate.unit_of(s, turn)
        for action, fields in sim.clicks(given.get(unit.star["turn_id"], truth[unit.star["turn_id"]]),
                                         unit.star["text"]):
            annotate.record_action(s, turn, worker, action, fields)
        annotate.submit_turn(s, assignment.external_id, worker, {})
        labelled, source = turn.id, unit.star["turn_id"]
    pipeline.after_submission(settings, providers, labelled)  # as the Celery task does: close, then review
    return source


def test_each_turn_goes_to_different_annotators_one_who_keeps_disagreeing_is_blocked_and_a_person_decides(
        settings, providers, client):
    frames_id, truth = frames_batch(settings, providers)
    with session_scope(settings.database_url) as s:
        batch, hits = annotate.launch(s, frames_id, FRAMES_SCHEME, 3, name="labels",
                                      quality=Policy.parse("none, judged 2 of 3").batch_fields())
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
        batch_id = batch.id
    assert len(hits) == 3 * len(truth) == 15
    turns = sorted(truth)
    wrong = {t: GREETING if truth[t] != GREETING else collect([{"act": "thankyou"}]) for t in turns}
    other = {t: collect([{"act": "negate"}]) for t in turns}
    for _ in turns:
        label(settings, providers, "careful", {}, truth=truth)
    with session_scope(settings.database_url) as s:  # the other replicas never go to the one who has the first
        careful = s.exec(select(Worker).where(Worker.external_id == "careful")).one()
        assert lifecycle.open_hits_for(s, careful) == []
        replica = s.exec(select(Hit.id).join(Turn, Turn.id == Hit.turn_id)
                         .where(Turn.role == "annotator", Turn.status == "open")).first()
        with pytest.raises(Conflict):
            lifecycle.take_turn(s, careful, replica, lease_seconds=60)
    for _ in turns[:3]:
        label(settings, providers, "sloppy", wrong, truth=truth)
    for _ in turns[3:]:
        label(settings, providers, "odd", wrong, truth=truth)
    for _ in turns:  # a third annotator: the truth on the first three turns, something else on the last two
        label(settings, providers, "third", {t: other[t] for t in turns[3:]}, truth=truth)
    with session_scope(settings.database_url) as s:
        status = dict(s.exec(select(Worker.external_id, Worker.status).where(Worker.role == "annotator")).all())
        assert status == {"careful": "active", "sloppy": WorkerStatus.temporarily_blocked, "odd": "active",
                          "third": "active"}
        shown = results.batch_agreement(s, batch_id)
        assert (shown["complete"], shown["majority"], shown["waiting_for_a_person"]) == (5, 3, 2)
        create_requester(s, "ada", "correct horse")
    # the requester's page: alpha per label, and the two turns to decide, each with its three annotations
    sign_in(client)
    assert 'id="annotation-link"' in client.get(f"/admin/batches/{batch_id}").get_data(as_text=True)
    page = client.get(f"/admin/annotation/{batch_id}").get_data(as_text=True)
    assert "3 agreed by a\n  majority, 2 not (2 waiting for a person)" in page and "act greeting" in page
    shown = client.get(f"/admin/annotation/{batch_id}", headers={"Accept": "application/json"}).get_json()
    disagreed = shown["units"]
    assert len(disagreed) == 2 and all(len(u["annotations"]) == 3 for u in disagreed)
    unit = disagreed[0]["unit"]
    token = csrf_token(client, f"/admin/annotation/{batch_id}")
    refused = client.post(f"/admin/annotation/{batch_id}/units/{unit}", json={"chosen": 999999},
                          headers={"X-CSRFToken": token, "Accept": "application/json"})
    assert refused.status_code == 400 and refused.get_json()["field"] == "chosen"
    # a person decides: the careful annotator's labels, gold from now on
    chosen = next(a for a in disagreed[0]["annotations"] if a["worker"] == "careful")
    decided = client.post(f"/admin/annotation/{batch_id}/units/{unit}",
                          data={"csrf_token": token, "chosen": str(chosen["turn_id"]), "gold": "yes"})
    assert decided.status_code == 303
    with session_scope(settings.database_url) as s:
        assert results.batch_agreement(s, batch_id)["gold"] == 1
        # its three annotations are judged against gold at once: the careful one agrees, the other two not
        judged = s.exec(select(JudgedSignal.ok).where(JudgedSignal.kind == results.GOLD)
                        .order_by(JudgedSignal.ok)).all()
        assert judged == [False, False, True]
        final = results.labels_of_turns(s, turns, ["frames"])
        assert set(final) == set(turns[:4]) and all(final[t] == truth[t] for t in turns[:4])


SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the storage is not the subject


@SQLITE
def test_annotate_batch_launch_refuses_a_scheme_file_that_does_not_fit_in_one_line(settings, providers, tmp_path):
    frames_id, _ = frames_batch(settings, providers)
    bad = tmp_path / "mine.yaml"
    bad.write_text("name: mine\nacts: [{name: inform, speakers: user}]\n")
    refused = command(settings, "batch", "launch", "--protocol", "annotate", "--of", str(frames_id),
                      "--scheme", str(bad))
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "acts[0].speakers" in refused.stderr


@SQLITE
def test_a_database_scheme_over_a_batch_whose_tasks_have_no_database_is_refused_naming_the_scheme(settings):
    """The Frames scheme's database slots take the collected protocol's database; a Wizard of Tasks batch
    has none, so the launch says so instead of failing."""
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, _ = lifecycle.launch_batch(s, list(s.exec(select(Task))), 1, name="wot")
        turn = s.exec(select(Turn)).first()
        turn.status, turn.text = TurnStatus.submitted, "How do I start?"
        s.add(turn)
        s.flush()
        with pytest.raises(InvalidInput) as refused:
            annotate.launch(s, batch.id, load_scheme("frames"), 3)
    assert refused.value.field == "scheme" and "have no database" in str(refused.value)


@SQLITE
def test_an_annotated_batch_exports_as_frames_json_and_its_sgd_acts_come_from_the_annotation(
        settings, providers, tmp_path):
    frames_id, truth = frames_batch(settings, providers)
    with session_scope(settings.database_url) as s:
        batch, hits = annotate.launch(s, frames_id, FRAMES_SCHEME, 2, name="labels")
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
    for annotator in ("ann-1", "ann-2"):
        for _ in truth:
            label(settings, providers, annotator, {}, truth=truth)
    refused = command(settings, "export", "--format", "frames", "--out", str(tmp_path / "R"), "--scrub-pii")
    assert refused.returncode != 0 and refused.stderr.strip().splitlines() == [
        "error: --exclude-blocked and --scrub-pii do not apply to --format frames yet"]
    exported = command(settings, "export", "--format", "frames", "--out", str(tmp_path / "F"))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.rstrip().endswith(str(tmp_path / "F" / "frames.json"))
    with session_scope(settings.database_url) as s:
        export_sgd(s, tmp_path / "S", hash_key=settings.worker_hash_key)

    (dialogue,) = json.loads((tmp_path / "F" / "frames.json").read_text())
    turns = len(dialogue["turns"])  # every turn was annotated by both annotators
    assert exported.stdout.startswith(f"exported 1 Frames dialogue ({turns} turns, {turns} with annotated acts) from ")
    assert {"id", "user_id", "wizard_id", "labels", "turns", "wizard_survey"} <= set(dialogue)
    assert set(dialogue["labels"]) == {"userSurveyRating", "wizardSurveyTaskSuccessful"}
    first, offer = dialogue["turns"][0], dialogue["turns"][1]
    assert first["author"] == "user" and first["text"].startswith("Hello!") and first["annotated"]
    assert {"acts", "acts_without_refs", "active_frame"} <= set(first["labels"])
    assert [a["name"] for a in first["labels"]["acts"]] == ["greeting", "inform"]
    # slot keys are the Frames corpus' names, as the sample domain file's database.frames_names says
    assert {arg["key"] for arg in first["labels"]["acts"][1]["args"]} == {"or_city", "dst_city"}
    assert offer["author"] == "wizard" and offer["db"][0]["search"]["constraints"]
    # the wizard found the trip (seed 3): the offer creates frame 2, the user's acceptance refers to it
    assert offer["labels"]["acts"][0]["name"] == "offer" and {"key": "id", "val": 2} in offer["labels"]["acts"][0]["args"]
    assert offer["labels"]["active_frame"] == 1  # only the user changes the active frame
    assert dialogue["turns"][2]["labels"]["acts"][0]["args"][0] == {
        "key": "ref", "val": [{"frame": 2, "annotations": []}]}
    assert dialogue["turns"][2]["labels"]["acts_without_refs"][0]["args"] == []
    assert dialogue["turns"][3]["labels"]["active_frame"] == 2  # the user switched to it

    # section 7.1: every turn lists every frame after it, each with Frames' fields
    frame_fields = {"frame_id", "frame_parent_id", "info", "requests", "binary_questions", "compare_requests",
                    "REJECTED", "MOREINFO"}
    for turn in dialogue["turns"]:
        assert turn["frames"] and all(set(f) == frame_fields for f in turn["frames"])
        assert turn["labels"]["active_frame"] in {f["frame_id"] for f in turn["frames"]}
    assert [f["frame_id"] for f in first["frames"]] == [1] and first["frames"][0]["frame_parent_id"] is None
    assert first["frames"][0]["info"]["dst_city"] == [{"val": truth_value(truth, "destination"), "negated": False}]
    assert [(f["frame_id"], f["frame_parent_id"]) for f in offer["frames"]] == [(1, None), (2, 1)]
    assert offer["frames"][1]["info"]["dst_city"][-1]["val"] == truth_value(truth, "destination")
    # section 7.2: the search results are full records, so the package database can be rebuilt
    with session_scope(settings.database_url) as s:
        task = s.exec(select(Task).where(Task.protocol == "frames")).first()
        from turkflow.protocols.frames.dialog import domain_of

        domain = domain_of(task)
    rebuilt = {item["id"]: item for t in dialogue["turns"] for lookup in t.get("db", [])
               for item in (lookup.get("results") or {}).get("items", [])}
    assert rebuilt and offer["db"][0]["results"]["ids"] == [i["id"] for i in offer["db"][0]["results"]["items"]]
    for item_id, record in rebuilt.items():
        row = next(i for i in domain.db.items if i["id"] == item_id)
        assert set(record) == {domain.frames_name(c) for c in row}  # every column, by its Frames name
        assert record["dst_city"] == row["destination"] and record["name"] == row["hotel"]
    assert {c["field"] for c in offer["db"][0]["search"]["constraints"]} <= set(domain.frames_names.values())
    # the booking and its verdict against the goal; the user's rating once answered
    booked = dialogue["booking"]
    if booked is not None:
        assert booked["verdict"] in {"meets_goal", "meets_alternate", "breaks_goal"}
        assert booked["item"] == rebuilt.get(booked["id"], booked["item"]) and "dst_city" in booked["item"]
        assert (booked["verdict"] == "meets_goal") == (booked["broken"] == [])

    (dialogue,) = json.loads((tmp_path / "S" / "dialogues_001.json").read_text())
    acts = [[(a["act"], a["slot"], a["values"]) for a in t["frames"][0]["actions"]] for t in dialogue["turns"]]
    assert acts[0] == [("GREETING", "", []), ("INFORM", "destination", [truth_value(truth, "destination")]),
                       ("INFORM", "origin", [truth_value(truth, "origin")])]
    assert acts[-1] == [("GOODBYE", "", [])]
    assert not any(a[0] == "INFORM_COUNT" for turn in acts for a in turn)
    assert dialogue["turns"][1]["frames"][0]["service_call"]["method"] == "search_trips"


def truth_value(truth: dict, slot: str) -> str:
    first = truth[min(truth)]
    return next(s["value"] for a in first["acts"] for s in a["slots"] if s["slot"] == slot)


@SQLITE
def test_an_annotator_invited_without_onboarding_is_told_to_ask_the_requester_not_shown_an_error(settings, client):
    with session_scope(settings.database_url) as s:
        fresh = Worker(external_id="fresh-annotator", role="annotator")
        s.add(fresh)
        s.flush()
        link = invites.invite_url(settings.secret_key, "", fresh)
    joined = client.get(link)
    assert joined.status_code in (302, 303)
    page = client.get("/onboarding")
    assert page.status_code == 403 and "ask the requester to onboard you" in page.get_data(as_text=True)


@SQLITE
def test_without_annotation_the_sgd_export_has_no_acts_at_all(settings, providers, tmp_path):
    frames_batch(settings, providers)
    with session_scope(settings.database_url) as s:
        export_sgd(s, tmp_path / "S", hash_key=settings.worker_hash_key)
    (dialogue,) = json.loads((tmp_path / "S" / "dialogues_001.json").read_text())
    assert all(frame["actions"] == [] for turn in dialogue["turns"] for frame in turn["frames"])


@SQLITE
def test_simulated_annotators_with_hidden_accuracy_the_monitor_blocks_the_careless(settings):
    report = sim.run(settings, sim.AnnotateConfig(conversations=1, annotators=5, careless=0.4, per_turn=3,
                                                  gold=0.4, careless_accuracy=0.0, policy="none, judged 2 of 3"))
    assert report["batch"]["units"] == 5 and report["agreement"]["labels"][0]["label"] == "whole turn"
    monitor = report["monitor"]
    assert monitor["careless"] == 2 and monitor["careless_blocked"] == 2 and monitor["recall"] == 1.0
    assert monitor["precision"] == round(2 / monitor["blocked"], 4)
    assert report["dataset"]["turns_correct"] == report["dataset"]["turns_with_labels"]


def test_frames_are_tracked_turn_by_turn_from_the_annotation_as_the_frames_corpus_lists_them():
    """Section 5.2 and 7.1 of the Frames paper, on a dialog written for this test: a frame a turn creates
    is derived from the frame it refers to (else the active one) and inherits its info, a value the turn
    gives replaces the inherited one (a frame the user creates drops what the wizard said), values
    accumulate with ``negated``, the user's questions go to the
    frame the turn is about, a negated offer is REJECTED, moreinfo sets MOREINFO."""
    from turkflow.dataset.frames import FrameTracker, next_active_frame

    names = {"destination": "dst_city"}
    tracker = FrameTracker(lambda slot: names.get(slot, slot))

    def said(author, acts, frames=()):
        return {"acts": [{"act": a, "slots": [dict(zip(("slot", "value"), s)) for s in slots]} for a, slots in acts],
                "frames": [{"relation": r, "frame": n} for r, n in frames]}

    dialog = [
        ("user", said("user", [("inform", [("destination", "Punta Cana"), ("category", "2.5")])])),
        ("wizard", said("wizard", [("offer", [("name", "El Mar"), ("category", "3.0")])], [("creates", 2), ("refers", 1)])),
        ("user", said("user", [("request", [("breakfast",)])], [("refers", 2)])),
        ("wizard", said("wizard", [("inform", [("breakfast", "False")])], [("writes", 2)])),
        ("user", said("user", [("negate", [])])),
        ("user", said("user", [("negate", [("duration", "3")]), ("confirm", [("wifi", "True")])])),
        ("user", said("user", [("request_compare", [("price",)])], [("refers", 1), ("refers", 2)])),
        ("user", said("user", [("moreinfo", [])], [("refers", 2)])),
        ("user", said("user", [("inform", [("destination", "Cancun")])], [("creates", 3)])),
        ("user", said("user", [("request_alts", [])], [("refers", 2)])),
    ]
    active, after = 1, []
    for author, labels in dialog:
        frames = {f["frame_id"]: f for f in tracker.after(author, labels, active)}
        active = next_active_frame(author, labels, active)
        after.append((frames, active))
    first, _ = after[0]
    assert first[1]["info"] == {"dst_city": [{"val": "Punta Cana", "negated": False}],
                                "category": [{"val": "2.5", "negated": False}]}
    offered, active = after[1]
    assert active == 1 and offered[2]["frame_parent_id"] == 1  # only the user moves the active frame
    assert offered[2]["info"] == {"dst_city": [{"val": "Punta Cana", "negated": False}],  # inherited
                                  "category": [{"val": "3.0", "negated": False}],  # replaced
                                  "name": [{"val": "El Mar", "negated": False}]}
    assert offered[1]["info"]["category"] == [{"val": "2.5", "negated": False}]  # frame 1 untouched
    asked, active = after[2]
    assert active == 2 and asked[2]["requests"] == [{"name": "breakfast"}]
    assert after[3][0][2]["info"]["breakfast"] == [{"val": "False", "negated": False}]
    assert after[4][0][2]["REJECTED"] is True and after[3][0][2]["REJECTED"] is False
    negated = after[5][0][2]
    assert negated["info"]["duration"] == [{"val": "3", "negated": True}]
    assert negated["binary_questions"] == [{"name": "wifi", "val": "True"}]
    assert after[6][0][2]["compare_requests"] == [{"name": "price", "frames": [1, 2]}]
    assert after[7][0][2]["MOREINFO"] is True
    last, active = after[8]
    assert active == 3 and last[3]["frame_parent_id"] == 2
    assert last[3]["info"]["dst_city"] == [{"val": "Cancun", "negated": False}]  # the new value, not both
    assert last[3]["info"]["duration"] == [{"val": "3", "negated": True}]  # the user's own, kept
    assert "name" not in last[3]["info"] and "breakfast" not in last[3]["info"]  # the wizard's, dropped
    assert last[2]["info"]["name"] == [{"val": "El Mar", "negated": False}]  # and kept in the frame it was
    assert sorted(last) == [1, 2, 3] and last[3]["requests"] == [] and not last[3]["REJECTED"]
    alternatives, _ = after[9]  # the user asks for alternatives to frame 2: the wizard's values go
    assert alternatives[2]["info"] == {"dst_city": [{"val": "Punta Cana", "negated": False}],
                                       "duration": [{"val": "3", "negated": True}]}
    assert tracker.after("user", None, 2) == [alternatives[k] for k in (1, 2, 3)]  # nobody labelled it: no change
