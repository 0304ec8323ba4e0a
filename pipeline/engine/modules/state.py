"""Reading a safetensors file straight onto the device and into a module built without weights.

Modules are built on the ``meta`` device (no memory, no random initialisation) and then take the
file's tensors as their own (``assign``). A file must hold exactly the module's keys, apart from
the few it names as unused, so a file from another release fails here with its name.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from torch import nn

from pipeline.errors import ModelError

REDOWNLOAD = "download the weights again (`tts-jobs model download`)"


def build_empty(make: Callable[[], nn.Module]) -> nn.Module:
    """``make()`` with every parameter and buffer on the meta device."""
    with torch.device("meta"):
        return make()


def file_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape, read from the file's header only."""
    try:
        with safe_open(str(path), framework="pt") as handle:
            names = handle.keys()
            return {key: tuple(handle.get_slice(key).get_shape()) for key in names}
    except (OSError, SafetensorError) as exc:
        raise ModelError(f"{path}: not a readable safetensors file ({exc}); {REDOWNLOAD}") from exc


def shape_of(shapes: dict[str, tuple[int, ...]], key: str, path: Path) -> tuple[int, ...]:
    if key not in shapes:
        raise ModelError(f"{path}: lacks {key}, so it is not chattts 0.2.5's file; {REDOWNLOAD}")
    return shapes[key]


def read_tensors(path: Path, device: torch.device, keys: Iterable[str]) -> dict[str, torch.Tensor]:
    """The tensors ``keys`` of ``path``, read onto ``device``."""
    try:
        with safe_open(str(path), framework="pt", device=_device_name(device)) as handle:
            return {key: handle.get_tensor(key) for key in keys}
    except (OSError, SafetensorError) as exc:
        raise ModelError(f"{path}: could not be read ({exc}); {REDOWNLOAD}") from exc


def load_into(module: nn.Module, path: Path, device: torch.device,
              unused: Collection[str] = ()) -> nn.Module:
    """``module`` (built by ``build_empty``) holding the tensors of ``path``, on ``device``.

    Raises:
        ModelError: a key missing from the file, one the module does not know, or a shape that
            differs, naming the file.
    """
    expected = set(module.state_dict().keys())
    present = set(file_shapes(path))
    missing = sorted(expected - present)
    unknown = sorted(present - expected - set(unused))
    if missing or unknown:
        problem = f"lacks {missing[0]}" if missing else f"holds an unknown tensor {unknown[0]}"
        raise ModelError(f"{path}: {problem}, so it is not chattts 0.2.5's file; {REDOWNLOAD}")
    state = read_tensors(path, device, sorted(expected))
    try:
        module.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as exc:  # a shape that differs from the one the other tensors imply
        first = str(exc).strip().splitlines()[-1].strip()
        raise ModelError(f"{path}: {first}; {REDOWNLOAD}") from exc
    return module.eval().requires_grad_(False)


def count_indexed(keys: Iterable[str], prefix: str) -> int:
    """How many numbered entries ``prefix.N.…`` the keys hold (the depth of a layer list)."""
    indices = {key[len(prefix):].split(".", 1)[0] for key in keys if key.startswith(prefix)}
    return len([i for i in indices if i.isdigit()])


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index}"
    return str(device)
