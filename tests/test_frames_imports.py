"""The Frames domain package stays plain (STYLE.md 2): no framework, no worker, no pipeline, no database
session; of turkflow it imports only its errors and itself."""

from __future__ import annotations

from tests.test_imports import FRAMEWORKS, MODULES, imports_of


def test_the_frames_package_imports_no_framework_no_worker_and_not_the_pipeline():
    assert any(module.startswith("turkflow/frames/") for module in MODULES)
    assert imports_of("turkflow/frames/", *FRAMEWORKS, "sqlmodel", "sqlalchemy") == []


def test_of_turkflow_the_frames_package_imports_only_errors_and_itself():
    turkflow = imports_of("turkflow/frames/", "turkflow")
    assert [line for line in turkflow if not line.split(": ")[1].startswith(("turkflow.errors",
                                                                            "turkflow.frames"))] == []
