"""Streams and events for the tpu device.

A PJRT device runs its work from one queue, so every :class:`Stream` on a device is a name for that queue:
work issued "on" any stream is ordered with work on all others, and data dependencies between executions
are tracked by the runtime. ``wait_event`` / ``wait_stream`` therefore need no device-side action.

Events are real: :meth:`Event.record` captures every execution launched so far on the device
(``torch_tpu._C._Marker``); :meth:`Event.synchronize` blocks until those finish, :meth:`Event.query` reports
whether they have, and :meth:`Event.elapsed_time` gives the difference of the host-observed completion
times in milliseconds. Because a completion time is observed by waiting, an ``enable_timing=True`` event
waits for its work when recorded (timing events synchronize; plain events do not).
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Union

import torch

from . import _aten_kernels

__all__ = [
    "Stream",
    "Event",
    "StreamContext",
    "current_stream",
    "default_stream",
    "set_stream",
    "stream",
    "TpuStream",
    "TpuEvent",
]

# c10::DeviceType::PrivateUse1 (torch's device type enum value; the backend renamed to "tpu").
_PRIVATEUSE1 = 20
_DEFAULT_STREAM_ID = 0

Device = Union[int, str, torch.device, None]


def _C():
    from torch_tpu import _C as C  # the extension; imported lazily to keep this module import-light

    return C


def _current_device_index() -> int:
    return int(_C()._get_device())


def _device_index(device: Device, optional: bool = True) -> int:
    """Normalize ``device`` (int, "tpu", "tpu:1", torch.device, None) to a device index.

    ``None`` (and a "tpu" device without an index) mean the current device when ``optional``.
    """
    if device is None:
        if optional:
            return _current_device_index()
        raise ValueError("Expected a tpu device, got None")
    if isinstance(device, torch.Stream):
        return int(device.device_index)
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "tpu":
            raise ValueError(f"Expected a tpu device, got {device}")
        if device.index is None:
            if optional:
                return _current_device_index()
            raise ValueError(f"Expected a tpu device with an index, got {device}")
        return int(device.index)
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    raise ValueError(f"Invalid device {device!r}")


_id_lock = threading.Lock()
_next_stream_id = 1


def _new_stream_id() -> int:
    global _next_stream_id
    with _id_lock:
        sid = _next_stream_id
        _next_stream_id += 1
    return sid


class Stream(torch.Stream):
    r"""A tpu stream. All streams of a device share its single in-order queue (see module docs).

    Args:
        device: the device (index, "tpu:i" or torch.device); the current device if None.
        priority: accepted for API compatibility; ignored.
    """

    def __new__(cls, device: Device = None, priority: int = 0, **kwargs: Any) -> "Stream":
        if {"stream_id", "device_index", "device_type"} <= kwargs.keys():
            # Rebuild from the (stream_id, device_index, device_type) triple (dynamo / pickling).
            if int(kwargs["device_type"]) != _PRIVATEUSE1:
                raise ValueError("tpu Stream built with a non-tpu device_type")
            return super().__new__(
                cls,
                stream_id=int(kwargs["stream_id"]),
                device_index=int(kwargs["device_index"]),
                device_type=_PRIVATEUSE1,
                priority=priority,
            )
        if kwargs:
            raise TypeError(f"unexpected arguments {sorted(kwargs)}")
        idx = _device_index(device)
        return super().__new__(
            cls,
            stream_id=_new_stream_id(),
            device_index=idx,
            device_type=_PRIVATEUSE1,
            priority=priority,
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    @classmethod
    def _default(cls, device_index: int) -> "Stream":
        return super().__new__(
            cls, stream_id=_DEFAULT_STREAM_ID, device_index=device_index, device_type=_PRIVATEUSE1
        )

    def query(self) -> bool:
        r"""True if all work issued so far on this stream's device has finished."""
        m = _C()._Marker()
        m.record(self.device_index)
        return bool(m.query())

    def synchronize(self) -> None:
        r"""Wait for all work issued so far on this stream's device."""
        _C()._synchronize(self.device_index)

    def wait_event(self, event: "Event") -> None:
        r"""Make later work on this stream wait for ``event`` (implicit: the device queue is in order)."""
        if not isinstance(event, Event):
            raise TypeError(f"expected a torch.tpu.Event, got {type(event).__name__}")

    def wait_stream(self, stream: "Stream") -> None:
        r"""Make later work on this stream wait for work issued on ``stream`` (implicit, see module docs)."""
        if not isinstance(stream, torch.Stream):
            raise TypeError(f"expected a stream, got {type(stream).__name__}")

    def record_event(self, event: Optional["Event"] = None) -> "Event":
        r"""Record ``event`` (a new one if None) on this stream and return it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __enter__(self) -> "Stream":
        ctx = StreamContext(self)
        ctx.__enter__()
        self.__dict__.setdefault("_ctx_stack", []).append(ctx)
        return self

    def __exit__(self, *exc: Any) -> None:
        stack = self.__dict__.get("_ctx_stack")
        if stack:
            stack.pop().__exit__(*exc)

    def __repr__(self) -> str:
        return f"torch.tpu.Stream(device=tpu:{self.device_index}, stream_id={self.stream_id})"


class Event(torch.Event):
    r"""A tpu event: a marker for all work issued on a device up to the point it is recorded.

    Args:
        enable_timing: allow :meth:`elapsed_time` on this event.
        blocking, interprocess: accepted for API compatibility; ignored.
        device: the device; taken from the stream at :meth:`record` time if None.
    """

    def __new__(
        cls,
        enable_timing: bool = False,
        blocking: bool = False,
        interprocess: bool = False,
        device: Device = None,
        **kwargs: Any,
    ) -> "Event":
        if kwargs:
            raise TypeError(f"unexpected arguments {sorted(kwargs)}")
        if isinstance(enable_timing, (str, torch.device)):
            # torch.Event(device, *, enable_timing=...) calling convention.
            device, enable_timing = enable_timing, False
        # The C++ base event is never recorded (the methods below replace it); it only makes this a
        # torch.Event (dynamo requires that).
        try:
            return super().__new__(cls, device=torch.device("tpu"), enable_timing=bool(enable_timing))
        except RuntimeError:  # no device guard registered (extension without one)
            return super().__new__(cls, device=torch.device("cpu"), enable_timing=bool(enable_timing))

    def __init__(
        self,
        enable_timing: Any = False,
        blocking: bool = False,
        interprocess: bool = False,
        device: Device = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(enable_timing, (str, torch.device)):
            device, enable_timing = enable_timing, False
        self._enable_timing = bool(enable_timing)
        self._marker: Any = None
        self._device_index: Optional[int] = None if device is None else _device_index(device)

    @property
    def device(self) -> Optional[torch.device]:  # type: ignore[override]
        return None if self._device_index is None else torch.device("tpu", self._device_index)

    @property
    def enable_timing(self) -> bool:
        return self._enable_timing

    @property
    def is_recorded(self) -> bool:
        return self._marker is not None

    def record(self, stream: Optional[torch.Stream] = None) -> None:
        r"""Capture all work issued so far on ``stream``'s device (the current stream if None)."""
        if stream is None:
            idx = self._device_index if self._device_index is not None else _current_device_index()
        else:
            idx = int(stream.device_index)
        if self._device_index is not None and idx != self._device_index:
            raise RuntimeError(
                f"Event was created for tpu:{self._device_index} but recorded on a stream of tpu:{idx}"
            )
        m = _C()._Marker()
        m.record(idx)
        if self._enable_timing:
            # A marker's completion time is taken when it is first waited on, so a timing event waits
            # here: its time is then when the work before it finished, not when someone later asked.
            # (Timing events therefore synchronize the host with the device at record().)
            m.wait()
        self._marker = m
        self._device_index = idx

    def wait(self, stream: Optional[torch.Stream] = None) -> None:
        r"""Make later work on ``stream`` wait for this event (implicit: the device queue is in order)."""

    def query(self) -> bool:
        r"""True if the work captured by this event has finished (True if never recorded)."""
        return True if self._marker is None else bool(self._marker.query())

    def synchronize(self) -> None:
        r"""Block until the work captured by this event has finished (no-op if never recorded)."""
        if self._marker is not None:
            self._marker.wait()

    def _completion_time(self) -> float:
        self.synchronize()
        t = self._marker.time()
        if t is None:
            raise RuntimeError("tpu Event: completion time unavailable")
        return float(t)

    def elapsed_time(self, end_event: "Event") -> float:
        r"""Milliseconds between this event's and ``end_event``'s completion (both need enable_timing)."""
        if not isinstance(end_event, Event):
            raise TypeError(f"expected a torch.tpu.Event, got {type(end_event).__name__}")
        if not (self._enable_timing and end_event._enable_timing):
            raise RuntimeError("Both events must be created with enable_timing=True to measure elapsed time")
        if self._marker is None or end_event._marker is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time")
        start = self._completion_time()
        end = end_event._completion_time()
        return (end - start) * 1000.0

    def __repr__(self) -> str:
        state = "unrecorded" if self._marker is None else ("complete" if self.query() else "pending")
        return f"torch.tpu.Event(device={self.device}, enable_timing={self._enable_timing}, {state})"


# Upstream torch_tpu spellings (torch.tpu shims import these names from torch_tpu.api.streams).
TpuStream = Stream
TpuEvent = Event

# ---- current stream bookkeeping (per thread, per device) ----

_tls = threading.local()
_default_streams: Dict[int, Stream] = {}
_default_lock = threading.Lock()


def default_stream(device: Device = None) -> Stream:
    r"""The default stream of ``device`` (the current device if None)."""
    idx = _device_index(device)
    s = _default_streams.get(idx)
    if s is None:
        with _default_lock:
            s = _default_streams.setdefault(idx, Stream._default(idx))
    return s


def _current_map() -> Dict[int, Stream]:
    m = getattr(_tls, "streams", None)
    if m is None:
        m = _tls.streams = {}
    return m


def current_stream(device: Device = None) -> Stream:
    r"""The stream selected for ``device`` in this thread (its default stream unless one was set)."""
    idx = _device_index(device)
    s = _current_map().get(idx)
    return s if s is not None else default_stream(idx)


def set_stream(stream: Optional[torch.Stream]) -> None:
    r"""Select ``stream`` for its device in this thread (no-op if None)."""
    if stream is None:
        return
    if not isinstance(stream, Stream):
        if isinstance(stream, torch.Stream) and stream.device_type == _PRIVATEUSE1:
            stream = Stream(
                stream_id=stream.stream_id, device_index=stream.device_index, device_type=_PRIVATEUSE1
            )
        else:
            raise TypeError(f"expected a torch.tpu.Stream, got {stream!r}")
    _current_map()[int(stream.device_index)] = stream


def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
    set_stream(Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))


class StreamContext:
    r"""Context manager selecting ``stream`` (and its device) for the block; no-op if ``stream`` is None."""

    def __init__(self, stream: Optional[torch.Stream]) -> None:
        self.stream = stream
        self._prev_stream: Optional[Stream] = None
        self._prev_device: Optional[int] = None

    def __enter__(self) -> Optional[torch.Stream]:
        s = self.stream
        if s is None:
            return None
        C = _C()
        self._prev_device = int(C._get_device())
        idx = int(s.device_index)
        if idx != self._prev_device:
            C._set_device(idx)
        self._prev_stream = _current_map().get(idx)
        set_stream(s)
        return s

    def __exit__(self, *exc: Any) -> None:
        s = self.stream
        if s is None:
            return
        idx = int(s.device_index)
        m = _current_map()
        if self._prev_stream is None:
            m.pop(idx, None)
        else:
            m[idx] = self._prev_stream
        if self._prev_device is not None and self._prev_device != idx:
            _C()._set_device(self._prev_device)


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    r"""Context manager selecting ``stream`` for the block (``with torch.tpu.stream(s): ...``)."""
    return StreamContext(stream)


# ---- Tensor.record_stream ----



def _record_stream(self: torch.Tensor, s: torch.Stream) -> None:
    r"""``aten::record_stream`` for tpu tensors: mark ``self``'s memory as used by work queued on ``s``.

    On CUDA this keeps the caching allocator from handing the block to another tensor until the work queued on
    ``s`` at the tensor's release has finished. Here a storage's memory is its PJRT buffer, and a buffer is never
    reused while a queued program reads it: the runtime destroys a released buffer only after the launches reading
    it (the CPU plugin's destroy waits for them on the runtime's destroyer thread; TPU and GPU plugins free a buffer
    after its readers), and a written storage gets a new buffer rather than overwriting one in use. Every stream of
    a device is that device's single in-order queue. So recording needs no bookkeeping beyond the checks CUDA makes:
    ``s`` must be a tpu stream of the tensor's device.
    """
    if not isinstance(s, torch.Stream):
        raise TypeError(f"record_stream(): expected a torch.Stream, got {type(s).__name__}")
    if int(s.device_type) != _PRIVATEUSE1:
        raise RuntimeError(f"record_stream(): a tpu tensor can only be recorded on a tpu stream, got a stream of "
                           f"device {s.device}")
    if self.device.index is not None and int(s.device_index) != self.device.index:
        raise RuntimeError(f"record_stream(): the stream is on tpu:{int(s.device_index)} but the tensor is on "
                           f"{self.device}")


def _install_record_stream() -> None:
    r"""Registers ``aten::record_stream`` for the tpu device (PyTorch implements it for CUDA only)."""
    _aten_kernels.register("record_stream", _record_stream)
