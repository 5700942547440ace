"""Imports only point down, and none goes round a circle.

The layers, bottom to top: common/ (what every layer shares: `setting`, the stop
signals; nothing of the project), data/ (the corpus and its settings), model/ (the
network; of data/ it reads the tokenizer alone, from model/checkpoint.py, so that the
network lifts out without the corpus pipeline), viz/ (pictures of a model; nothing of
training/), training/, then
cli/ and hf_export/ (the commands' helpers), the entry points (train.py, sample.py,
...) and, on top, bench/, tests/ and docs/. A module may import from its own package
or from a layer below. Every ``import`` counts, those inside functions too: a lazy
import is still a dependency; so do modules imported by name (``importlib``, a
package's ``_HOMES`` table). The check reads the source with `ast`; nothing is
imported.
"""

import ast
from pathlib import Path

from tests.conftest import ROOT

# Rank of each top-level package or folder; the entry points (top-level .py files)
# rank ENTRY_POINTS.
LAYERS = {"common": -1, "data": 0, "model": 1, "viz": 2, "training": 3, "cli": 4, "hf_export": 4}
ENTRY_POINTS = 5
TOOLS = {"bench": 6, "tests": 6, "docs": 6}  # folders of scripts, on sys.path themselves


def module_files(root: Path) -> dict[str, Path]:
    """{dotted module name: file} for every Python file of the project under ``root``
    (``training/loop.py`` -> ``training.loop``, ``training/__init__.py`` ->
    ``training``, ``train.py`` -> ``train``)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if any(p.startswith(".") for p in parts) or parts[0] not in {*LAYERS, *TOOLS}:
            if len(parts) > 1:
                continue  # not a project folder (a virtual environment, data/cache, ...)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def rank(module: str) -> int:
    """The layer of a project module (see LAYERS)."""
    top = module.split(".")[0]
    if top in LAYERS:
        return LAYERS[top]
    return TOOLS.get(top, ENTRY_POINTS) if "." in module else ENTRY_POINTS


def imported_modules(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules that ``module`` (its source at ``path``) imports, anywhere in
    it. ``from package import name`` counts as the submodule ``package.name`` when
    there is one, else as the package; scripts in bench/, tests/ and docs/ also find
    their neighbours by plain name (their folder is on sys.path)."""
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module
    folder = module.split(".")[0] if module.split(".")[0] in TOOLS else None

    def resolve(name: str) -> str | None:
        for candidate in (name, f"{folder}.{name}" if folder else None):
            if candidate in known:
                return candidate
        return None

    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importing module's package
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [f"{base}.{alias.name}" for alias in node.names]
            targets = [t if resolve(t) else base for t in targets]
        else:
            targets = imported_by_name(node)
        for target in targets:
            # "import a.b.c" depends on a.b.c; its longest known prefix is the module.
            parts = target.split(".")
            for end in range(len(parts), 0, -1):
                hit = resolve(".".join(parts[:end]))
                if hit:
                    if hit != module:
                        found.add(hit)
                    break
    return found


def imported_by_name(node: ast.AST) -> list[str]:
    """The modules a node imports by their names in strings: the first argument of
    ``importlib.import_module("a.b")``, and the values of a PEP 562 table
    ``_HOMES = {"name": "a.b"}`` (what a package's ``__getattr__`` imports on first
    use: training/__init__.py, viz/__init__.py)."""
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        first = node.args[0] if node.args else None
        if name == "import_module" and isinstance(first, ast.Constant):
            return [first.value] if isinstance(first.value, str) else []
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
        if any(isinstance(t, ast.Name) and t.id == "_HOMES" for t in node.targets):
            return [
                v.value
                for v in node.value.values
                if isinstance(v, ast.Constant) and isinstance(v.value, str)
            ]
    return []


def import_graph(root: Path) -> dict[str, set[str]]:
    """{module: the project modules it imports} for the project under ``root``."""
    known = module_files(root)
    return {name: imported_modules(name, path, known) for name, path in known.items()}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """'a -> b' for every import of a module from a higher layer, or from another
    package of the same layer."""
    bad = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            same_package = module.split(".")[0] == target.split(".")[0]
            if rank(target) > rank(module) or (
                rank(target) == rank(module) and not same_package and rank(module) < ENTRY_POINTS
            ):
                bad.append(f"{module} -> {target}")
    return bad


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The sets of modules that import each other, directly or round a circle
    (strongly connected components of more than one module, or a module importing
    itself), by Tarjan's algorithm."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_runs_back_up_a_layer():
    graph = import_graph(ROOT)
    assert "training.loop" in graph and "data.settings" in graph  # the project was read
    assert upward_imports(graph) == []


# The only imports of data/ that model/ makes: a checkpoint holds the tokenizer's
# vocabulary, and model/checkpoint.py rebuilds the CharTokenizer from it.
MODEL_READS_OF_DATA = ["model.checkpoint -> data.tokenizer"]


def reads_of(graph: dict[str, set[str]], reader: str, package: str) -> list[str]:
    """'a -> b' for every import of a module of ``package`` by a module of ``reader``."""
    return [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        if module.split(".")[0] == reader
        for target in sorted(targets)
        if target.split(".")[0] == package
    ]


def test_the_network_reads_only_the_tokenizer_of_data():
    assert reads_of(import_graph(ROOT), "model", "data") == MODEL_READS_OF_DATA


def test_a_read_of_data_from_the_network_is_found(tmp_path):
    root = write(
        tmp_path,
        {
            "data/__init__.py": "",
            "data/settings.py": "",
            "data/tokenizer.py": "",
            "model/__init__.py": "",
            "model/checkpoint.py": "from data.tokenizer import CharTokenizer\n",
            "model/gpt.py": "def f():\n    from data import settings\n",
        },
    )
    assert reads_of(import_graph(root), "model", "data") == [
        "model.checkpoint -> data.tokenizer",
        "model.gpt -> data.settings",
    ]


def test_no_imports_go_round_a_circle():
    assert circles(import_graph(ROOT)) == []


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_an_upward_import_is_found_even_inside_a_function(tmp_path):
    root = write(
        tmp_path,
        {
            "data/__init__.py": "",
            "data/settings.py": "def f():\n    from model.config import setting\n",
            "model/__init__.py": "from model.config import GPTConfig\n",
            "model/config.py": "from data.settings import f\n",
            "viz/plot.py": "from training.run_writer import TAG\nfrom model import GPTConfig\n",
            "training/__init__.py": "",
            "training/run_writer.py": "from viz import plot\n",
            "train.py": "import training.run_writer\nfrom model import config\n",
        },
    )
    graph = import_graph(root)
    assert graph["train"] == {"training.run_writer", "model.config"}
    assert upward_imports(graph) == [
        "data.settings -> model.config",
        "viz.plot -> training.run_writer",
    ]


def test_a_circle_is_found_through_a_package_and_a_lazy_import(tmp_path):
    root = write(
        tmp_path,
        {
            "model/__init__.py": "from model.gpt import GPT\n",
            "model/gpt.py": "def generate():\n    from model.engine import decode\n",
            "model/engine.py": "from model import GPT\n",
            "model/config.py": "",
        },
    )
    assert circles(import_graph(root)) == [{"model", "model.gpt", "model.engine"}]


def test_a_lazy_import_by_name_is_found(tmp_path):
    """A package's PEP 562 table of names (``_HOMES``: name -> the module it is
    imported from on first use) and ``importlib.import_module("...")`` are imports
    too, although no import statement names them."""
    root = write(
        tmp_path,
        {
            "viz/__init__.py": (
                "import importlib\n"
                "_HOMES = {'train': 'training.loop'}\n"
                "def __getattr__(name):\n"
                "    return getattr(importlib.import_module(_HOMES[name]), name)\n"
            ),
            "viz/plot.py": "import importlib\nimportlib.import_module('training.run_writer')\n",
            "training/__init__.py": "",
            "training/loop.py": "",
            "training/run_writer.py": "",
            "train.py": "from viz import train\n",
        },
    )
    graph = import_graph(root)
    assert graph["train"] == {"viz"}
    assert upward_imports(graph) == ["viz -> training.loop", "viz.plot -> training.run_writer"]
