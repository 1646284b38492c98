"""The MEEP protocol's domain code: an agent who acts by clicks, and a session log that can be executed."""
