"""A package's public names imported on first use (PEP 562), not when the package is: importing
``pipeline.audio.assembly_types`` for a constant, or one function of ``pipeline.text``, then costs
that module, not the whole stage (a CLI refusal imported all of assembly and the text stage)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_exports(package_globals: dict[str, object], exports: Mapping[str, str]) -> Callable[[str], object]:
    """The package's ``__getattr__``: each name in ``exports`` (name -> module) imported on first
    use and kept in the package, as an ordinary import would have put it there."""

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package_globals['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        package_globals[name] = value
        return value

    return __getattr__
