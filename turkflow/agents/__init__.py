"""Agents in the loop: a model (an OpenAI-compatible server, a Python function or a built-in) plays a role of
any protocol, one turn at a time, on the same path as a person's turn (README.md)."""
