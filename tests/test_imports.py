"""Imports run one way (STYLE.md, 2): these tests read every module's imports, including those inside
functions, and name each one that breaks the layout."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HITS = ROOT / "turkflow" / "hits"
PLATFORMS = sorted(p.name for p in HITS.iterdir() if (p / "__init__.py").exists())
FRAMEWORKS = ("flask", "celery", "click", "workers", "turkflow.pipeline")
SUBCOMMAND_MODULES = ("turkflow/cli/mturk.py", "turkflow/cli/prolific.py", "turkflow/cli/review.py",
                      "turkflow/cli/dataset.py", "turkflow/simulator/cli.py")


def modules() -> dict[str, list[str]]:
    """Each module of turkflow, workers and bench (path relative to the repository) and what it imports."""
    found = {}
    for package in ("turkflow", "workers", "bench"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            names = []
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names += [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            found[path.relative_to(ROOT).as_posix()] = names
    return found


MODULES = modules()


def imports_of(where: str, *prefixes: str) -> list[str]:
    """The imports of the modules at or under ``where`` that name one of ``prefixes`` (or a submodule)."""
    return sorted({f"{module}: {name}" for module, names in MODULES.items() if module.startswith(where)
                   for name in names if any(name == p or name.startswith(p + ".") for p in prefixes)})


def platform_of(module: str) -> str | None:
    """The platform folder a module sits in, if any."""
    parts = module.split("/")
    if parts[:2] == ["turkflow", "hits"] and len(parts) > 3 and parts[2] in PLATFORMS:
        return parts[2]
    return None


def test_the_platform_folders_are_found():
    assert {"local", "mturk", "prolific"} <= set(PLATFORMS)


@pytest.mark.parametrize("package", ["turkflow/hits/", "turkflow/quality/"])
def test_domain_packages_import_no_framework_no_worker_and_not_the_pipeline(package):
    assert imports_of(package, *FRAMEWORKS) == []


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_platform_folder_imports_no_other_platforms_folder(platform):
    others = [f"turkflow.hits.{p}" for p in PLATFORMS if p != platform]
    assert imports_of(f"turkflow/hits/{platform}/", *others) == []


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_platforms_web_routes_and_commands_import_no_other_platforms_folder(platform):
    others = [f"turkflow.hits.{p}" for p in PLATFORMS if p != platform]
    assert imports_of(f"turkflow/web/{platform}.py", *others) == []
    assert imports_of(f"turkflow/cli/{platform}.py", *others) == []


def test_the_provider_interface_imports_no_implementation():
    assert imports_of("turkflow/hits/provider.py", *(f"turkflow.hits.{p}" for p in PLATFORMS)) == []


def test_boto3_and_botocore_are_imported_only_in_the_mturk_folder():
    offending = [line for line in imports_of("", "boto3", "botocore")
                 if not line.startswith("turkflow/hits/mturk/")]
    assert offending == []


def test_platform_code_outside_hits_is_imported_through_the_registry_or_its_own_folder():
    """Only the registry, a platform's own folder and its own web routes and commands name a platform folder."""
    def allowed(module: str, name: str) -> bool:
        platform = name.split(".")[2]
        return (module == "turkflow/hits/registry.py" or platform_of(module) == platform
                or module in (f"turkflow/web/{platform}.py", f"turkflow/cli/{platform}.py", f"workers/{platform}_tasks.py"))

    offending = [f"{module}: {name}" for module, names in MODULES.items() for name in names
                 if name.startswith("turkflow.hits.") and name.split(".")[2] in PLATFORMS
                 and not allowed(module, name)]
    assert offending == []


@pytest.mark.parametrize("module", SUBCOMMAND_MODULES)
def test_cli_subcommand_modules_take_their_plumbing_from_cli_common_not_from_cli_main(module):
    assert module in MODULES
    assert imports_of(module, "turkflow.cli.main") == []
