"""Requesters own their batches (issue 35): through the real dashboard with two requesters and an admin, each
requester sees and changes their own batches and those an admin opened to them, the workers who wrote in them
and only what those workers did there; an admin sees everything and manages requesters; every route of the
dashboard refuses another requester's things (a test walks them all, so a new route cannot forget). The CLI
runs as the operator."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from click.testing import CliRunner
from sqlmodel import select

from tests.quality_factories import Crowd
from tests.test_cli import environment
from turkflow.cli.main import main
from turkflow.db import session_scope
from turkflow.models import (
    Assignment, Batch, BatchGrant, Bonus, BonusStatus, Conversation, Event, Requester, Turn, Worker, WorkerStatus,
    utcnow,
)
from turkflow.protocols.annotate import dialog as annotate
from turkflow.protocols.annotate.scheme import scheme_from_dict
from turkflow.quality import review
from turkflow.requesters import create_requester

PASSWORD = "correct horse"
JSON = {"Accept": "application/json"}
STEPS = scheme_from_dict({"name": "steps", "acts": [{"name": "request_step", "speakers": ["student"]},
                                                    {"name": "return_step", "speakers": ["teacher"]}]})


def csrf(client, path="/admin/login") -> str:
    page = client.get(path).get_data(as_text=True)
    return re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', page).group(1)


def signed_in(app, username):
    client = app.test_client()
    signed = client.post("/admin/login", data={"csrf_token": csrf(client), "username": username,
                                               "password": PASSWORD})
    assert signed.status_code == 302, signed.get_data(as_text=True)
    client.token = csrf(client, "/admin/batches")
    return client


def post(client, path, **form):
    return client.post(path, data={"csrf_token": client.token, **form})


@pytest.fixture
def lab(settings, providers, app):
    """Ada (the first user: an admin), Ann and Bob. Ann's batch A: teacher Tess written off by five useless
    ratings (temporarily blocked, in the day's review queue), and Jo, who also teaches in Bob's batch B; a
    batch of nobody's (the operator's). Each requester signed in on their own browser."""
    with session_scope(settings.database_url) as s:
        people = {name: create_requester(s, name, PASSWORD).id for name in ("ada", "ann", "bob")}
    a, b, o = Crowd(settings, providers), Crowd(settings, providers), Crowd(settings, providers)
    a.launch(conversations=5, requester_id=people["ann"])
    b.launch(conversations=1, requester_id=people["bob"])
    o.launch(conversations=1)
    tess, jo = a.worker("teacher", "T-tess", "Tess"), a.worker("teacher", "T-jo", "Jo")
    amy, bea = a.worker("student", "S-amy", "Amy"), a.worker("student", "S-bea", "Bea")
    for n, conversation in enumerate(a.conversations()):
        a.submit(amy, conversation, f"Alpha question {n}")
        a.submit(tess, conversation, f"Alpha answer {n} by Tess")
        a.submit(amy, conversation, f"Alpha follow-up {n}", relevant=False, useful=False)
    a.submit(jo, a.conversations()[0], "Alpha answer by Jo")
    b.submit(bea, b.conversations()[0], "Bravo question")
    b.submit(jo, b.conversations()[0], "Bravo answer by Jo")
    o.submit(amy, o.conversations()[0], "Oscar question")
    with session_scope(settings.database_url) as s:
        assert s.get(Worker, tess.id).status == WorkerStatus.temporarily_blocked
        review.daily_review(s, review.ReviewPolicy.of(settings))
    clients = {name: signed_in(app, name) for name in people}
    return {"people": people, "a": a, "b": b, "o": o, "tess": tess, "jo": jo, "amy": amy, "bea": bea, **clients}


def text(response) -> str:
    return response.get_data(as_text=True)


@pytest.mark.both_backends  # the visibility conditions are SQL; the migration per dialect
def test_each_requester_sees_their_own_batches_and_the_workers_who_wrote_in_them_and_an_admin_sees_all(lab):
    a, b, o = lab["a"].batch_id, lab["b"].batch_id, lab["o"].batch_id
    link = 'href="/admin/batches/{}"'.format
    for who, shown, hidden in (("ann", {a}, {b, o}), ("bob", {b}, {a, o}), ("ada", {a, b, o}, set())):
        page = text(lab[who].get("/admin/batches"))
        assert all(link(i) in page for i in shown) and not any(link(i) in page for i in hidden), who
    assert "Belongs to <bdi>ann</bdi>" in text(lab["ada"].get(f"/admin/batches/{a}"))
    assert "the operator" in text(lab["ada"].get("/admin/batches"))

    worker = 'href="/admin/workers/{}"'.format
    workers = {who: text(lab[who].get("/admin/workers")) for who in ("ann", "bob", "ada")}
    assert all(worker(lab[w].id) in workers["ann"] for w in ("tess", "jo", "amy"))
    assert worker(lab["bea"].id) not in workers["ann"]
    assert worker(lab["jo"].id) in workers["bob"] and worker(lab["bea"].id) in workers["bob"]
    assert worker(lab["tess"].id) not in workers["bob"] and worker(lab["amy"].id) not in workers["bob"]

    jo = lab["jo"].id  # wrote in both: each requester reads what Jo did in their own batches only
    for who, mine, theirs in (("ann", "Alpha answer by Jo", "Bravo answer by Jo"),
                              ("bob", "Bravo answer by Jo", "Alpha answer by Jo")):
        for path in (f"/admin/workers/{jo}", f"/admin/workers/{jo}/turns"):
            page = text(lab[who].get(path))
            assert mine in page and theirs not in page, (who, path)
    assert "Alpha answer by Jo" in text(lab["ada"].get(f"/admin/workers/{jo}/turns"))
    assert "Bravo answer by Jo" in text(lab["ada"].get(f"/admin/workers/{jo}/turns"))

    queue = {who: text(lab[who].get("/admin/review")) for who in ("ann", "bob")}
    assert "Tess" in queue["ann"] and "Alpha answer 0 by Tess" in queue["ann"] and "Block permanently" in queue["ann"]
    assert "Tess" not in queue["bob"] and "nobody is waiting" in queue["bob"].lower()
    assert "Rebuild today" not in queue["ann"] and "Rebuild today" in text(lab["ada"].get("/admin/review"))
    assert "Requesters" not in queue["ann"] and 'href="/admin/requesters"' in text(lab["ada"].get("/admin/review"))


def test_another_requesters_things_are_a_404_and_the_json_says_so(lab):
    a, conversation = lab["a"].batch_id, lab["a"].conversations()[0]
    for path in (f"/admin/batches/{a}", f"/admin/batches/{a}/conversations", f"/admin/conversations/{conversation}",
                 f"/admin/workers/{lab['tess'].id}", f"/admin/workers/{lab['tess'].id}/received",
                 f"/admin/batches/{a}/agents"):
        assert lab["bob"].get(path).status_code == 404, path
        refused = lab["bob"].get(path, headers=JSON)
        assert refused.status_code == 404 and "does not exist" in refused.get_json()["error"], path
        assert lab["ann"].get(path).status_code == 200, path
    assert lab["bob"].get(f"/admin/batches/{lab['o'].batch_id}").status_code == 404  # the operator's
    assert lab["ada"].get(f"/admin/batches/{lab['o'].batch_id}").status_code == 200


def test_a_requester_blocks_a_worker_only_theirs_and_an_admin_decides_about_one_who_also_worked_elsewhere(
        lab, settings):
    tess, jo = lab["tess"].id, lab["jo"].id
    assert post(lab["bob"], f"/admin/workers/{tess}/block").status_code == 404  # not a worker Bob knows
    refused = lab["ann"].post(f"/admin/workers/{jo}/block", json={"note": "sloppy"}, headers={
        **JSON, "X-CSRFToken": lab["ann"].token})
    assert refused.status_code == 403 and "an admin decides" in refused.get_json()["error"]
    assert "an admin decides" in text(lab["ann"].get(f"/admin/workers/{jo}"))
    assert "Block permanently" not in text(lab["ann"].get(f"/admin/workers/{jo}"))
    assert post(lab["ann"], f"/admin/workers/{tess}/block", note="copies").status_code == 302
    assert post(lab["ada"], f"/admin/workers/{jo}/block", note="for everyone").status_code == 302
    with session_scope(settings.database_url) as s:
        assert s.get(Worker, tess).status == WorkerStatus.blocked
        assert s.get(Worker, jo).status == WorkerStatus.blocked
        actors = {e.worker_id: e.actor for e in s.exec(select(Event).where(Event.kind == "worker_blocked",
                                                                           Event.actor != "system"))}
    assert actors == {tess: "requester:ann", jo: "requester:ada"}
    assert post(lab["ann"], "/admin/review/build").status_code == 403  # every worker's queue: an admin's
    assert post(lab["ada"], "/admin/review/build").status_code == 302


def test_an_admin_opens_a_batch_to_a_requester_and_takes_it_back(lab, settings):
    a, bob = lab["a"].batch_id, lab["people"]["bob"]
    assert post(lab["ann"], f"/admin/requesters/{bob}/grants", batch=str(a)).status_code == 403
    assert lab["bob"].get(f"/admin/batches/{a}").status_code == 404
    opened = lab["ada"].post(f"/admin/requesters/{bob}/grants", json={"batch": str(a)},
                             headers={**JSON, "X-CSRFToken": lab["ada"].token})
    assert opened.status_code == 200 and opened.get_json()["requester"]["granted"] == [a]
    assert lab["bob"].get(f"/admin/batches/{a}").status_code == 200
    assert "Tess" in text(lab["bob"].get("/admin/review"))  # A's workers are Bob's to see now
    assert "also open to <bdi>bob</bdi>" in text(lab["ann"].get(f"/admin/batches/{a}"))
    bad = lab["ada"].post(f"/admin/requesters/{bob}/grants", json={"batch": "A"},
                          headers={**JSON, "X-CSRFToken": lab["ada"].token})
    assert bad.status_code == 400 and bad.get_json()["field"] == "batch"
    assert lab["ada"].post(f"/admin/requesters/{bob}/grants", json={"batch": "99999"},
                           headers={**JSON, "X-CSRFToken": lab["ada"].token}).status_code == 404
    assert post(lab["ada"], f"/admin/requesters/{bob}/grants/{a}/revoke").status_code == 303
    assert lab["bob"].get(f"/admin/batches/{a}").status_code == 404
    with session_scope(settings.database_url) as s:
        assert s.exec(select(BatchGrant)).all() == []
        assert [e.kind for e in s.exec(select(Event).where(Event.kind.in_(["batch_granted", "batch_revoked"]))
                                       .order_by(Event.id))] == ["batch_granted", "batch_revoked"]


def test_an_admin_creates_makes_admin_and_disables_requesters_and_the_last_admin_stays(lab, app, settings):
    ada = lab["ada"]
    made = ada.post("/admin/requesters", json={"username": "cy", "password": PASSWORD, "admin": ""},
                    headers={**JSON, "X-CSRFToken": ada.token})
    assert made.status_code == 200 and made.get_json()["requester"]["admin"] is False
    short = ada.post("/admin/requesters", json={"username": "dee", "password": "short", "admin": ""},
                     headers={**JSON, "X-CSRFToken": ada.token})
    assert short.status_code == 400 and short.get_json()["field"] == "password"
    cy_id = made.get_json()["requester"]["id"]
    cy = signed_in(app, "cy")
    assert cy.get("/admin/requesters").status_code == 403 and cy.get("/admin/batches").status_code == 200
    assert "No batch is yours yet" in text(cy.get("/admin/batches"))
    assert post(ada, f"/admin/requesters/{cy_id}/admin").status_code == 303
    assert cy.get("/admin/requesters").status_code == 200  # at once, in the same session
    assert f'href="/admin/batches/{lab["o"].batch_id}"' in text(cy.get("/admin/batches"))
    assert post(ada, f"/admin/requesters/{cy_id}/disable").status_code == 303
    assert cy.get("/admin/batches").status_code == 302  # signed out: the session ended
    again = cy.post("/admin/login", data={"csrf_token": csrf(cy), "username": "cy", "password": PASSWORD})
    assert again.status_code == 403 and "disabled" in text(again)
    assert post(ada, f"/admin/requesters/{cy_id}/enable").status_code == 303
    assert signed_in(app, "cy").get("/admin/requesters").status_code == 200

    ada_id = lab["people"]["ada"]
    assert post(ada, f"/admin/requesters/{cy_id}/not-admin").status_code == 303
    alone = ada.post(f"/admin/requesters/{ada_id}/not-admin", headers={**JSON, "X-CSRFToken": ada.token})
    assert alone.status_code == 409 and "only admin" in alone.get_json()["error"]
    assert ada.post(f"/admin/requesters/{ada_id}/disable", headers={**JSON, "X-CSRFToken": ada.token}
                    ).status_code == 409
    listed = ada.get("/admin/requesters", headers=JSON).get_json()["requesters"]
    assert [(r["username"], r["admin"], r["disabled"]) for r in listed] == [
        ("ada", True, False), ("ann", False, False), ("bob", False, False), ("cy", False, False)]


# ---- every route of the dashboard ---------------------------------------------------------------------

# Routes that show no batch's data, and lists whose content the test reads (every other route names the thing
# it shows or changes in its address, and is tried with Ann's).
NO_DATA = {"admin.login", "admin.logout", "admin.index"}
LISTS = {"admin.batches", "admin.workers", "admin.review_queue", "admin.prolific_bonuses"}
ADMINS_ONLY = {"admin.build_review", "admin.requesters_page", "admin.create_requester", "admin.change_requester",
               "admin.grant_batch", "admin.revoke_batch"}


@pytest.fixture
def everything(lab, settings, providers):
    """Lab, and Ann's things of every kind a dashboard route names: an annotation batch of A's turns, a
    side-by-side batch, a bonus on one of A's turns, and a requester for the admins' routes to change."""
    from tests.test_compare import systems
    from turkflow.protocols.compare import dialog as compare

    ann = lab["people"]["ann"]
    of = systems(settings, providers)
    with session_scope(settings.database_url) as s:
        labels, _ = annotate.launch(s, lab["a"].batch_id, STEPS, 2, name="labels", requester_id=ann)
        sides, _ = compare.launch(s, of, "Which is clearer?", 1, strategy="uniform", probation=0, gold_every=0,
                                  name="sides", requester_id=ann)
        turn = s.exec(select(Turn).where(Turn.worker_id == lab["tess"].id)).first()
        assignment = s.exec(select(Assignment).where(Assignment.worker_id == lab["tess"].id)).first()
        bonus = Bonus(turn_id=turn.id, worker_id=turn.worker_id, assignment_id=assignment.id, amount_cents=10,
                      request_token="test-bonus", status=BonusStatus.pending,
                      pay_claimed_at=utcnow() - timedelta(days=1))  # as the monitor writes one, then pays
        s.add(bonus)
        s.flush()
        unit = s.exec(select(Conversation.task_id).where(Conversation.batch_id == labels.id)).first()
        cy = create_requester(s, "cy", PASSWORD)
        return {"batch_id": lab["a"].batch_id, "conversation_id": lab["a"].conversations()[0],
                "worker_id": lab["tess"].id, "section": "turns", "bonus_id": bonus.id, "decision": "settle",
                "unit_id": unit, "requester_id": cy.id, "change": "admin",
                "annotation.": labels.id, "comparison.": sides.id}


def _url(app, rule, ids) -> str:
    """The rule's address with Ann's things (the annotation and comparison pages take their own batches)."""
    values = {}
    for name in rule.arguments:
        assert name in ids, f"{rule.rule}: the test knows no thing of Ann's for <{name}>: add one to `everything`"
        values[name] = ids[name]
    own = next((ids[prefix] for prefix in ("annotation.", "comparison.") if rule.endpoint.startswith(prefix)), None)
    if own is not None and "batch_id" in values:
        values["batch_id"] = own
    with app.test_request_context():
        return app.url_for(rule.endpoint, **values)


def test_every_dashboard_route_refuses_another_requester_and_admins_only_routes_refuse_requesters(
        lab, everything, app):
    """Walks every route under /admin. A route naming a thing: Bob (who may not see Ann's) gets a 404, Ann a
    page or an answer that is not a refusal of access. A list: Bob's never shows Ann's things. An admin's route:
    a 403 for both, an answer for Ada. A new route fails here until the test knows what it takes."""
    rules = [r for r in app.url_map.iter_rules() if r.rule.startswith("/admin")]
    assert {"comparison.batch_page", "annotation.decide", "admin.agents_report"} <= {r.endpoint for r in rules}
    marks = [f'href="/admin/batches/{lab["a"].batch_id}"', f'href="/admin/workers/{lab["tess"].id}"', "Alpha"]
    lists = sorted(r.endpoint for r in rules if r.endpoint in LISTS)  # read first: the changes below move things
    assert lists == sorted(LISTS)
    for endpoint in lists:
        url = _url(app, next(r for r in rules if r.endpoint == endpoint), everything)
        assert not any(mark in text(lab["bob"].get(url)) for mark in marks), endpoint
        assert endpoint == "admin.prolific_bonuses" or any(  # a Prolific batch's: test_prolific_settle
            mark in text(lab["ann"].get(url)) for mark in marks), endpoint
    for rule in rules:
        methods = sorted(rule.methods - {"HEAD", "OPTIONS"})
        assert len(methods) == 1 or rule.endpoint == "admin.login", rule.rule
        if rule.endpoint in NO_DATA | LISTS:
            assert rule.endpoint in NO_DATA or not rule.arguments, rule.rule
            continue
        url = _url(app, rule, everything)
        send = (lambda who: lab[who].get(url)) if methods == ["GET"] else (lambda who: post(lab[who], url))
        if rule.endpoint in ADMINS_ONLY:
            for who in ("ann", "bob"):
                assert send(who).status_code == 403, (who, rule.rule)
            assert send("ada").status_code not in (403, 404), rule.rule
        else:
            assert rule.arguments, f"{rule.rule}: a new list? add it to LISTS and to the marks it must not show"
            assert send("bob").status_code == 404, (methods, url)
            assert send("ann").status_code not in (403, 404), (methods, url)


# ---- the CLI runs as the operator ---------------------------------------------------------------------


def run(settings, *args, stdin=None):
    return CliRunner().invoke(main, list(args), env=environment(settings), input=stdin)


def test_the_cli_launches_a_batch_for_a_requester_and_manages_requesters_and_grants(settings):
    from turkflow.protocols.wot import sample_tasks_path

    made = run(settings, "admin", "create", "ada", "--password-stdin", stdin=f"{PASSWORD}\n")
    assert made.exit_code == 0 and "an admin" in made.output  # the first user manages the others
    made = run(settings, "admin", "create", "ann", "--password-stdin", stdin=f"{PASSWORD}\n")
    assert made.exit_code == 0 and "--owner ann" in made.output
    unknown = run(settings, "batch", "launch", "--tasks", str(sample_tasks_path()), "-n", "1", "--owner", "nobody")
    assert unknown.exit_code == 1 and unknown.output == (
        "error: --owner: no dashboard user 'nobody'; `turkflow admin list` shows them\n")
    launched = run(settings, "batch", "launch", "--tasks", str(sample_tasks_path()), "-n", "1", "--owner", "ann")
    assert launched.exit_code == 0, launched.output
    assert "it belongs to ann" in launched.output
    other = run(settings, "batch", "launch", "--tasks", str(sample_tasks_path()), "-n", "1")
    with session_scope(settings.database_url) as s:
        ann = s.exec(select(Requester).where(Requester.username == "ann")).one()
        owners = [b.requester_id for b in s.exec(select(Batch).order_by(Batch.id))]
    assert other.exit_code == 0 and owners == [ann.id, None]
    assert run(settings, "admin", "grant", "ann", "2").output == "batch 2 is open to ann.\n"
    assert run(settings, "admin", "grant", "ann", "2").output == "ann could see batch 2 already; nothing changed.\n"
    assert run(settings, "admin", "grant", "ann", "9").output == "error: batch 9 does not exist\n"
    listed = run(settings, "admin", "list").output
    assert re.search(r"ann\s+│?\s*no\s+│?\s*active\s+│?\s*1\s+│?\s*2", listed), listed
    assert run(settings, "admin", "revoke", "ann", "2").output == "batch 2 is no longer open to ann.\n"
    assert run(settings, "admin", "promote", "ann").output == "ann is an admin.\n"
    assert run(settings, "admin", "disable", "ann").output == "ann is disabled.\n"
    assert run(settings, "admin", "disable", "ada").output == (
        "error: ada is the only admin and cannot be disabled: make another admin first\n")
    assert run(settings, "admin", "demote", "nobody").output == "error: no requester 'nobody'\n"


@pytest.mark.both_backends  # the migration's batch mode (SQLite) and named constraints
def test_requesters_there_before_the_upgrade_become_admins_and_later_ones_do_not(settings):
    """Nobody loses access on upgrade: each requester the migration finds becomes an admin."""
    from alembic import command

    from turkflow.db import alembic_config, get_engine
    from sqlalchemy import text as sql

    config = alembic_config(settings.database_url)
    command.downgrade(config, "0025")
    with get_engine(settings.database_url).begin() as connection:
        connection.execute(sql("INSERT INTO requester (username, password_hash, created_at) VALUES "
                               "('old', 'x', CURRENT_TIMESTAMP)"))
    command.upgrade(config, "head")
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Requester.admin).where(Requester.username == "old")).one() is True
        assert create_requester(s, "new", PASSWORD).admin is False


@pytest.mark.both_backends  # the backfill is SQL on each dialect
def test_who_wrote_in_which_batch_is_filled_from_the_turns_on_upgrade(lab, settings):
    """A requester's workers are read from a row per worker and batch (written with each turn); the migration
    that made it fills it from the turns there were, so upgrading changes nobody's view."""
    from alembic import command

    from turkflow.db import alembic_config

    config = alembic_config(settings.database_url)
    command.downgrade(config, "0027")
    command.upgrade(config, "head")
    worker = 'href="/admin/workers/{}"'.format
    page = text(lab["ann"].get("/admin/workers"))
    assert all(worker(lab[w].id) in page for w in ("tess", "jo", "amy")) and worker(lab["bea"].id) not in page
    assert "an admin decides" in text(lab["ann"].get(f"/admin/workers/{lab['jo'].id}"))  # Jo wrote in Bob's too
