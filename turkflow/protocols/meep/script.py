"""What an exported MEEP session's Python form runs on (``export --format meep``: ``sessions/<id>.py``).

MEEP stored each session as Python a person could run (its Figure 3): the user's words as variables
(``u1_5 = 'Starbucks'``), each API called with the variables its clicks named, each result's fields as
variables (``v1_name``), each agent message printed from its templates. turkflow's exported form does the
same against the requester's folder as it is when run: ``Session.call`` calls the folder's API (typing a
clicked word as the API's argument, as the pages did) and ``Session.say`` fills a template. Running the file
prints the dialog again; a changed table or template prints something else (``turkflow replay --from``
names what differs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from turkflow.protocols.meep.clicks import as_argument
from turkflow.protocols.meep.templates import render
from turkflow.protocols.meep.tokens import span_text, tokenize


def words(text: str, *indexes: int) -> str:
    """The clicked words of a user message, as the log's value of them: adjacent words as written
    ("Main St."), others joined by spaces (MEEP's ``u1_5 + " " + u1_7``)."""
    tokens = tokenize(text)
    return span_text(text, [tokens[i] for i in indexes])


class Session:
    """The requester's MEEP folder (its APIs and templates) and the templates the batch's agents added."""

    def __init__(self, folder: str | Path, added: Mapping[str, str] | None = None) -> None:
        from turkflow.protocols.meep.dialog import requester_files

        files = requester_files(folder)
        self.kb = files.kb
        self.templates = {**dict(added or {}), **files.templates}

    def call(self, api: str, **arguments: Any) -> list[dict[str, Any]]:
        kinds = self.kb.api(api).arguments
        return self.kb.call(api, {name: as_argument(value, kinds.get(name, ""), name)
                                  for name, value in arguments.items()})

    def add_template(self, template: str, text: str) -> None:
        """MEEP's "+": the template an agent composed, from then on pickable."""
        self.templates.setdefault(template, text)

    def say(self, template: str, *values: Any) -> str:
        return render(self.templates[template], list(values))
