"""A small crowd for quality tests: real launches, real leases and real submissions through the lifecycle,
with the after-submission pipeline run the way the Celery task runs it."""

from __future__ import annotations

from typing import Optional

from sqlmodel import select

from turkflow import pipeline
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.hits import lifecycle
from turkflow.hits.provider import Providers
from turkflow.models import Hit, Task, Turn, Worker


class Crowd:
    def __init__(self, settings: Settings, providers: Providers):
        self.settings = settings
        self.providers = providers
        self.batch_id: Optional[int] = None

    def launch(self, conversations: int, max_turns: int = 40, **options) -> int:
        with session_scope(self.settings.database_url) as s:
            load_documents(s, read_documents(sample_tasks_path()))
            batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task).order_by(Task.id))), conversations,
                                                 name="quality", max_turns=max_turns, **options)
            for hit in hits:
                lifecycle.publish_hit(s, self.providers.get("local"), hit.id)
            self.batch_id = batch.id
        return self.batch_id

    def conversations(self) -> list[int]:
        from turkflow.models import Conversation

        with session_scope(self.settings.database_url) as s:
            return list(s.exec(select(Conversation.id).where(Conversation.batch_id == self.batch_id)
                               .order_by(Conversation.id)))

    def task_of(self, conversation_id: int) -> Task:
        from turkflow.models import Conversation

        with session_scope(self.settings.database_url) as s:
            return s.get(Task, s.get(Conversation, conversation_id).task_id)

    def worker(self, role: str, external_id: str, name: Optional[str] = None) -> Worker:
        with session_scope(self.settings.database_url) as s:
            worker = Worker(external_id=external_id, role=role, name=name, onboarded=True)
            s.add(worker)
            s.flush()
            return worker

    def submit(self, worker: Worker, conversation_id: int, text: str, *, relevant: bool = True,
               useful: bool = True, label: Optional[str] = None, run: bool = True,
               signals: Optional[dict] = None) -> int:
        """Take the open turn of ``conversation_id`` as ``worker`` and submit it (with ``signals`` as the
        page's report on the typing, if given); returns the turn id."""
        with session_scope(self.settings.database_url) as s:
            fresh = s.get(Worker, worker.id)
            hit = next(h for h in lifecycle.open_hits_for(s, fresh, limit=1000)
                       if s.get(Turn, h.turn_id).conversation_id == conversation_id)
            assignment = lifecycle.take_turn(s, fresh, hit.id, lease_seconds=600)
            turn = s.get(Turn, hit.turn_id)
            answers = {"relevant": "yes" if relevant else "no", "useful": "yes" if useful else "no",
                       "response": text}
            if worker.role == "student":
                answers.update(intent=label or "request_step", real_life="I would start cooking")
            else:
                answers.update(action=label or "return_step")
            if signals is not None:
                answers["signals"] = signals
            submission = lifecycle.submit_turn(s, assignment.external_id, fresh, answers)
            turn_id = submission.turn.id
            assert turn.id == turn_id
        if run:
            pipeline.after_submission(self.settings, self.providers, turn_id)
        return turn_id

    def hit_for(self, conversation_id: int) -> Hit:
        with session_scope(self.settings.database_url) as s:
            return s.exec(select(Hit).join(Turn, Turn.id == Hit.turn_id)
                          .where(Turn.conversation_id == conversation_id, Hit.status == "open")).one()


TEACHER_LINES = [
    "Start by whisking the dry things together in your biggest bowl.",
    "Now beat the eggs into the buttermilk and add the melted butter.",
    "Pour the wet mix into the dry one and fold it gently, lumps are fine.",
    "Warm a pan on medium heat and brush a little butter on it.",
    "Ladle some batter in and wait for bubbles before you flip it.",
    "Flip once the edges look set, then give it another minute.",
    "Keep the finished ones warm in a low oven while you cook the rest.",
]
STUDENT_LINES = [
    "Hi, I would like to make this today. What do I need?",
    "Okay, I have everything ready. What should I do first?",
    "Done with that part. What comes next?",
    "How hot should the pan be exactly?",
    "Great, and how do I know when it is ready to flip?",
    "Thanks, that was really helpful, I think I am done now.",
]


def low_rated_teacher(crowd: Crowd, teacher: Worker, students: list[Worker], turns: int,
                      signals: Optional[dict] = None) -> list[int]:
    """The teacher writes the first answer of ``turns`` conversations; each is rated useless. Returns the
    rating students' turn ids."""
    rater_turns = []
    for i, conversation_id in enumerate(crowd.conversations()[:turns]):
        crowd.submit(students[i % len(students)], conversation_id, STUDENT_LINES[0])
        crowd.submit(teacher, conversation_id, TEACHER_LINES[i % len(TEACHER_LINES)], signals=signals)
        rater_turns.append(crowd.submit(students[(i + 1) % len(students)], conversation_id, STUDENT_LINES[1],
                                        relevant=False, useful=False))
    return rater_turns


PAYLOAD = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"><b id="pwned">bold</b>'


def seed_dashboard(settings: Settings, providers: Providers) -> dict:
    """A batch with one teacher blocked for low ratings whose answers carry markup (one also copies the
    task document), the day's review queue, the hourly rollups and a dashboard user ``ada``."""
    from turkflow.models import WorkerStatus
    from turkflow.quality import activity, review
    from turkflow.requesters import create_requester

    crowd = Crowd(settings, providers)
    crowd.launch(conversations=7)
    teacher = crowd.worker("teacher", "T-low", name="Terry")
    students = [crowd.worker("student", f"S{i}", name=f"Sam {i}") for i in range(3)]
    crowd.submit(students[0], crowd.conversations()[6], f"Hello teacher {PAYLOAD}")
    low_rated_teacher(crowd, teacher, students, turns=3)
    fourth, fifth = crowd.conversations()[3:5]
    crowd.submit(students[0], fourth, STUDENT_LINES[0])
    crowd.submit(teacher, fourth, f"Sure: {crowd.task_of(fourth).steps[0]['text']}")
    crowd.submit(students[2], fourth, STUDENT_LINES[1], relevant=True, useful=False)
    crowd.submit(students[0], fifth, STUDENT_LINES[0])
    crowd.submit(teacher, fifth, f"Fold it gently {PAYLOAD}")
    crowd.submit(students[1], fifth, STUDENT_LINES[2], relevant=False, useful=False)
    with session_scope(settings.database_url) as s:
        assert s.get(Worker, teacher.id).status == WorkerStatus.temporarily_blocked
        review.daily_review(s, review.ReviewPolicy.of(settings))
        activity.refresh(s)
        create_requester(s, "ada", "correct horse")
    return {"crowd": crowd, "teacher": teacher, "students": students, "conversation": fifth}
