"""Progress reporting for long calls (``wait_until_indexed``, ``import_collection``, remote
uploads).

A ``progress`` argument is ``None`` (a tqdm bar when the session is interactive — standard
error is a terminal — and tqdm is installed; otherwise nothing), ``False`` (nothing),
``True`` (a tqdm bar; tqdm must be installed) or any callable ``progress(done, total)``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Union

#: What a ``progress`` argument may be (see the module docstring). Union, not ``|``:
#: evaluated at run time, and the package supports Python 3.9.
Progress = Union[bool, Callable[[int, int], None], None]


class _Bar:
    """A tqdm bar driven by ``(done, total)`` calls."""

    def __init__(self, description: str) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(desc=description, unit="pt", total=0)

    def __call__(self, done: int, total: int) -> None:
        if self._bar.total != total:
            self._bar.total = total
        self._bar.n = done
        self._bar.refresh()

    def close(self) -> None:
        self._bar.close()


def _tqdm_installed() -> bool:
    try:
        importlib.import_module("tqdm")
    except ImportError:
        return False
    return True


def resolve(progress: Progress, description: str) -> Callable[[int, int], None] | None:
    """The callback a ``progress`` argument stands for (see the module docstring); a
    ``TypeError`` for anything else (the compiled module passes what its caller gave)."""
    if progress is False:
        return None
    if progress is None:
        interactive = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
        return _Bar(description) if interactive and _tqdm_installed() else None
    if progress is True:
        return _Bar(description)
    if callable(progress):
        return progress
    raise TypeError(f"`progress` must be None, a bool or a callable, not {progress!r}")


def finish(callback: Callable[[int, int], None] | None) -> None:
    """Closes a bar made by :func:`resolve` (a user's callable is left alone)."""
    if isinstance(callback, _Bar):
        callback.close()
