"""The house's rules, checked on the source: imports go one way and never in a circle, the CLI
stays thin, each room of jobs/ keeps to its own, the environment is read in one place, the tools
take nothing from the tests, files stay small, and no code tells an exception by its name.

Imports are read with ``ast`` from every module of jobs/, pipeline/ and storage/ — at module
level, inside functions and under ``if TYPE_CHECKING:`` alike: a circle hidden in a function is
still a circle for the reader who must change one side.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("jobs", "pipeline", "storage")
MAX_LINES = 300
# Modules still over MAX_LINES, each at most as long as today while it is split by concern; a
# module split below the limit leaves the list (the test says so), and none joins it.
OVER_THE_LIMIT: dict[str, int] = {}
SETTINGS_MODULE = "jobs/settings.py"  # the one module that reads (or sets) the process environment
ENVIRONMENT_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


MODULES = _modules()


def _imported_names(name: str, path: Path) -> Iterator[str]:
    """Every dotted name module ``name`` imports, relative imports resolved."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                here = here[:len(here) - (node.level - 1)]
                base = ".".join(here + ([base] if base else []))
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _own_module(dotted: str) -> str | None:
    """The module of ours that ``dotted`` names (a name imported from a module maps to it)."""
    parts = dotted.split(".")
    while parts and ".".join(parts) not in MODULES:
        parts.pop()
    return ".".join(parts) if parts else None


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for dotted in _imported_names(name, path):
            target = _own_module(dotted)
            if target is not None and target != name:
                graph[name].add(target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_the_circle_finder_finds_a_circle_through_a_package_and_a_function() -> None:
    graph = {"a": {"a.b"}, "a.b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "a.b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_in_jobs_pipeline_storage() -> None:
    graph = _graph()
    circles = _circles(graph)
    detail = [f"{' <-> '.join(c)}: " + "; ".join(f"{m} -> {t}" for m in c for t in sorted(graph[m]) if t in c)
              for c in circles]
    assert not circles, "\n".join(detail)


def _top(module: str) -> str:
    return module.split(".")[0]


@pytest.mark.parametrize("package, allowed", [
    ("pipeline", {"pipeline"}),  # pure stages: nothing of the database or Celery
    ("storage", {"storage", "pipeline"}),
])
def test_dependencies_point_one_way(package: str, allowed: set[str]) -> None:
    graph = _graph()
    wrong = sorted(f"{m} -> {t}" for m in graph if _top(m) == package for t in graph[m]
                   if _top(t) not in allowed and not _a_tool_reading_its_settings(m, t))
    assert not wrong


def _a_tool_reading_its_settings(module: str, target: str) -> bool:
    """The measurement tools (pipeline/bench/) are programs with an edge of their own: they read
    the environment where everything does, in the settings module, and nothing else of jobs/."""
    return _in(module, "pipeline.bench") and target == "jobs.settings"


def test_the_measurement_tools_take_only_the_settings_from_jobs() -> None:
    graph = _graph()
    taken = {t for m in graph if _in(m, "pipeline.bench") for t in graph[m] if _top(t) == "jobs"}
    assert taken == {"jobs.settings"}  # the tools that read the job table run as jobs/bench/ children


def test_storage_takes_only_the_boundary_types_and_the_queue_order_from_pipeline() -> None:
    graph = _graph()
    taken = {t for m in graph if _top(m) == "storage" for t in graph[m] if _top(t) == "pipeline"}
    assert taken <= {"pipeline", "pipeline.types", "pipeline.scheduling", "pipeline.temp_files"}  # + how temporaries are named


def test_the_cli_imports_neither_storage_nor_the_engine() -> None:
    cli_modules = [name for name, path in MODULES.items() if name.startswith("jobs.cli")]
    assert "jobs.cli" in cli_modules and len(cli_modules) > 1
    wrong = [f"{name} imports {dotted}" for name in cli_modules
             for dotted in _imported_names(name, MODULES[name])
             if dotted.split(".")[0] == "storage" or dotted.startswith("pipeline.engine")]
    assert not wrong


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@pytest.mark.parametrize("room", ["jobs.choices", "jobs.batches"])
def test_a_job_choices_and_a_batch_life_know_neither_celery_nor_the_command_line(room: str) -> None:
    """What a job chose and how a batch is claimed, spoken and recorded run the same in a worker
    and in `tts-jobs run`: they are given their messages' senders, never import them."""
    graph = _graph()
    wrong = sorted(f"{m} -> {t}" for m in graph if _in(m, room) for t in graph[m]
                   if _in(t, "jobs.cluster") or _in(t, "jobs.cli"))
    assert not wrong


def test_only_the_command_line_imports_the_command_line() -> None:
    graph = _graph()
    wrong = sorted(f"{m} -> {t}" for m in graph if not _in(m, "jobs.cli") for t in graph[m] if _in(t, "jobs.cli"))
    assert not wrong


def _reads_the_environment(path: Path) -> list[int]:
    """Lines of ``path`` that touch the process environment: ``os.environ``, ``os.getenv`` and
    the like, or those names imported from ``os``."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT_NAMES
                and isinstance(node.value, ast.Name) and node.value.id == "os"):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and any(
                alias.name in ENVIRONMENT_NAMES for alias in node.names):
            lines.append(node.lineno)
    return lines


def test_the_environment_is_read_in_the_settings_module_alone() -> None:
    readers = {str(path.relative_to(ROOT)): lines for path in MODULES.values()
               if (lines := _reads_the_environment(path))}
    assert SETTINGS_MODULE in readers  # the check finds what it looks for
    wrong = {module: lines for module, lines in readers.items() if module != SETTINGS_MODULE}
    assert not wrong, (f"read settings from jobs/settings.py (Settings.from_env) and pass them on; a child's "
                       f"environment is settings.child_environment(): {wrong}")


def _tool_modules() -> list[Path]:
    tools = sorted((ROOT / "scripts").rglob("*.py"))
    return tools + sorted((ROOT / "pipeline" / "bench").rglob("*.py")) + sorted((ROOT / "jobs" / "bench").rglob("*.py"))


def test_no_tool_imports_the_tests() -> None:
    """The measurement tools and scripts stand on the packages alone: a test helper they need
    moves into the package (pipeline/bench/books.py writes the benchmark's books)."""
    assert _tool_modules()
    wrong = []
    for path in _tool_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            wrong += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n}" for n in names if _in(n, "tests")]
    assert not wrong


def test_no_production_module_is_over_300_lines() -> None:
    lengths = {str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
               for path in MODULES.values()}
    long = {module: n for module, n in lengths.items() if n > MAX_LINES}
    grown = {module: n for module, n in long.items() if n > OVER_THE_LIMIT.get(module, MAX_LINES)}
    assert not grown, f"split by concern below {MAX_LINES} lines: {grown}"
    assert not set(OVER_THE_LIMIT) - set(long), "now within the limit: leave OVER_THE_LIMIT"


def _names_an_exception_class(node: ast.AST) -> bool:
    """``type(x).__name__`` or ``x.__class__.__name__``."""
    if not (isinstance(node, ast.Attribute) and node.attr == "__name__"):
        return False
    inner = node.value
    return ((isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "type")
            or (isinstance(inner, ast.Attribute) and inner.attr == "__class__"))


def test_no_code_tells_an_exception_by_the_name_of_its_class() -> None:
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and any(
                    _names_an_exception_class(side) for side in [node.left, *node.comparators]):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found
