"""Imports run one way (STYLE.md, 2): these tests read every module's imports, including those inside
functions, and name each one that breaks the layout."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HITS = ROOT / "turkflow" / "hits"
PLATFORMS = sorted(p.name for p in HITS.iterdir() if (p / "__init__.py").exists())
FRAMEWORKS = ("flask", "celery", "click", "turkflow.workers", "turkflow.pipeline")
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


def test_the_celery_app_is_imported_by_turkflows_name_only():
    """``workers/`` is installed inside the package (a top-level ``workers`` would clash with others'), so
    nothing may import it by the folder's own name: that would load a second Celery app."""
    assert imports_of("", "workers") == []


def test_the_platform_folders_are_found():
    assert {"local", "mturk", "prolific"} <= set(PLATFORMS)


@pytest.mark.parametrize("package", ["turkflow/hits/", "turkflow/quality/", "turkflow/protocols/", "turkflow/agents/"])
def test_domain_packages_import_no_framework_no_worker_and_not_the_pipeline(package):
    assert any(module.startswith(package) for module in MODULES)
    assert imports_of(package, *FRAMEWORKS, "turkflow.web", "turkflow.cli") == []


def module_name(path: str) -> str:
    """The name a module is imported by: the repository's ``workers/`` is installed as ``turkflow.workers``."""
    name = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    return f"turkflow.{name}" if name.split(".")[0] == "workers" else name


def import_graph() -> dict[str, set[str]]:
    """Which of our modules each of our modules imports (anywhere in the file, functions included). ``from
    package import name`` is an edge to the submodule when ``name`` is one, else to the package."""
    ours = {module_name(path): path for path in MODULES}
    graph = {}
    for here, path in ours.items():
        edges = set()
        for node in ast.walk(ast.parse((ROOT / path).read_text(), filename=path)):
            if isinstance(node, ast.Import):
                edges |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    edges.add(sub if sub in ours else node.module)
        graph[here] = {edge for edge in edges if edge in ours and edge != here}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1; stack.append(root); on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]; counter[0] += 1
                    stack.append(child); on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop(); on_stack.discard(member); component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found



def test_the_cycle_finder_finds_a_circle_and_nothing_in_a_line():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_module_of_turkflow_workers_or_bench_imports_itself_through_others():
    """An import circle makes the order modules load in matter; none may exist, not even through an import
    inside a function."""
    assert cycles(import_graph()) == []


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
    """Only the registry, a platform's own folder and its own web routes, commands, tasks, simulation and
    benchmark name a platform folder."""
    def allowed(module: str, name: str) -> bool:
        platform = name.split(".")[2]
        return (module == "turkflow/hits/registry.py" or platform_of(module) == platform
                or module in (f"turkflow/web/{platform}.py", f"turkflow/cli/{platform}.py", f"workers/{platform}_tasks.py",
                              f"turkflow/simulator/{platform}.py", f"bench/{platform}_poll.py"))

    offending = [f"{module}: {name}" for module, names in MODULES.items() for name in names
                 if name.startswith("turkflow.hits.") and name.split(".")[2] in PLATFORMS
                 and not allowed(module, name)]
    assert offending == []


@pytest.mark.parametrize("module", SUBCOMMAND_MODULES)
def test_cli_subcommand_modules_take_their_plumbing_from_cli_common_not_from_cli_main(module):
    assert module in MODULES
    assert imports_of(module, "turkflow.cli.main") == []
