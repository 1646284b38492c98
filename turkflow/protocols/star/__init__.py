"""STAR protocol foundation: task schemas, the knowledge base and reply suggestions (see docs/protocols/star.md)."""
