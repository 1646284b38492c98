"""The Frames domain stays plain (STYLE.md 2): no framework, no worker, no pipeline, no database session; of
turkflow it imports only its errors, the requester's-file reader (``turkflow.protocols.files``), the typed action
declarations' base (``turkflow.protocols.actions``), the shipped samples (``turkflow.samples``; neither imports
anything of turkflow's but errors) and itself.
Only ``dialog.py``, Frames on the pipeline, reaches the database and the rest of turkflow."""

from __future__ import annotations

from tests.test_imports import FRAMEWORKS, MODULES

FOLDER = "turkflow/protocols/frames/"
DOMAIN = {module: names for module, names in MODULES.items()
          if module.startswith(FOLDER) and module != FOLDER + "dialog.py"}


def test_the_frames_domain_imports_no_framework_no_worker_and_not_the_pipeline():
    assert FOLDER + "search.py" in DOMAIN
    banned = (*FRAMEWORKS, "sqlmodel", "sqlalchemy")
    assert [f"{module}: {name}" for module, names in DOMAIN.items() for name in names
            if any(name == b or name.startswith(b + ".") for b in banned)] == []


def test_of_turkflow_the_frames_domain_imports_only_errors_the_file_reader_and_itself():
    # ``from turkflow import samples`` names the package and ``turkflow.samples``: the submodule is judged.
    assert [f"{module}: {name}" for module, names in DOMAIN.items() for name in names
            if name.startswith("turkflow") and name != "turkflow"
            and not name.startswith(("turkflow.errors", "turkflow.protocols.files", "turkflow.protocols.actions",
                                     "turkflow.samples", "turkflow.protocols.frames"))] == []
