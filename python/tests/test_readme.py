"""The README's Python snippet runs as written."""

import os
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_snippet_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "README has no python snippet"
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for block in blocks:
            exec(compile(block, str(README), "exec"), {})  # noqa: S102 - the README is ours
    finally:
        os.chdir(cwd)
    assert (tmp_path / "vectors.sgt").exists()
    assert (tmp_path / "sagitta-data" / "MANIFEST").exists()
