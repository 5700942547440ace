"""The network stands alone: ``import model.gpt`` loads model/'s own files and
common/setting.py (GPTConfig's fields carry their rules), nothing of data/, training/
or viz/; ``import model.engine`` adds only its own two files. Counted in a fresh
interpreter, from the files of the modules it has loaded (``sys.modules``).
"""

import json
import subprocess
import sys

from tests.conftest import ROOT

# Run in a fresh interpreter: prints the project files loaded after `import model.gpt`,
# then after `import model.engine`. torch gives some modules a bare file name
# (torch._classes: "_classes.py"), hence the absolute paths only.
LOADED_FILES = """
import json, sys
from pathlib import Path

root = Path.cwd().resolve()

def project_files():
    found = set()
    for module in list(sys.modules.values()):
        path = Path(getattr(module, "__file__", None) or ".")
        if not (path.is_absolute() and path.resolve().is_relative_to(root)):
            continue
        relative = path.resolve().relative_to(root)
        # A virtual environment at the root (the README's .venv) is not the project.
        if "site-packages" in relative.parts or relative.parts[0].startswith("."):
            continue
        found.add(relative.as_posix())
    return sorted(found)

import model.gpt
after_gpt = project_files()
import model.engine
print(json.dumps([after_gpt, project_files()]))
"""

THE_NETWORK = [
    "common/__init__.py",
    "common/setting.py",
    "model/__init__.py",
    "model/config.py",
    "model/gpt.py",
    "model/sampling.py",
]


def test_import_model_gpt_loads_the_network_alone():
    done = subprocess.run(
        [sys.executable, "-c", LOADED_FILES], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    after_gpt, after_engine = json.loads(done.stdout)
    assert after_gpt == THE_NETWORK
    assert after_engine == sorted(
        [*THE_NETWORK, "model/compiler.py", "model/cpu_products.py", "model/engine.py"]
    )
