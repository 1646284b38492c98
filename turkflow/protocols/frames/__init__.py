"""Frames protocol domain: the requester's database, goals that may fail, the wizard's search with relaxed
suggestions, event shapes and end-of-dialog surveys (see docs/protocols/frames-meep.md)."""
