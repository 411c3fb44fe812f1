"""An example's "Try it locally" steps, run as its README writes them.

:func:`steps` reads the README's fenced ``sh`` blocks under that heading; :func:`clone` lays a
tree to run them in, as the repository root of a fresh clone after ``make sdk-dist``: the light
SDK's wheel in ``dist/`` (built as ``make sdk-dist`` builds it, by :func:`build_sdk_dist`, but
without an isolated build environment: no index), ``.venv`` the test's virtualenv, and the
repository's ``examples`` (copied). Every file the steps write (``build/``, ``function.zip``) lands
there, not in the repository. :func:`environment` is how the steps run offline: pip, told by
its own environment variables, reaches no index and installs no dependency, which the test's
virtualenv already holds; nothing else of the steps' commands changes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
PACKAGING = ROOT / "packaging" / "jobgate-sdk"
MAKE_SDK_DIST = "make sdk-dist"


def build_sdk_dist(tree: Path) -> Path:
    """``make sdk-dist``'s sdist and wheel, built in ``tree`` (a copy of the packaging folder
    beside a link to this tree's ``sdk``, so the build writes nothing into the repository);
    returns the folder holding them, with the build's output in ``build.log``."""
    shutil.copytree(PACKAGING, tree / "packaging" / "jobgate-sdk", symlinks=True)
    for leftover in (tree / "packaging" / "jobgate-sdk").glob("*.egg-info"):
        shutil.rmtree(leftover)
    (tree / "sdk").symlink_to(ROOT / "sdk")  # what packaging/jobgate-sdk/sdk points to
    out = tree / "dist"
    built = subprocess.run(
        [
            *(sys.executable, "-m", "build", "--no-isolation", "--skip-dependency-check"),
            *("--outdir", str(out), str(tree / "packaging" / "jobgate-sdk")),
        ],
        check=True,
        capture_output=True,
    )
    (out / "build.log").write_bytes(built.stdout + built.stderr)
    return out


def steps(readme: Path, heading: str = "## Try it locally") -> list[str]:
    """The ``sh`` blocks of the README's section under ``heading``, in order."""
    text = readme.read_text()
    section = text[text.index(heading) + len(heading) :]
    section = section[: section.find("\n## ")] if "\n## " in section else section
    blocks = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    assert blocks, f"{readme} shows its local steps"
    return blocks


def without_make_sdk_dist(block: str) -> str:
    """The block less its first line, ``make sdk-dist``, which :func:`clone` has done."""
    first, _, rest = block.partition("\n")
    assert first == MAKE_SDK_DIST, block
    return rest


def clone(tmp: Path) -> Path:
    """A tree to run the steps in: ``dist/`` with the SDK's wheel, ``.venv`` and ``examples``."""
    tree = tmp / "clone"
    build_sdk_dist(tmp / "sdk-dist")
    tree.mkdir()
    shutil.copytree(tmp / "sdk-dist" / "dist", tree / "dist")
    (tree / ".venv").symlink_to(sys.prefix)
    # A copy, not a link: a step run in examples/NAME reaches ../../.venv.
    shutil.copytree(
        ROOT / "examples", tree / "examples", ignore=shutil.ignore_patterns("node_modules")
    )
    return tree


def environment(**extra: str) -> dict[str, str]:
    """The steps' environment: offline pip, the virtualenv first on the path."""
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "PIP_NO_INDEX": "1",
        "PIP_NO_DEPS": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        **extra,
    }
    for leaked in ("PYTHONPATH", "JOBGATE_WORKER_SECRET", "VIRTUAL_ENV"):
        if leaked not in extra:
            env.pop(leaked, None)
    return env


def imports_sdk_from(tree: Path, folder: str, env: dict[str, str]) -> bool:
    """Whether ``PYTHONPATH=folder .venv/bin/python`` in ``tree`` imports ``sdk`` from that
    folder (the installed wheel), not from the repository."""
    found = subprocess.run(
        [".venv/bin/python", "-c", "import sdk; print(sdk.__file__)"],
        cwd=tree,
        env={**env, "PYTHONPATH": folder},
        capture_output=True,
        text=True,
        check=True,
    )
    return found.stdout.startswith(str(tree / folder / "sdk"))
