"""The HPC packaging is well formed though this machine cannot run it: the Apptainer
definition parses with spython (the Singularity/Apptainer recipe parser on PyPI), builds
`sagitta` with MPI and runs it, and its build script and the README's Slurm script pass
`bash -n`. (Apptainer is not in Debian's repositories, so the image is not built here.)
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from spython.main.parse.parsers import SingularityParser

ROOT = Path(__file__).resolve().parents[2]
DEFINITION = ROOT / "packaging" / "sagitta.def"


def bash_syntax(script: str) -> None:
    result = subprocess.run(
        ["bash", "-n"], input=script, text=True, capture_output=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_the_apptainer_definition_parses_and_builds_the_mpi_server() -> None:
    recipes = SingularityParser(str(DEFINITION)).recipe
    assert list(recipes) == ["spython-base"], recipes
    recipe = recipes["spython-base"]
    assert recipe.fromHeader.startswith("debian:"), recipe.fromHeader
    assert recipe.files == [". /opt/sagitta-src"]
    post = "\n".join(recipe.install)
    assert "--features mpi" in post and "openmpi-bin" in post, post
    assert "install -m 0755 target/release/sagitta /usr/local/bin/sagitta" in post
    assert recipe.cmd == 'exec /usr/local/bin/sagitta "$@"'
    # the %post section as bash reads it (continuation lines joined back)
    text = DEFINITION.read_text()
    body = text.split("%post", 1)[1].split("\n%", 1)[0]
    bash_syntax(body)
    assert "Bootstrap: docker" in text


def test_the_readme_slurm_script_is_valid_bash() -> None:
    readme = (ROOT / "README.md").read_text()
    scripts = re.findall(r"```sh\n(#!/bin/bash\n#SBATCH.*?)```", readme, re.S)
    assert len(scripts) == 1, "the README holds one Slurm batch script"
    bash_syntax(scripts[0])
    assert "sagitta serve --mpi" in scripts[0]
    assert re.search(r"^srun ", scripts[0], re.M), scripts[0]
