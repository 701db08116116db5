"""``torch.tpu.profiler`` (also ``torch_tpu.profiler``): TorchTPU's profiler options for PyTorch's profiler.

::

    from torch.tpu.profiler import TpuProfilerConfig
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.TPU],
                                experimental_config=TpuProfilerConfig(run_dir="/tmp/prof")) as prof:
        step()

:class:`TpuProfilerConfig` is a ``torch.profiler._ExperimentalConfig`` whose ``custom_profiler_config`` string
(``"host_tracer_level:2,device_tracer_level:1,python_tracer_level:0,run_dir:...,worker_rank:\\"0\\""``, TorchTPU's
format) reaches the tpu activity profiler (csrc/eager/profiler.cpp) through Kineto. What each field does here:

- ``device_tracer_level``: ``0`` records no device programs (host activity only), ``1`` (default) records them;
- ``run_dir``: besides the device rows of PyTorch's own trace, each trace's device programs are written to
  ``<run_dir>/<host>[_<worker_rank>].tpu_trace.json`` (Chrome trace format, opens in Perfetto);
- ``worker_rank``: the file name's suffix (a string, without ``:`` or ``,``);
- ``host_tracer_level``, ``python_tracer_level``: levels of XLA's host and Python tracers (TraceMe), which this
  runtime does not have; accepted and recorded in the string, PyTorch's host activity (and ``with_stack``) is what
  shows the host side;
- ``experimental_options``: options of XLA's profiler; this runtime knows none, so with
  ``check_experimental_options=True`` (the default) any raises ValueError, with ``False`` they are ignored.

The device rows come from the runtime's launch trace (when each program was launched and finished). Where a PJRT
plugin offers PJRT's profiler extension (TPU and GPU plugins) its own hardware trace is finer; this package does not
collect it yet (the CPU plugin, the one it is tested on, has no such extension: docs/profiling.md).
"""

from __future__ import annotations

import os
from typing import Any, Iterator, Mapping, Optional, Union

import torch

__all__ = ["TpuProfilerConfig"]

_STABLE_KEYS = frozenset({"check_experimental_options", "device_tracer_level", "host_tracer_level",
                          "python_tracer_level", "run_dir", "worker_rank"})
# XLA profiler options this runtime acts on (none yet): experimental keys checked against it.
_KNOWN_EXPERIMENTAL: frozenset = frozenset()


def _format(value: Union[int, bool, str]) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    raise TypeError(f"profiler option values must be int, bool or str, got {type(value).__name__}")


def _level(name: str, value: Any, top: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= value <= top:
        raise ValueError(f"{name} must be between 0 and {top}, got {value}")
    return value


class TpuProfilerConfig(torch.profiler._ExperimentalConfig):  # type: ignore[misc,name-defined]
    r"""TorchTPU's tpu profiler options, passed as ``torch.profiler.profile(experimental_config=...)``.

    Args:
        host_tracer_level: 0-3, XLA's host tracer verbosity (no XLA host tracer here: recorded only).
        device_tracer_level: 0 (no device programs recorded) or 1 (default: recorded).
        python_tracer_level: 0 or 1, XLA's Python tracer (recorded only; use ``with_stack=True``).
        run_dir: directory for the per-trace device program file ``<host>[_<worker_rank>].tpu_trace.json``.
        worker_rank: suffix of that file's name (a string).
        experimental_options: XLA profiler options (int, bool or str values).
        check_experimental_options: raise ValueError for experimental options this runtime does not know.
    """

    def __init__(self, *, host_tracer_level: int = 2, device_tracer_level: int = 1, python_tracer_level: int = 0,
                 run_dir: Optional[Union[str, "os.PathLike[str]"]] = None, worker_rank: Optional[str] = None,
                 experimental_options: Optional[Mapping[str, Union[int, bool, str]]] = None,
                 check_experimental_options: bool = True) -> None:
        levels = (_level("host_tracer_level", host_tracer_level, 3),
                  _level("device_tracer_level", device_tracer_level, 1),
                  _level("python_tracer_level", python_tracer_level, 1))
        if worker_rank is not None:
            if not isinstance(worker_rank, str):
                raise TypeError(f"worker_rank must be a string, got {type(worker_rank)}")
            if ":" in worker_rank or "," in worker_rank or "/" in worker_rank:
                raise ValueError(f"worker_rank cannot contain ':', ',' or '/': {worker_rank!r}")
        run_dir_s = os.fspath(run_dir) if run_dir is not None else None
        if run_dir_s is not None and "," in run_dir_s:
            raise ValueError(f"run_dir cannot contain ',': {run_dir_s!r}")
        options = dict(experimental_options or {})
        for key in options:
            if key in _STABLE_KEYS:
                raise ValueError(f"Experimental option key cannot clash with stable option: {key!r}")
            if ":" in key or "," in key:
                raise ValueError(f"Experimental option keys cannot contain ':' or ',': {key!r}")
        unknown = sorted(set(options) - _KNOWN_EXPERIMENTAL)
        if unknown and check_experimental_options:
            raise ValueError(
                f"unrecognized experimental profiler options {unknown}: this runtime has no XLA profiler options "
                "(pass check_experimental_options=False to ignore them)")

        def parts() -> Iterator[str]:
            yield f"host_tracer_level:{levels[0]}"
            yield f"device_tracer_level:{levels[1]}"
            yield f"python_tracer_level:{levels[2]}"
            if run_dir_s is not None:
                yield f"run_dir:{run_dir_s}"
            if worker_rank is not None:
                yield f"worker_rank:{_format(worker_rank)}"
            if options:
                for key, value in options.items():
                    yield f"{key}:{_format(value)}"
                yield f"check_experimental_options:{str(bool(check_experimental_options)).lower()}"

        config = ",".join(parts())
        super().__init__(custom_profiler_config=config)
        self.custom_profiler_config = config
        self.host_tracer_level, self.device_tracer_level, self.python_tracer_level = levels
        self.run_dir, self.worker_rank, self.experimental_options = run_dir_s, worker_rank, options

    def trace_file(self) -> Optional[str]:
        r"""The device program file a trace with this config writes (None without ``run_dir``)."""
        if self.run_dir is None:
            return None
        import socket

        name = socket.gethostname() + (f"_{self.worker_rank}" if self.worker_rank else "")
        return os.path.join(self.run_dir, f"{name}.tpu_trace.json")


def __dir__() -> list:
    return list(__all__)
