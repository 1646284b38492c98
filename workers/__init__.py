"""The Celery app and its tasks: thin wrappers over turkflow's domain functions."""
