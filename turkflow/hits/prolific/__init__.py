"""Prolific as a crowd provider: its REST API (``api``) and, on top, the provider class."""
