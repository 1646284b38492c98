"""MEEP's domain is plain code (STYLE.md 2 and 3): the standard library, turkflow.errors, the requester's-file
reader (turkflow.protocols.files), its action declarations' base (turkflow.protocols.actions, on pydantic) and
itself. Only ``dialog.py``, MEEP on the pipeline, reaches the database
and the rest of turkflow."""

from __future__ import annotations

import sys

from tests.test_imports import FRAMEWORKS, MODULES

FOLDER = "turkflow/protocols/meep/"
DOMAIN = {module: names for module, names in MODULES.items()
          if module.startswith(FOLDER) and module != FOLDER + "dialog.py"}


def test_the_meep_domain_imports_no_framework_no_worker_and_not_the_pipeline():
    assert FOLDER + "clicks.py" in DOMAIN
    banned = (*FRAMEWORKS, "sqlmodel", "sqlalchemy", "spacy")
    assert [f"{module}: {name}" for module, names in DOMAIN.items() for name in names
            if any(name == b or name.startswith(b + ".") for b in banned)] == []


def test_the_meep_domain_imports_only_the_standard_library_errors_the_file_reader_and_itself():
    offending = sorted(
        f"{module}: {name}" for module, names in DOMAIN.items() for name in names
        if name.split(".")[0] not in (*sys.stdlib_module_names, "__future__", "pydantic")
        and not (name == "turkflow.errors" or name.startswith("turkflow.errors.")
                 or name == "turkflow.protocols.files" or name.startswith("turkflow.protocols.files.")
                 or name == "turkflow.protocols.actions" or name.startswith("turkflow.protocols.actions.")
                 or name.startswith("turkflow.protocols.meep")))
    assert offending == []
