"""The house rules a reader relies on: no import cycle inside spec/ (function-level imports and modules
named in strings for importlib count too: they only hide a cycle), imports at the top unless a comment says
why not, a few rooms rather than one flat folder, and no module or function too long to hold in one's head."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 450
MAX_FUNCTION = 60
MAX_TOP_MODULES = 15


def modules(package: str) -> dict[str, Path]:
    base = ROOT / package
    out = {}
    for path in sorted(base.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The spec modules `name` imports anywhere in its body (relative or absolute)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # `from . import autodraft`
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.add(node.value)  # `importlib.import_module("spec.race.cli")`: a by-name import
    return {m for m in found if m in known and m != name}


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (found := visit(m)):
                return found
        state[n] = 2
        stack.pop()
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_no_import_cycle_in_spec():
    mods = modules("spec")
    graph = {n: imports_of(n, p, set(mods)) for n, p in mods.items()}
    assert graph["spec.loop.engine"], "the import reader found nothing: it is broken"
    assert cycle(graph) is None, " -> ".join(cycle(graph))


def test_the_cycle_finder_finds_one():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_over_the_limit():
    long = {str(p.relative_to(ROOT)): n for pkg in ("spec", "demo") for p in modules(pkg).values()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"


def test_the_cycle_finder_sees_imports_by_name():
    mods = modules("spec")
    assert "spec.race.cli" in imports_of("spec.cli", mods["spec.cli"], set(mods))  # the sub-command table


def functions(package: str):
    for path in modules(package).values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path, node


def test_no_function_over_the_limit():
    long = {f"{p.relative_to(ROOT)}:{f.name}": n for pkg in ("spec", "demo") for p, f in functions(pkg)
            if (n := f.end_lineno - f.lineno + 1) > MAX_FUNCTION}
    assert not long, f"over {MAX_FUNCTION} lines: {long}"


def test_project_imports_sit_at_the_top_unless_a_comment_says_why():
    """An import inside a function hides what a module needs (and can hide a cycle); where one is needed
    (MLX must load after the fast BLAS is in place), a comment on it or just above says so."""
    hidden = []
    for pkg in ("spec", "demo"):
        for path, f in functions(pkg):
            lines = path.read_text().splitlines()
            for node in ast.walk(f):
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in
                                                         ("spec", "demo")):
                    said = "#" in lines[node.end_lineno - 1] or lines[node.lineno - 2].strip().startswith("#")
                    if not said:
                        hidden.append(f"{path.relative_to(ROOT)}:{node.lineno} in {f.name}")
    assert not hidden, "imports inside functions without a reason: " + ", ".join(hidden)


def test_spec_is_a_few_rooms_not_one_flat_folder():
    top = sorted(p.name for p in (ROOT / "spec").glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top
    rooms = {p.name for p in (ROOT / "spec").iterdir() if (p / "__init__.py").exists()}
    assert {"loop", "heads", "race", "bench", "train"} <= rooms
    readme = (ROOT / "README.md").read_text()
    assert all(f"`spec/{room}/`" in readme for room in rooms), "the README's architecture table names each room"
