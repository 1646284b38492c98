"""Loading task documents: the documented format, updates by id, and clear errors."""

import json

import pytest
from sqlmodel import select

from turkflow.db import session_scope
from turkflow.documents import DocumentError, load_documents, read_documents, sample_tasks_path
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
    ('{"id": "a", "title": "A", "domain": "x"}\n', "field 'steps' must be a non-empty list"),
    ('{"title": "A", "domain": "x", "steps": ["s"]}\n', "field 'id' is required"),
    ('{"id": "a", "title": "A", "domain": "x", "steps": [{"image_url": "u"}]}\n', "step 1 needs a 'text'"),
    ("{not json\n", "not valid JSON"),
])
def test_bad_documents_name_the_problem(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(DocumentError, match=message):
        read_documents(path)


def test_duplicate_ids_are_refused(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("- {id: a, title: A, domain: x, steps: [s]}\n- {id: a, title: B, domain: x, steps: [s]}\n")
    with pytest.raises(DocumentError, match="duplicate id"):
        read_documents(path)
