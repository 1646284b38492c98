"""Loading task documents: the documented format, updates by id, and clear errors."""

import json

import pytest
from sqlmodel import select

from turkflow.db import session_scope
from turkflow.protocols.wot import MAX_DOCUMENT_CHARS, load_documents, read_documents, sample_tasks_path
from turkflow.errors import InvalidDocument
from turkflow.models import Task


def test_sample_tasks_cover_cooking_and_diy():
    docs = read_documents(sample_tasks_path())
    assert {d["domain"] for d in docs} == {"cooking", "diy"}
    diy = next(d for d in docs if d["domain"] == "diy")
    assert diy["items_label"] == "Tools" and diy["steps"][0]["text"]


def test_jsonl_documents_load_and_reload_updates_by_id(tmp_path, sqlite_url):
    path = tmp_path / "tasks.jsonl"
    doc = {"id": "tea", "title": "Brew tea", "domain": "cooking", "ingredients": ["tea"],
           "steps": ["Boil water", {"text": "Steep 3 minutes", "image_url": "https://example.org/t.png"}]}
    path.write_text(json.dumps(doc) + "\n")
    with session_scope(sqlite_url) as s:
        assert load_documents(s, read_documents(path)).created == 1
    path.write_text(json.dumps(dict(doc, title="Brew green tea")) + "\n")
    with session_scope(sqlite_url) as s:
        result = load_documents(s, read_documents(path))
        tasks = s.exec(select(Task)).all()
    assert result.updated == 1 and [t.title for t in tasks] == ["Brew green tea"]
    assert tasks[0].steps[1]["image_url"] == "https://example.org/t.png"


@pytest.mark.parametrize("content, message", [
    ('{"id": "a", "title": "A", "domain": "x"}\n', r"document 1 \(a\): field 'steps': Field required"),
    ('{"id": "a", "title": "A", "domain": "x", "steps": []}\n', "field 'steps': List should have at least 1"),
    ('{"title": "A", "domain": "x", "steps": ["s"]}\n', "document 1: field 'id': Field required"),
    ('{"id": "a", "title": "A", "domain": "x", "steps": [{"image_url": "u"}]}\n', r"field 'steps\[1\].text'"),
    ("{not json\n", "not valid JSON"),
])
def test_bad_documents_name_the_problem(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(InvalidDocument, match=message):
        read_documents(path)


def test_duplicate_ids_are_refused(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("- {id: a, title: A, domain: x, steps: [s]}\n- {id: a, title: B, domain: x, steps: [s]}\n")
    with pytest.raises(InvalidDocument, match="duplicate id"):
        read_documents(path)


# ---- hostile documents: typed fields, bounded sizes, no YAML aliases ------------------------------------

DOC = {"id": "tea", "title": "Brew tea", "domain": "cooking", "ingredients": ["tea"], "steps": ["Boil water"]}


def refused(tmp_path, content, name="tasks.jsonl"):
    path = tmp_path / name
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    with pytest.raises(InvalidDocument) as error:
        read_documents(path)
    message = str(error.value)
    assert "\n" not in message and message.startswith(str(path))
    return message


@pytest.mark.parametrize("step", [["a list"], {"text": {"an": "object"}}, 42, {"text": 7}],
                         ids=["list", "object text", "number", "number text"])
def test_a_step_that_is_not_text_is_refused_naming_the_document_and_step(tmp_path, step):
    message = refused(tmp_path, json.dumps(dict(DOC, steps=["Boil water", step])) + "\n")
    assert "document 1 (tea): field 'steps[2]" in message


def test_an_id_given_as_a_boolean_is_refused_not_stored_as_true(tmp_path):
    assert "field 'id': must be text" in refused(tmp_path, json.dumps(dict(DOC, id=True)) + "\n")


@pytest.mark.parametrize("url", [{"href": "https://example.org/a.png"}, "javascript:alert(1)", "ftp://example.org/a"])
def test_an_image_url_must_be_an_http_address(tmp_path, url):
    assert "field 'image_url'" in refused(tmp_path, json.dumps(dict(DOC, image_url=url)) + "\n")
    message = refused(tmp_path, json.dumps(dict(DOC, steps=[{"text": "Boil", "image_url": url}])) + "\n")
    assert "field 'steps[1].image_url'" in message


def test_a_ten_megabyte_document_is_refused(tmp_path):
    huge = dict(DOC, steps=["x" * 1000] * 10_000)
    assert "field 'steps'" in refused(tmp_path, json.dumps(huge) + "\n")
    just_over = dict(DOC, steps=["x" * 1900] * 30)
    assert f"at most {MAX_DOCUMENT_CHARS}" in refused(tmp_path, json.dumps(just_over) + "\n")
    assert "field 'steps[1].text'" in refused(tmp_path, json.dumps(dict(DOC, steps=["x" * 10_000_000])) + "\n")


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    bomb = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(6))
    bomb += "tasks: [{id: x, title: t, domain: d, steps: *g}]\n"
    assert "anchors and aliases" in refused(tmp_path, bomb, "bomb.yaml")


def test_a_non_utf8_file_is_named_in_the_error(tmp_path):
    message = refused(tmp_path, "- {id: caf\xe9, title: t, domain: d, steps: [s]}\n".encode("latin-1"), "t.yaml")
    assert "not UTF-8" in message


@pytest.mark.parametrize("title", ["\u200b\ufeff", "Tea\x07"], ids=["invisible only", "control character"])
def test_document_text_is_cleaned_like_answers(tmp_path, title):
    assert "field 'title'" in refused(tmp_path, json.dumps(dict(DOC, title=title)) + "\n")


def test_a_misspelt_field_is_refused_rather_than_dropped(tmp_path):
    assert "field 'stpes': unknown field" in refused(tmp_path, json.dumps(dict(DOC, stpes=["x"])) + "\n")


def test_deeply_nested_json_is_one_line_error(tmp_path):
    assert "not usable JSON" in refused(tmp_path, "[" * 100_000 + "]" * 100_000 + "\n")


def test_turkflow_tasks_load_prints_one_line_naming_file_and_document_and_loads_nothing(tmp_path, sqlite_url):
    from click.testing import CliRunner

    from turkflow.cli.main import main

    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(DOC) + "\n" + json.dumps(dict(DOC, id="cake", steps=[["Mix"]])) + "\n")
    env = {"TURKFLOW_DATABASE_URL": sqlite_url, "TURKFLOW_DATA_DIR": str(tmp_path / "var")}
    result = CliRunner().invoke(main, ["tasks", "load", str(path)], env=env)
    assert result.exit_code == 1
    assert result.output.splitlines() == [f"error: {path} document 2 (cake): field 'steps[1]': must be text or a "
                                          "mapping with text and image_url"]
    with session_scope(sqlite_url) as s:
        assert s.exec(select(Task)).all() == []
