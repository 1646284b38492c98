"""turkflow.meep is plain domain code (STYLE.md 2 and 3): the standard library, turkflow.errors and itself."""

from __future__ import annotations

import sys

from tests.test_imports import FRAMEWORKS, MODULES, imports_of


def test_the_meep_package_imports_no_framework_no_worker_and_not_the_pipeline():
    assert any(module.startswith("turkflow/meep/") for module in MODULES)
    assert imports_of("turkflow/meep/", *FRAMEWORKS, "sqlmodel", "sqlalchemy", "spacy") == []


def test_the_meep_package_imports_only_the_standard_library_errors_and_itself():
    offending = sorted(
        f"{module}: {name}" for module, names in MODULES.items() if module.startswith("turkflow/meep/")
        for name in names
        if name.split(".")[0] not in sys.stdlib_module_names and name.split(".")[0] != "__future__"
        and not (name == "turkflow.errors" or name.startswith("turkflow.errors.")
                 or name.startswith("turkflow.meep")))
    assert offending == []
