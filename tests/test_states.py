"""Each entity's status moves only as its state machine allows (``turkflow.states``), and nothing else writes a
status column: every legal move is accepted, an illegal one is refused naming the entity, its id, from and
to, the compare-and-set updates race safely, and the source holds no status write outside ``states.py``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlmodel import select

from tests.test_cli import environment, launched, ok, one_line_error
from turkflow import states
from turkflow.cli.main import main
from turkflow.db import session_scope
from turkflow.errors import Conflict, IllegalTransition
from turkflow.models import (
    AgentTurn,
    AgentTurnStatus,
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Bonus,
    BonusStatus,
    Conversation,
    ConversationStatus,
    Hit,
    HitStatus,
    PlaceStatus,
    ProlificPlace,
    ReviewEntry,
    ReviewStatus,
    Turn,
    TurnStatus,
    Worker,
    WorkerStatus,
)

ROOT = Path(__file__).resolve().parents[1]

ENUMS = {Batch: BatchStatus, Conversation: ConversationStatus, Turn: TurnStatus, Hit: HitStatus,
         Assignment: AssignmentStatus, Worker: WorkerStatus, Bonus: BonusStatus, ReviewEntry: ReviewStatus,
         AgentTurn: AgentTurnStatus, ProlificPlace: PlaceStatus}


def entity(model: type, status: str, entity_id: int = 7):  # noqa: ANN201
    return model(id=entity_id, status=status)


def every_move(legal: bool) -> list[tuple[type, str, str]]:
    return [(model, current, to) for model, enum in ENUMS.items() for current in enum for to in enum
            if (to in states.MOVES[model][current]) == legal]


# ---- the tables -----------------------------------------------------------------------------------------


def test_every_status_of_every_entity_has_a_row_and_names_only_its_own_statuses():
    assert set(states.MOVES) == set(ENUMS)
    for model, enum in ENUMS.items():
        assert set(states.MOVES[model]) == set(enum), model
        assert all(set(targets) <= set(enum) for targets in states.MOVES[model].values()), model


@pytest.mark.parametrize("model, current, to", every_move(legal=True),
                         ids=lambda v: v.__name__ if isinstance(v, type) else str(v))
def test_every_legal_move_is_made(model, current, to):
    made = entity(model, current)
    assert states.move(made, to) is (current != to)
    assert made.status == to


@pytest.mark.parametrize("model, current, to", every_move(legal=False),
                         ids=lambda v: v.__name__ if isinstance(v, type) else str(v))
def test_every_other_move_is_refused_and_changes_nothing(model, current, to):
    made = entity(model, current)
    with pytest.raises(IllegalTransition) as refused:
        states.move(made, to)
    assert made.status == current
    assert (refused.value.entity_id, refused.value.current, refused.value.to) == (7, current, to)


def test_a_completed_conversation_cannot_become_active_again():
    with pytest.raises(IllegalTransition, match="^conversation 3 is completed; it cannot become active$"):
        states.move(entity(Conversation, ConversationStatus.completed, 3), ConversationStatus.active)


def test_a_paid_bonus_cannot_become_pending():
    with pytest.raises(IllegalTransition, match="^bonus 9 is paid; it cannot become pending$"):
        states.move(entity(Bonus, BonusStatus.paid, 9), BonusStatus.pending)


def test_a_refused_move_is_a_conflict_a_person_reads_as_one_line():
    refused = IllegalTransition("HIT", 4, HitStatus.expired, HitStatus.open)
    assert isinstance(refused, Conflict) and refused.status == 409
    assert refused.message == "HIT 4 is expired; it cannot become open"


def test_statuses_read_back_from_the_database_as_text_move_like_the_enums():
    made = entity(Worker, "temporarily_blocked")
    assert states.move(made, WorkerStatus.active) and made.status == "active"


def test_setting_a_status_again_is_allowed_only_where_the_table_lists_it():
    assert states.move(entity(Batch, BatchStatus.paused), BatchStatus.paused) is False  # a repeated `pause`
    assert states.move(entity(ReviewEntry, ReviewStatus.pending), ReviewStatus.pending) is False  # a rebuild
    with pytest.raises(IllegalTransition, match="worker 7 is blocked; it cannot become blocked"):
        states.move(entity(Worker, WorkerStatus.blocked), WorkerStatus.blocked)


def test_an_entity_without_a_state_machine_is_a_programming_error():
    with pytest.raises(TypeError, match="no status machine"):
        states.move(object(), "active")


# ---- compare-and-set updates ------------------------------------------------------------------------------


def test_a_compare_and_set_update_names_the_states_that_may_move_to_its_target():
    assert states.sources(Turn, TurnStatus.submitted) == {TurnStatus.open}
    assert states.sources(Assignment, AssignmentStatus.approved) == {
        AssignmentStatus.submitted, AssignmentStatus.rejected, AssignmentStatus.unpaid}
    assert states.sources(Batch, BatchStatus.paused) == {BatchStatus.active}  # not paused itself
    sql = str(states.update_to(Bonus, BonusStatus.paid).where(Bonus.id == 1).compile(
        compile_kwargs={"literal_binds": True}))
    assert "SET status='paid'" in sql and "WHERE bonus.status = 'pending' AND bonus.id = 1" in sql
    with pytest.raises(ValueError, match="no bonus may become pending"):
        states.update_to(Bonus, BonusStatus.pending)


def test_a_compare_and_set_update_moves_a_row_only_from_a_state_that_may_reach_its_target(settings, providers):
    from tests.test_pipeline import launch

    launch(settings, providers)
    with session_scope(settings.database_url) as s:
        turn_id = s.exec(select(Turn.id)).one()
        won = [s.execute(states.update_to(Turn, TurnStatus.cancelled).where(Turn.id == turn_id)).rowcount,
               s.execute(states.update_to(Turn, TurnStatus.submitted).where(Turn.id == turn_id)).rowcount]
        assert won == [1, 0]
        assert s.get(Turn, turn_id).status == TurnStatus.cancelled


# ---- what a person sees -----------------------------------------------------------------------------------


@pytest.fixture
def turkflow(settings):  # noqa: ANN001, ANN201
    runner, env = CliRunner(), environment(settings)
    return lambda *args: runner.invoke(main, list(args), env=env, catch_exceptions=False)


def test_pausing_a_cancelled_batch_is_refused_in_one_line_and_cancelling_again_changes_nothing(turkflow, settings):
    batch_id = launched(turkflow, "-n", "1")
    assert "1 open HIT expired" in ok(turkflow("batch", "cancel", str(batch_id), "--yes"))
    assert one_line_error(turkflow("batch", "pause", str(batch_id))) == (
        f"error: batch {batch_id} is cancelled; it cannot become paused")
    assert "0 open HITs expired" in ok(turkflow("batch", "cancel", str(batch_id), "--yes"))
    with session_scope(settings.database_url) as s:
        assert s.get(Batch, batch_id).status == BatchStatus.cancelled


# ---- nothing else writes a status column ------------------------------------------------------------------

STATUS_COLUMNS = {"status", "platform_status"}
MODELS = {model.__name__ for model in ENUMS}
NOT_SCANNED = {
    "turkflow/states.py",  # the one place that writes
    "turkflow/simulator/fake_prolific.py",  # a fake of Prolific's server: Prolific's states, not ours
}
# Writes of a ``status`` that is no state machine, each with its reason.
NOT_TRANSITIONS = {
    ("turkflow/quality/activity.py", "snapshot.status"): "a snapshot copies its batch's status when counted",
}


def status_writes(source: str) -> list[tuple[int, str]]:
    """Each write of a status column in one module's source, as (line, what): ``x.status = ...`` (but not
    ``self.status``, an exception's HTTP status), ``status=`` given to ``.values(...)`` or to a model's
    constructor, a ``"status"`` key in ``.values({...})``, ``setattr(x, "status", ...)``, and SQL text that
    sets a status."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = [e for t in node.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        found += [(node.lineno, ast.unparse(t)) for t in targets
                  if isinstance(t, ast.Attribute) and t.attr in STATUS_COLUMNS
                  and not (isinstance(t.value, ast.Name) and t.value.id == "self")]
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called == "values" or called in MODELS:
                found += [(node.lineno, f"{called}({kw.arg}=)") for kw in node.keywords if kw.arg in STATUS_COLUMNS]
            if called == "values":
                found += [(node.lineno, "values({'status': ...})") for arg in node.args if isinstance(arg, ast.Dict)
                          for key in arg.keys if isinstance(key, ast.Constant) and key.value in STATUS_COLUMNS]
            if called == "setattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                    and node.args[1].value in STATUS_COLUMNS:
                found.append((node.lineno, "setattr(..., 'status')"))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            words = " ".join(node.value.lower().split())
            if any(f"set {column} =" in words for column in STATUS_COLUMNS):
                found.append((node.lineno, "SQL text"))
    return sorted(found)


def test_no_module_but_states_writes_a_status_column():
    writes = []
    for package in ("turkflow", "workers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            if module in NOT_SCANNED or "migrations" in path.parts:
                continue
            writes += [f"{module}:{line}: {what}" for line, what in status_writes(path.read_text())
                       if (module, what) not in NOT_TRANSITIONS]
    assert writes == [], "write statuses through turkflow.states (move, update_to, platform_follows)"


def test_the_scan_finds_each_kind_of_status_write():
    source = (
        "hit.status = 'open'\n"
        "a, turn.status = 1, 'x'\n"
        "session.execute(update(Turn).values(status='submitted'))\n"
        "session.execute(update(Worker).values(platform_status='blocked'))\n"
        "session.execute(update(Turn).values({'status': 'open'}))\n"
        "Hit(turn_id=1, status='open')\n"
        "setattr(hit, 'status', 'open')\n"
        "session.execute(text('UPDATE hit SET status = :s'))\n"
        "self.status = 502\n"
        "render_template('x.html', status=400)\n"
        "counts[refusal.status] += 1\n"
    )
    assert [what for _, what in status_writes(source)] == [
        "hit.status", "turn.status", "values(status=)", "values(platform_status=)", "values({'status': ...})",
        "Hit(status=)", "setattr(..., 'status')", "SQL text"]
