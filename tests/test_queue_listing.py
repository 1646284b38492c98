"""The local queue is loaded after every submission, so listing it must cost the same however many
turns are open (found by the crowd simulator: one query per listed turn made /queue the slowest page)."""

from __future__ import annotations

from sqlalchemy import event

from tests.test_pipeline import STUDENT_ANSWERS, launch, make_worker
from turkflow.db import get_engine, session_scope
from turkflow.hits import lifecycle
from turkflow.models import Conversation, Task


def test_queue_lists_each_open_turn_with_its_title_and_the_message_it_answers(settings, providers):
    launch(settings, providers, conversations=3)
    student = make_worker(settings, "student", "s1")
    teacher = make_worker(settings, "teacher", "t1")
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, student)[0]
        assignment = lifecycle.take_turn(s, student, hit.id, lease_seconds=60)
        turn = lifecycle.submit_turn(s, assignment.external_id, student, STUDENT_ANSWERS).turn
        next_hit = lifecycle.advance_conversation(s, turn.conversation_id)
        lifecycle.publish_hit(s, providers.get("local"), next_hit.id)
    with session_scope(settings.database_url) as s:
        task = s.get(Task, s.get(Conversation, turn.conversation_id).task_id)
        assert lifecycle.queue_entries(s, teacher) == [{
            "hit_id": next_hit.id, "conversation_id": turn.conversation_id, "turn_index": 1, "title": task.title,
            "last_message": "What comes next?", "last_role": "student"}]
        students = lifecycle.queue_entries(s, student)
        assert sorted(e["hit_id"] for e in students) == sorted(h.id for h in lifecycle.open_hits_for(s, student))
        assert len(students) == 2 and all(e["turn_index"] == 0 and e["last_message"] is None for e in students)


def test_listing_the_queue_takes_one_query_however_many_turns_are_open(settings, providers):
    launch(settings, providers, conversations=40)
    student = make_worker(settings, "student", "s1")
    statements = []

    def count(*_args) -> None:  # noqa: ANN002
        statements.append(1)

    engine = get_engine(settings.database_url)
    with session_scope(settings.database_url) as s:
        s.connection()  # the transaction's BEGIN is not the listing's cost
        event.listen(engine, "before_cursor_execute", count)
        try:
            entries = lifecycle.queue_entries(s, student)
        finally:
            event.remove(engine, "before_cursor_execute", count)
    assert len(entries) == 40
    assert len(statements) == 1


def test_each_worker_starts_on_a_turn_of_their_own_and_every_open_turn_is_on_every_queue(settings, providers):
    """Workers who take the first turn of their page do not all go for the same one; the oldest turns stay on
    top of every queue and newer ones follow oldest first, so no turn waits unoffered."""
    launch(settings, providers, conversations=14)
    students = [make_worker(settings, "student", f"s{n}") for n in range(3)]
    with session_scope(settings.database_url) as s:
        oldest_first = [hit.id for hit in lifecycle.open_hits_for(s, students[0])]
        queues = [[entry["hit_id"] for entry in lifecycle.queue_entries(s, student)] for student in students]
    assert len(oldest_first) == 14
    assert len({queue[0] for queue in queues}) == 3  # three workers, three different first turns
    for queue in queues:
        assert sorted(queue) == sorted(oldest_first)  # every open turn, once
        assert set(queue[:10]) == set(oldest_first[:10])  # the ten oldest on top
        assert queue[10:] == oldest_first[10:]  # then the newer ones, oldest first
