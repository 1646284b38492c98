"""turkflow: asynchronous, one-HIT-per-turn collection of task-oriented dialog datasets."""

__version__ = "0.1.0"
