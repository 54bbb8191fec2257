"""The README's Python snippets run as written; the server snippet runs against a real
`sagitta serve` (its fixed URL is pointed at the test's server). Comment lines that end a
snippet (`# ...`) are output it must print."""

import contextlib
import io
import os
import re
from pathlib import Path

from server_process import running_server

README = Path(__file__).resolve().parents[2] / "README.md"
README_URL = "http://127.0.0.1:6333"


def expected_output(block: str) -> list:
    """The comment lines at the end of a snippet, without their `# `."""
    trailing = []
    for line in reversed(block.rstrip("\n").split("\n")):
        if not line.startswith("# "):
            break
        trailing.append(line[2:])
    return list(reversed(trailing))


def test_readme_python_snippets_run(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "README has no python snippet"
    server_blocks = [block for block in blocks if README_URL in block]
    assert server_blocks, "README has no server snippet"
    assert any(expected_output(block) for block in blocks)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with running_server(tmp_path / "server-data") as server:
            for block in blocks:
                code = block.replace(README_URL, server.url)
                printed = io.StringIO()
                with contextlib.redirect_stdout(printed):
                    # exec: the code is the README's own.
                    exec(compile(code, str(README), "exec"), {})
                lines = printed.getvalue().splitlines()
                for expected in expected_output(block):
                    assert expected in lines, (expected, lines)
    finally:
        os.chdir(cwd)
    assert (tmp_path / "vectors.sgt").exists()
    assert (tmp_path / "sagitta-data" / "MANIFEST").exists()
    assert (tmp_path / "server-data" / "collections" / "docs").is_dir()
    assert (tmp_path / "llama-data" / "collections" / "notes").is_dir()
