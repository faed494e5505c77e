"""nn/, models/ and tools/ sit at the top of the tree but install inside tinytensor (issue 28):
`from tinytensor import nn` as `from torch import nn`, and no top-level `nn`, `models` or
`tools` package that a user's own project would shadow or be shadowed by."""
import importlib.util
import os
import subprocess
import sys

import tomllib

import tinytensor as tt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = {"tinytensor": "tinytensor", "nn": "tinytensor.nn", "models": "tinytensor.models",
           "tools": "tinytensor.tools"}


def _config():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def test_every_package_folder_is_listed_under_its_installed_name():
    found = set()
    for folder, name in FOLDERS.items():
        for here, dirs, files in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if "__init__.py" in files:
                rel = os.path.relpath(here, os.path.join(ROOT, folder))
                found.add(name if rel == "." else name + "." + rel.replace(os.sep, "."))
    config = _config()
    assert set(config["packages"]) == found
    assert config["package-dir"] == {v: k for k, v in FOLDERS.items() if k != "tinytensor"}


def test_subpackages_resolve_as_attributes_like_torch():
    assert tt.nn.Linear.__module__ == "tinytensor.nn.layers"
    assert tt.models.GPT.__module__.startswith("tinytensor.models.")
    assert tt.tools.__name__ == "tinytensor.tools"


def test_no_top_level_nn_models_or_tools_outside_the_checkout(tmp_path):
    """From a directory that is not the checkout, the old top-level names do not exist: a
    user's own `models/` package is theirs."""
    code = ("import importlib.util as u; "
            "print([n for n in ('nn', 'models', 'tools') if u.find_spec(n) is not None])")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "[]"


def test_a_users_models_package_does_not_shadow_ours(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("MINE = True\n")
    code = ("import models, tinytensor.models as ttm; "
            "print(models.MINE, ttm.__name__, hasattr(ttm, 'GPT'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "True tinytensor.models True"
    assert importlib.util.find_spec("tinytensor.nn") is not None
