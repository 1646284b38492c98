"""The append-only event log: who did what, when. Written in the same transaction as the change it
describes, so the log and the state never disagree."""

from __future__ import annotations

from typing import Any, Optional

from sqlmodel import Session, select

from turkflow.models import Event


def record(
    session: Session,
    kind: str,
    actor: str,
    *,
    batch_id: Optional[int] = None,
    conversation_id: Optional[int] = None,
    turn_id: Optional[int] = None,
    worker_id: Optional[int] = None,
    **data: Any,
) -> Event:
    event = Event(kind=kind, actor=actor, batch_id=batch_id, conversation_id=conversation_id,
                  turn_id=turn_id, worker_id=worker_id, data=data)
    session.add(event)
    return event


def conversation_events(session: Session, conversation_id: int) -> list[Event]:
    """The conversation's history in order; enough to replay it."""
    return list(session.exec(
        select(Event).where(Event.conversation_id == conversation_id).order_by(Event.id)
    ))


def replay_conversation(session: Session, conversation_id: int) -> list[dict[str, Any]]:
    """Rebuild a conversation's turns from the log alone: who wrote what, in which order, when."""
    turns: dict[int, dict[str, Any]] = {}
    for event in conversation_events(session, conversation_id):
        if event.kind == "turn_submitted":
            turns[event.data["index"]] = {
                "index": event.data["index"], "role": event.data["role"], "worker_id": event.worker_id,
                "text": event.data["text"], "label": event.data["label"], "answers": event.data["answers"],
                "submitted_at": event.at,
            }
    return [turns[i] for i in sorted(turns)]
