"""The IIR filter the loudness meter runs (second-order sections), without importing scipy.signal.

``scipy.signal`` is one compiled loop (``_sosfilt``) for us, but importing the package loads
scipy.stats and its array-API layer: ~1.1 CPU-s in every process that measures loudness (a run,
each stitch and measure helper), more than measuring a short book takes. The compiled loop is
loaded from its own file instead and called as ``scipy.signal.sosfilt`` calls it, for the 1-D
signals the meter filters; where that cannot be done (another scipy's layout), ``scipy.signal``
serves. ``tests/test_audio_loudness.py`` checks both give the same samples and states.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import logging
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


def sosfilt(sos: np.ndarray, x: np.ndarray, zi: np.ndarray | None = None) -> Any:
    """``scipy.signal.sosfilt(sos, x[, zi=zi])`` of a 1-D ``x``: the filtered samples, and the
    final state where ``zi`` is given."""
    kernel = compiled_kernel()
    if kernel is None or np.ndim(x) != 1:
        from scipy.signal import sosfilt as scipy_sosfilt

        return scipy_sosfilt(sos, x) if zi is None else scipy_sosfilt(sos, x, zi=zi)
    sos = np.asarray(sos)
    sections = sos.shape[0]
    dtype = np.result_type(*([sos, x] if zi is None else [sos, x, np.asarray(zi)]))
    if dtype.char not in "fdgFDG":
        raise NotImplementedError(f"input type '{dtype}' not supported")
    state = np.zeros((1, sections, 2), dtype) if zi is None else np.array(zi, dtype).reshape(1, sections, 2)
    if zi is not None and np.shape(zi) != (sections, 2):
        raise ValueError(f"zi must have shape {(sections, 2)}, got {np.shape(zi)}")
    out = np.array(np.reshape(x, (1, -1)), dtype, order="C")  # filtered in place
    kernel(sos.astype(dtype, copy=False), out, state)
    return out[0] if zi is None else (out[0], state[0])


_MODULE = "scipy.signal._sosfilt"
_loading = threading.Lock()


@functools.cache
def compiled_kernel() -> Callable[..., None] | None:
    """scipy's compiled ``_sosfilt``: the module scipy.signal loaded where it was imported, else
    loaded from its file (once per process, under a lock: an extension initialised twice, as two
    threads measuring their first chapters at once would, is unusable even to scipy.signal) and
    registered under its own name, so a later ``import scipy.signal`` takes the same module."""
    with _loading:
        loaded = sys.modules.get(_MODULE)
        if loaded is not None:
            return getattr(loaded, "_sosfilt", None)
        try:
            spec = importlib.util.find_spec("scipy")
            folder = Path(spec.origin).parent / "signal" if spec is not None and spec.origin else None
            paths = [f for f in (sorted(folder.glob("_sosfilt.*")) if folder is not None else [])
                     if any(f.name.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES)]
            if not paths:
                return None
            loader = importlib.machinery.ExtensionFileLoader(_MODULE, str(paths[0]))
            module_spec = importlib.util.spec_from_file_location(_MODULE, paths[0], loader=loader)
            if module_spec is None:
                return None
            module = importlib.util.module_from_spec(module_spec)
            loader.exec_module(module)
            sys.modules[_MODULE] = module
            return module._sosfilt  # type: ignore[no-any-return]
        except Exception as exc:  # noqa: BLE001 - scipy.signal itself then serves, only slower to import
            log.debug("scipy's compiled sosfilt not loaded directly (%s); using scipy.signal", exc)
            return None
