"""The scale-out layout of ``bench.scale``, tiny: two web processes and two Celery workers per queue as
separate processes, a second beat started by mistake, and one of the two turns workers killed with
SIGKILL halfway and never restarted. The reconciler runs every second here and repairs after two, so the
message the dead worker held is made good within seconds (``python -m bench scale`` measures the defaults).
"""

from __future__ import annotations

from bench import scale
from turkflow.config import Settings
from turkflow.simulator.run import SimulationConfig


def test_a_crowd_spread_over_two_web_processes_loses_no_turn_when_one_of_two_turns_workers_dies(
        tmp_path, sqlite_url):
    settings = Settings(data_dir=tmp_path, database_url=sqlite_url, secret_key="test", worker_hash_key="test",
                        reconcile_seconds=1, reopen_after_seconds=2, review_after_seconds=2, stuck_after_seconds=2)
    config = SimulationConfig(students=4, teachers=4, conversations=4, max_turns=12, mean_turns=6, seed=1,
                              policy="none", concurrency=8, settle_timeout=60)

    result = scale.collect(settings, tmp_path / "logs", config, kill=True, web_workers=1, web_threads=2)

    served = result["requests_served"]
    assert list(served) == ["gunicorn-1", "gunicorn-2"] and all(n > 0 for n in served.values()), served
    kill = result["kill"]
    assert kill["worker"] == "celery-turns-2"
    assert all(n > 0 for n in kill["turn_openings_before"].values()), kill  # both turns workers worked
    assert kill["turn_openings_after"]["celery-turns-1"] > 0  # the survivor carried on alone
    assert "celery-turns-2" not in result["tasks_taken"]  # and the dead one stayed dead
    turns = result["report"]["reproducible"]["turns"]
    assert turns["stored"] == turns["confirmed"] == turns["planned"], turns
    assert turns["lost"] == turns["unexpected"] == turns["history_mismatches"] == 0, turns
    assert not any(result["doubled"].values()), result["doubled"]  # one HIT, review, decision, bonus a turn
    assert sorted(result["beats"].values()) == ["stands by", "took the lock"], result["beats"]
    assert result["died_on_their_own"] == {}
