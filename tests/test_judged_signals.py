"""Judged signals: a writer judged by something other than a peer rating (STAR's surveys and knowledge-base
agreement, an annotation's agreement) is sent to review by the batch's ``judged m of n``, with the evidence on
the review page; any protocol records them through ``monitor.judge_signal``."""

from __future__ import annotations

from sqlmodel import select

from tests.quality_factories import STUDENT_LINES, TEACHER_LINES, Crowd
from tests.test_dashboard import sign_in
from turkflow.db import session_scope
from turkflow.models import Event, JudgedSignal, Turn, Worker, WorkerStatus
from turkflow.quality import monitor, review
from turkflow.quality.monitor import Policy
from turkflow.requesters import create_requester


def test_the_judged_rule_is_part_of_the_policy_text_and_on_by_default():
    assert (Policy.parse("recommended").judged_block, Policy.parse("recommended").judged_window) == (3, 6)
    custom = Policy.parse("recommended, judged 2 of 4")
    assert custom.judged_text == "judged 2 of 4" and Policy.parse(custom.text) == custom
    assert Policy.parse("k=5,p=0.5, judged 0 of 6").judged_block == 0  # off
    off = Policy.parse("k=5,p=0.5, judged off")  # how the dashboard shows a batch that judges nothing so
    assert off.judged_block == 0 and off.text == "k=5,p=0.5, judged off" and Policy.parse(off.text) == off
    assert Policy.parse("none").judged_block == 0 and Policy.parse("none, judged 1 of 2").judged_block == 1
    assert monitor.judge_judged(custom, [True, False, True, False]) and not monitor.judge_judged(custom, [False])


def test_a_writer_whose_signals_keep_failing_goes_to_review_with_the_evidence(client, settings, providers):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=1, quality=Policy.parse("k=5,p=0.5, judged 2 of 4").batch_fields())
    [conversation] = crowd.conversations()
    teacher = crowd.worker("teacher", "T-judged", name="Jo")
    student = crowd.worker("student", "S-judged")
    turns = []
    for n in range(3):
        crowd.submit(student, conversation, STUDENT_LINES[n])
        turns.append(crowd.submit(teacher, conversation, TEACHER_LINES[n]))
    with session_scope(settings.database_url) as s:
        first, second, third = (s.get(Turn, t) for t in turns)
        assert not monitor.judge_signal(s, first, ok=False, kind="kb_agreement",
                                        evidence={"said": "available", "knowledge_base": "unavailable"})
        # the same turn judged again (a redelivered task) counts once
        assert not monitor.judge_signal(s, first, ok=False, kind="kb_agreement", evidence={"said": "again"})
        assert not monitor.judge_signal(s, second, ok=False, kind="survey", evidence={"calm": False})  # other kind
        assert s.get(Worker, teacher.id).status == WorkerStatus.active
        assert monitor.judge_signal(s, third, ok=False, kind="kb_agreement",
                                    evidence={"said": "booked", "knowledge_base": "no booking"})
        assert s.get(Worker, teacher.id).status == WorkerStatus.temporarily_blocked
        assert len(s.exec(select(JudgedSignal).where(JudgedSignal.worker_id == teacher.id)).all()) == 3
        judged = s.exec(select(Event).where(Event.kind == "signal_judged")).all()
        assert [e.data["signal"] for e in judged] == ["kb_agreement", "survey", "kb_agreement"]
        [entry] = review.daily_review(s, review.ReviewPolicy.of(settings)).entries
        assert entry.worker_id == teacher.id
        create_requester(s, "ada", "correct horse")
    sign_in(client)
    page = client.get("/admin/review").get_data(as_text=True)
    assert "2 of the last 2 kb_agreement signals not ok" in page
    assert f"turn {turns[0]}: said=available, knowledge_base=unavailable" in page
    assert f"turn {turns[2]}: said=booked" in page
