"""The README's Python examples run as written (in order, sharing one namespace).
Blocks fenced as ```python run; ```py marks an illustration that needs outside files."""
import os
import re

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def test_readme_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", open(README).read(), re.S)
    assert blocks, "the README has no Python examples"
    namespace = {}
    exec(compile("\n".join(blocks), "README.md", "exec"), namespace)
    assert namespace["h"].tolist() == [12.0]  # the custom Cube op's second derivative at 2
