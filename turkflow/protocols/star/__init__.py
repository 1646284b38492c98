"""STAR protocol foundation: task schemas, the knowledge base and reply suggestions (see docs/protocols/star.md)."""

# The qualification stages a STAR role passes (``stages``), here where naming them costs no import (the CLI's
# options list them).
SINGLE_TASK, MULTI_TASK = 1, 2
