"""Every action body of every protocol, hostile (issue 35): the in-turn actions and submits of STAR, Frames,
MEEP and annotation, and the requester's annotation decision, answered a 4xx for whatever JSON or form body is
sent, never a 5xx. Each action is read through its one typed declaration (``turkflow.protocols.actions``), so a
wrong type is a 400 naming the field; the bodies that answered 500 in the attack run are checked one by one,
then hypothesis sends arbitrary ones (a bounded, derandomized number per endpoint).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from werkzeug.datastructures import MultiDict
from tests.test_annotate import FRAMES_SCHEME, frames_batch
from tests.test_dashboard import csrf_token, sign_in
from tests.test_frames_dialog import domain_copy, launch_frames
from tests.test_meep_dialog import ASK, launch_meep
from tests.test_star_dialog import launch_star
from tests.test_star_pages import send, star_worker, take
from tests.test_worker_pages import JSON
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.models import Conversation, Turn
from turkflow.protocols import actions
from turkflow.protocols.annotate import dialog as annotate
from turkflow.protocols.annotate.actions import Decision
from turkflow.protocols.questions import get_protocol
from turkflow.requesters import create_requester

OPENINGS = {"star": {"action": "utter", "text": "Hi, I'd like to borrow a novel."},
            "frames": {"action": "utter", "text": "Hi, a trip from Boston, please."},
            "meep": {"text": ASK}}
DIALOGS = 8  # a held turn that a random body submits is replaced by another dialog's: enough for a run
LAUNCH = {"star": lambda settings, providers, tmp_path: launch_star(settings, providers, conversations=DIALOGS),
          "frames": lambda settings, providers, tmp_path: launch_frames(
              settings, providers, conversations=DIALOGS, domain=domain_copy(tmp_path), success=1.0),
          "meep": lambda settings, providers, tmp_path: launch_meep(settings, providers, conversations=DIALOGS)}


class Endpoints(dict):
    """Every action endpoint of one protocol, ``role/action`` (an in-turn action) and ``role/submit`` (a page's
    submit), and the requester's decision for annotation, each with a client allowed to post to it. A role whose
    turn a body submitted takes the next one its queue offers (``renew``); none left, its endpoints go."""

    def hold(self, role: str, client: Any) -> None:  # noqa: ANN401
        offered = client.get("/queue", headers=JSON).get_json()["open"]
        for name in (f"{role}/action", f"{role}/submit"):
            self.pop(name, None)
        if offered:
            page = take(client)
            self[f"{role}/action"], self[f"{role}/submit"] = (client, f"{page}/action"), (client, page)

    def renew(self, endpoint: str) -> None:
        role, _, kind = endpoint.partition("/")
        if kind == "submit":
            self.hold(role, self[endpoint][0])


def dialogs(protocol: str, app, settings, providers, tmp_path) -> Endpoints:  # noqa: ANN001
    """A user holding a dialog's opening turn, and a wizard (MEEP's agent) holding the second turn of each of
    half the dialogs in turn."""
    LAUNCH[protocol](settings, providers, tmp_path)
    opener = star_worker(app, settings, "user")
    for _ in range(DIALOGS // 2):
        send(opener, take(opener), settings, providers, **OPENINGS[protocol])
    found = Endpoints()
    found.hold("user", star_worker(app, settings, "user"))
    found.hold("wizard", star_worker(app, settings, "wizard"))
    return found


def annotations(app, settings, providers) -> Endpoints:  # noqa: ANN001
    """An annotator holding each labelling turn of a Frames batch in turn, and a signed-in requester on the
    batch's page, whose decision route is the admin's action endpoint."""
    frames_id, _ = frames_batch(settings, providers, conversations=2)
    with session_scope(settings.database_url) as s:
        batch, hits = annotate.launch(s, frames_id, FRAMES_SCHEME, 1, name="labels")
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
        batch_id, unit = batch.id, s.get(Conversation, s.get(Turn, hits[0].turn_id).conversation_id).task_id
        create_requester(s, "ada", "correct horse")
    requester = app.test_client()
    sign_in(requester)
    requester.environ_base["HTTP_X_CSRFTOKEN"] = csrf_token(requester, f"/admin/annotation/{batch_id}")
    found = Endpoints({"requester/decide": (requester, f"/admin/annotation/{batch_id}/units/{unit}")})
    found.hold("annotator", star_worker(app, settings, "annotator"))
    return found


@pytest.fixture(params=["star", "frames", "meep", "annotate"])
def endpoints(request, app, settings, providers, tmp_path) -> Endpoints:
    if request.param == "annotate":
        return annotations(app, settings, providers)
    return dialogs(request.param, app, settings, providers, tmp_path)


# ---- the bodies that answered 500 in the attack run ----------------------------------------------------------

class Form(list):
    """A form's fields, in order: (name, value) pairs."""


NESTED = "[" * 100_000 + "]" * 100_000
# (protocol, endpoint, body as sent: a dict is JSON, a list of pairs a form, a str raw JSON text, field named)
ANSWERED_500 = [
    ("star", "wizard/action", {"action": "select_task", "task": ["library_search"]}, "task"),
    ("star", "wizard/action", Form([("action", "select_task"), ("task", "a"), ("task", "b")]), "task"),
    ("star", "wizard/action", {"action": "query", "api": ["library_search"], "constraints": []}, "api"),
    ("star", "wizard/action", Form([("action", "query"), ("api", "a"), ("api", "b")]), "api"),
    ("star", "wizard/action", {"action": "pick_suggestion", "label": ["hello"]}, "label"),
    ("star", "wizard/action", {"action": "pick_suggestion", "label": 5}, "label"),
    ("star", "wizard/action", {"action": "pick_suggestion", "label": "hello", "options": "hello"}, "options"),
    ("star", "wizard/action", {"action": "pick_suggestion", "label": "hello", "options": [{"a": 1}]}, "options[0]"),
    ("frames", "wizard/action", {"action": "search", "constraints": {"departure": {"at_most": "9999-12-31"}},
                                 "flexible": 2}, None),
    ("frames", "wizard/action", {"action": "search", "constraints": {"departure": "0001-01-01"}, "flexible": 2},
     None),
    ("frames", "wizard/action", {"action": "search", "constraints": {"return": {"at_least": "0001-01-01"}},
                                 "flexible": 1}, None),
    ("annotate", "annotator/action", '{"action": "frame", "relation": "refers", "frame": Infinity}', "frame"),
    ("annotate", "annotator/action", '{"action": "frame", "relation": "refers", "frame": 1e400}', "frame"),
    ("annotate", "annotator/action", {"action": "frame", "relation": ["refers_to"], "frame": 1}, "relation"),
    ("annotate", "annotator/action", Form([("action", "frame"), ("relation", "a"), ("relation", "b"), ("frame", "1")]),
     "relation"),
    ("annotate", "requester/decide", '{"chosen": Infinity}', "chosen"),
    ("annotate", "requester/decide", '{"chosen": ' + NESTED + "}", "body"),
    ("annotate", "requester/decide", NESTED, "body"),
]


def post(client, path: str, body: Any):  # noqa: ANN001, ANN201
    """``body`` as sent: a ``Form`` as a form, a str as raw JSON text, anything else as JSON."""
    if isinstance(body, Form):
        return client.post(path, data=MultiDict(list(body)), headers=JSON)
    text = body if isinstance(body, str) else json.dumps(body)
    return client.post(path, data=text, content_type="application/json", headers=JSON)


@pytest.mark.parametrize("endpoints", sorted({p for p, *_ in ANSWERED_500}), indirect=True)
def test_the_bodies_that_answered_500_are_each_a_400_naming_the_field(endpoints, request):
    protocol = request.node.callspec.params["endpoints"]
    for endpoint, body, field in [(e, b, f) for p, e, b, f in ANSWERED_500 if p == protocol]:
        client, path = endpoints[endpoint]
        answer = post(client, path, body)
        assert answer.status_code < 500, (endpoint, body if len(str(body)) < 200 else "nested", answer.data[:300])
        if field is not None:
            assert answer.status_code == 400 and answer.get_json()["field"] == field, (endpoint, answer.get_json())


# ---- anything at all -------------------------------------------------------------------------------------------

FIELDS = ["action", "text", "api", "constraints", "form", "label", "options", "task", "query", "position", "sort",
          "descending", "flexible", "id", "arguments", "words", "template", "fillers", "approved", "act", "slot",
          "value", "relation", "frame", "complete", "signals", "chosen", "gold", "response", "intent"]
ACTIONS = ["utter", "complete", "select_task", "query", "select_primary", "select_secondary", "request_suggestions",
           "pick_suggestion", "search", "book", "judge", "call_api", "add_template", "pick_template", "send", "label",
           "frame", "clear"]
NAMES = ["Genre", "Language", "departure", "return", "price", "origin", "destination", "query", "place",
         "departure.at_least", "return.at_most", "price.at_most", "Genre.op", "Genre.to"]
WORDS = ["9999-12-31", "0001-01-01", "2025-08-10", "yes", "no", "on", "", " ", "-1", "0", "1", "2", "7",
         "99999999999999999999", "1e400", "Infinity", "NaN", "u1_0", "u1_0 u1_1", "v1.name", "source.latitude",
         "t1", "t1.0", "{}", "library_search", "find_place", "inform", "refers", "Novel", "Boston", "\x00"]
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
                   st.text(max_size=12), st.sampled_from(WORDS + ACTIONS))
CONTAINER = st.one_of(st.lists(SCALAR, min_size=1, max_size=3),
                      st.dictionaries(st.sampled_from(NAMES + ["op", "message", "tokens", "result", "field"]), SCALAR,
                                      min_size=1, max_size=3))
NESTED_VALUE = st.recursive(SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.one_of(st.sampled_from(FIELDS + NAMES + ["op", "message", "token", "result", "field"]),
                              st.text(max_size=6)), inner, max_size=3)), max_leaves=8)
VALUE = st.one_of(CONTAINER, SCALAR, NESTED_VALUE)
FORM_NAMES = [f"kb-{n}" for n in NAMES] + ["filler-0", "filler-1", "filler-2", "arg-query", "arg-place"]
FORM_VALUE = st.one_of(st.sampled_from(WORDS + ACTIONS), st.text(max_size=12))


def bodies(protocol: str, endpoint: str) -> st.SearchStrategy:
    """Bodies aimed at one endpoint: mostly one of its role's actions (the requester's decision has none),
    each of that action's own fields there or not, holding anything, and perhaps a field of another; as JSON,
    as a form, or not an object at all."""
    role, _, kind = endpoint.partition("/")
    declared = {"none": Decision} if role == "requester" else actions.declared(protocol)[role]
    extra = ["complete", "signals"] if kind == "submit" else []

    def own(name: str) -> list[str]:
        return [f for f in declared[name].model_fields if f != "action"] + extra

    def as_json(name: str) -> st.SearchStrategy:
        named = {} if role == "requester" else {"action": st.just(name)}
        return st.builds(lambda body, more: {**body, **more},
                         st.fixed_dictionaries(named, optional={field: VALUE for field in own(name)}),
                         st.dictionaries(st.sampled_from(FIELDS + NAMES), VALUE, max_size=1))

    def as_form(name: str) -> st.SearchStrategy:
        fields = st.sampled_from(own(name) + FORM_NAMES) if own(name) else st.sampled_from(FORM_NAMES)
        named = [] if role == "requester" else [("action", name)]
        return st.builds(lambda rest: Form([*named, *rest]), st.lists(st.tuples(fields, FORM_VALUE), max_size=6))

    action = st.sampled_from(sorted(declared))
    return st.one_of(action.flatmap(as_json), action.flatmap(as_json), action.flatmap(as_form),
                     st.builds(lambda name, body: {**body, "action": name}, VALUE,
                               st.dictionaries(st.sampled_from(FIELDS), VALUE, max_size=3)), VALUE)


FEW = hypothesis_settings(max_examples=100, deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FEW
@given(data=st.data())
def test_arbitrary_json_and_form_bodies_at_every_action_endpoint_never_answer_5xx(endpoints, request, data):
    """Each example sends a body of its own to every endpoint of the protocol."""
    protocol = request.node.callspec.params["endpoints"]
    for endpoint in sorted(endpoints):
        if endpoint not in endpoints:  # its role's turns ran out
            continue
        client, path = endpoints[endpoint]
        body = data.draw(bodies(protocol, endpoint), label=endpoint)
        try:
            json.dumps(body, allow_nan=True)
        except (TypeError, ValueError):  # not sendable as JSON
            continue
        answer = post(client, path, body)
        assert answer.status_code < 500, (endpoint, body, answer.data[:500])
        if answer.status_code < 400:
            endpoints.renew(endpoint)


# ---- the declarations: what each page offers, and a schema a program can ask a model for ----------------------

EXAMPLES = {  # an action a person posted in the tests of each protocol, as a model's structured output would be
    ("star", "wizard"): {"action": "query", "api": "library_search", "form": {"Genre": "Novel"}},
    ("frames", "wizard"): {"action": "search", "constraints": {"origin": "Boston"}, "flexible": 2},
    ("meep", "wizard"): {"action": "pick_template", "template": "t6", "fillers": [{"message": 1, "tokens": [3]}]},
    ("annotate", "annotator"): {"action": "frame", "relation": "refers", "frame": 1},
}


@pytest.mark.parametrize("protocol", ["star", "frames", "meep", "annotate"])
def test_each_roles_declared_actions_are_those_its_page_offers_and_make_a_json_schema(protocol):
    for role, declared in actions.declared(protocol).items():
        assert set(declared) == set(get_protocol(protocol).form(role).actions), (protocol, role)
        schema = actions.schema(protocol, role)
        jsonschema.Draft202012Validator.check_schema(schema)
        for name, model in declared.items():
            assert model.__doc__ and all(f.description for n, f in model.model_fields.items() if n != "action")
        example = EXAMPLES.get((protocol, role))
        if example is not None:
            jsonschema.validate(example, schema)  # what the schema takes, the declaration takes
            actions.read(declared, example, f"a {role}")
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate({**example, "surplus": 1}, schema)
