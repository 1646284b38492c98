"""The crowd simulator: simulated students and teachers working a batch through the real stack.

``utterances`` (real dialogs to replay), ``crowd`` (behaviours, hidden quality, what a worker answers),
``driver`` (the deterministic round scheduler and the HTTP clients), ``report`` (counts, money, latency,
monitor efficacy), ``policies`` (the collected ratings replayed under other block policies), ``stack``
(redis-server, gunicorn, Celery and PostgreSQL as local processes), ``run`` (parameters to report) and
``cli`` (``turkflow simulate``).
"""

from turkflow.quality import NAMED_POLICIES

# What ``turkflow simulate`` offers, here where naming it costs no import: its help lists them, and the simulator
# itself is imported only when a simulation runs.

# The protocols played on their own pages, each by its module's ``play_for`` (``run.PLAYS``).
PLAYED = ("star", "frames", "meep")

# The block policies the collected ratings are replayed under unless --compare names others: the paper's first,
# then the alternatives a lab would consider, the probation policy of issue 6, the same with the machine-written
# rule, the trust-weighted windows, the sequential tests, and the recommended one.
DEFAULT_POLICIES = tuple(dict.fromkeys((  # the recommended one once
    "k=5,p=0.5", "k=5,p=0.4", "k=10,p=0.4", "k=5,p=0.4 for 6, then k=20,p=0.4", "pooled k=5,p=0.5",
    NAMED_POLICIES["probation"], NAMED_POLICIES["probation"] + ", not typed 2 of 6",
    "weighted k=6,p=0.5 for 6, then k=20,p=0.4", "weighted k=4,p=0.4 for 6, then k=20,p=0.4",
    "weighted k=3,p=0.4 for 6, then k=20,p=0.4, not typed 2 of 6",
    "weighted k=4,p=0.4 for 6, then k=20,p=0.4, not typed 2 of 6",
    "sprt k=20,a=0.01,b=0.05, not typed 2 of 6", "sprt k=20,a=0.05,b=0.05",
    "sprt k=20,a=0.05,b=0.05, not typed 2 of 6", NAMED_POLICIES["recommended"])))
