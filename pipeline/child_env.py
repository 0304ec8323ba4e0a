"""The environment child processes start with: this process's, with what they need added. Beside
``jobs/settings.py`` (which reads every setting of the project) this is the one module that reads
the process environment: search paths a child must extend (PATH, PYTHONPATH, LD_LIBRARY_PATH), the
lent machine's ``OUT`` folder, and Triton's interpreter switch, which Triton reads at import."""

from __future__ import annotations

import os
from pathlib import Path


def child_environment(**changes: str) -> dict[str, str]:
    """This process's environment with ``changes``: what a child started now is given."""
    return {**os.environ, **changes}


def prepended(name: str, *folders: str) -> str:
    """The search path ``name`` with ``folders`` first (empty ones left out)."""
    return os.pathsep.join(filter(None, [*folders, os.environ.get(name, "")]))


def device_output(default: Path) -> Path:
    """Where a measurement leaves its files: the device tool's ``$OUT`` on a lent machine."""
    return Path(os.environ.get("OUT", default))


def interpret_triton() -> None:
    """Run Triton kernels in its CPU interpreter (a smoke run on a machine without a GPU); before
    anything imports Triton, which reads the switch then."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
