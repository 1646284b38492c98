"""The crowd simulator: simulated students and teachers working a batch through the real stack.

``utterances`` (real dialogs to replay), ``crowd`` (behaviours, hidden quality, what a worker answers),
``driver`` (the deterministic round scheduler and the HTTP clients), ``report`` (counts, money, latency,
monitor efficacy), ``policies`` (the collected ratings replayed under other block policies), ``stack``
(redis-server, gunicorn, Celery and PostgreSQL as local processes), ``run`` (parameters to report) and
``cli`` (``turkflow simulate``).
"""
