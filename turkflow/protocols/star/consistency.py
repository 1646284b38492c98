"""Does a wizard follow the task's flow chart at the start of a dialog (STAR, section 4 and Table 8)?

STAR checked, per single-task dialog, that the wizard's first questions come in the schema's order, with
questions skipped or asked twice allowed (a user may give several answers at once, or none). Here the
checked actions are the schema graph's chain from its start to its first knowledge-base query: the
questions (not the greeting at the start node) and then the query itself. STAR's Table 8 lists how many
actions it checked per task; the chains of today's schemas have as many in 11 of the 24 tasks (STAR
does not say how it chose them for the others), e.g. plane_book's ask_name, plane_ask_flight_id, query.
"""

from __future__ import annotations

from typing import Iterable, Optional

from turkflow.protocols.star.schemas import QUERY_PREFIX, TaskSchema, is_query_label

QUERY = QUERY_PREFIX  # a knowledge-base query, whichever of the graph's query nodes it stands for
GREETING = "hello"


def checked_actions(schema: TaskSchema) -> tuple[str, ...]:
    """The wizard's actions whose order is checked: the chain from the graph's start up to its first
    query (``QUERY``), leaving out the greeting."""
    chain: list[str] = []
    node: Optional[str] = schema.graph.start
    seen: set[str] = set()
    while node is not None and node not in seen:
        seen.add(node)
        if is_query_label(node):
            chain.append(QUERY)
            break
        if node != GREETING:
            chain.append(node)
        node = schema.graph.successor(node)
    return tuple(chain)


def follows_order(actions: Iterable[Optional[str]], checked: tuple[str, ...]) -> bool:
    """True when the checked actions among ``actions`` (reply labels picked, ``QUERY`` for a query, None
    for a reply the wizard wrote) never go back in ``checked`` before the first query; anything after it,
    and any action not checked, does not count."""
    position = {action: n for n, action in enumerate(checked)}
    furthest = -1
    for action in actions:
        if action not in position:
            continue
        if position[action] < furthest:
            return False
        furthest = position[action]
        if action == QUERY:
            break
    return True
