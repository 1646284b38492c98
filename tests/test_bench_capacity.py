"""``bench.capacity``, tiny: its open-loop crowd takes and submits turns through a real stack and the
pipeline owes nothing afterwards. It measures nothing here (``python -m bench capacity`` does); it keeps
the benchmark working when the pages or the simulator change (its crowd once found no turn it could take
after the simulator's workers started taking the quiz)."""

from __future__ import annotations

from bench import capacity


def test_the_capacity_crowd_takes_and_submits_turns_and_the_pipeline_owes_nothing_after_the_step():
    args = capacity.arguments(["--rates", "2", "--seconds", "5", "--warm-up", "2", "--conversations", "12",
                               "--workers", "12", "--mean-turns", "4", "--web-workers", "1", "--web-threads", "2",
                               "--celery-concurrency", "1", "--threads", "8", "--settle", "300", "--crowd-nice", "0",
                               "--target-ms", "1e9"])  # no step fails on time: this test times nothing

    (step,) = capacity.measure("sqlite", args)["steps"]

    assert step["submitted"] > 0 and step["crowd"]["submitted"] == step["submitted"], step["crowd"]
    assert step["lost"] == {}, step["lost"]  # every submitted turn has its next turn open and its review
    assert step["http_errors"] == {}, step["http_errors"]
    assert {"POST /queue/take", "POST /turn"} <= set(step["requests"]), step["requests"]
