"""Device, dtype, layout and pin_memory arguments of ops that dispatch on an input tensor.

``torch.full_like(x, 3, device="cpu")`` reaches the tpu kernel through ``x`` but asks for its result elsewhere. The
walk below covers every aten schema with a Tensor input and a ``device`` argument: it builds a call from the schema
(small float tensors, fixed numbers), runs it with CPU inputs as the reference, and checks the result's device,
dtype, shape, layout and (for deterministic ops) values for tpu->cpu, cpu->tpu, tpu:0->tpu:1, tpu:1->"tpu" (the
current device, as on CUDA), tpu->meta and dtype overrides, in strict and fused eager mode; a call the reference
rejects must raise the same exception type. Schemas the walk cannot build a call for are listed in NOT_BUILT with the
reason, and the test asserts that table is exactly what the walk finds unbuildable.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import pytest
import torch

import torch_tpu

CPU = torch.device("cpu")
T0 = torch.device("tpu", 0)
T1 = torch.device("tpu", 1)
META = torch.device("meta")

_NO_DEVICE = "the device argument does not name the result's device (the CPU call with device='meta' does not " \
             "return a meta tensor)"
_REJECTED = "the CPU reference rejects a call built from small dense float tensors"
_NO_TENSOR = "returns no tensor"
_WRITES = "writes an argument (out=, in-place): the result is that argument"
_JIT_ONLY = "a TorchScript-only schema, not a dispatcher operator"

# Every schema of the walk that gets no call, and why (asserted exact by test_not_built_table_is_exact).
NOT_BUILT: Dict[str, str] = {
    "aten::as_tensor": _JIT_ONLY,
    "aten::to.prim_Device": _JIT_ONLY,
    "aten::is_pinned": _NO_TENSOR,
    "aten::_assert_tensor_metadata": _NO_TENSOR,
    "aten::_resize_output_": _WRITES,
    "aten::_resize_output.out": _WRITES,
    "aten::_pin_memory.out": _WRITES,
    "aten::_nested_tensor_from_tensor_list.out": _WRITES,
    "aten::_nested_tensor_from_tensor_list": _NO_DEVICE,
    "aten::pin_memory": _REJECTED,
    "aten::_pin_memory": _REJECTED,
    "aten::_resize_output": _REJECTED,
    "aten::_sparse_coo_tensor_with_dims_and_tensors": _REJECTED,
    "aten::_sparse_coo_tensor_unsafe": _REJECTED,
    "aten::sparse_coo_tensor.indices": _REJECTED,
    "aten::sparse_coo_tensor.indices_size": _REJECTED,
    "aten::_sparse_bsc_tensor_unsafe": _NO_DEVICE,
    "aten::_sparse_bsr_tensor_unsafe": _NO_DEVICE,
    "aten::_sparse_csc_tensor_unsafe": _NO_DEVICE,
    "aten::_sparse_csr_tensor_unsafe": _NO_DEVICE,
    "aten::_sparse_compressed_tensor_unsafe": _REJECTED,
    "aten::sparse_bsc_tensor.ccol_row_value_size": _NO_DEVICE,
    "aten::sparse_bsc_tensor.ccol_row_value": _REJECTED,
    "aten::sparse_bsr_tensor.crow_col_value_size": _NO_DEVICE,
    "aten::sparse_bsr_tensor.crow_col_value": _REJECTED,
    "aten::sparse_csc_tensor.ccol_row_value_size": _NO_DEVICE,
    "aten::sparse_csc_tensor.ccol_row_value": _REJECTED,
    "aten::sparse_csr_tensor.crow_col_value_size": _NO_DEVICE,
    "aten::sparse_csr_tensor.crow_col_value": _REJECTED,
    "aten::sparse_compressed_tensor.comp_plain_value_size": _REJECTED,
    "aten::sparse_compressed_tensor.comp_plain_value": _REJECTED,
    "aten::_empty_per_channel_affine_quantized": _REJECTED,
    "aten::empty_quantized": _REJECTED,
}


def _full_name(s: Any) -> str:
    return s.name + ("." + s.overload_name if s.overload_name else "")


def _walked_schemas() -> List[Any]:
    """aten schemas with a Tensor input and a device argument."""
    out = []
    for s in torch._C._jit_get_all_schemas():
        if not s.name.startswith("aten::"):
            continue
        if not any("Tensor" in str(a.type) for a in s.arguments):
            continue
        if not any(str(a.type) in ("Device", "Optional[Device]") for a in s.arguments):
            continue
        out.append(s)
    return out


class CannotBuild(Exception):
    pass


# Values of the arguments a call is built from (by name; a 0-d tensor for the numbers that may be tensors).
_SELF = [[-1.5, 0.0, 0.25], [1.0, 2.5, -3.0]]
_ZERO_D = {"start": 0.5, "end": 2.0, "high": 7, "low": 2}
_INTS = {"steps": 5, "high": 7, "low": 2}
_SCALARS = {"fill_value": 2.5, "start": 0.5, "end": 2.0}
_INT_LISTS = {"size": [3, 2], "stride": [2, 1]}


def _op(s: Any) -> Any:
    name = _full_name(s)
    try:  # raises for a schema the dispatcher does not know (TorchScript-only)
        torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU")
    except RuntimeError:
        return None
    return getattr(getattr(torch.ops.aten, s.name[len("aten::"):]), s.overload_name or "default")


def _build(s: Any, src: torch.device, device: Optional[str], dtype: Optional[torch.dtype],
           layout: Optional[torch.layout] = None, pin_memory: Optional[bool] = None) -> Tuple[list, dict]:
    """Positional and keyword arguments of a call of schema s with tensors on src."""
    args: list = []
    kwargs: dict = {}
    for a in s.arguments:
        optional = str(a.type).startswith("Optional[")
        t = str(a.type)[len("Optional["):-1] if optional else str(a.type)
        n = a.name
        have = True
        if t == "Tensor":
            if n == "self" or n not in _ZERO_D:
                v = torch.tensor(_SELF, device=src)
            else:
                # (randint_like.Tensor: "high must be a scalar tensor and on CPU", as for CUDA inputs)
                v = torch.tensor(_ZERO_D[n], device=CPU if n == "high" else src)
        elif t == "List[Tensor]":
            v = [torch.tensor(_SELF, device=src), torch.tensor(_SELF, device=src) * 2]
        elif t == "Device":
            v = device if device is not None or optional else str(src)
        elif n == "dtype":  # (TorchScript spells ScalarType "int")
            v = dtype if dtype is not None or optional else torch.float32
        elif n == "layout":
            v = layout
        elif n == "pin_memory":
            v = pin_memory
        elif t in ("SymInt", "int") and not optional:
            v = _INTS.get(n, 1)
        elif t == "number":
            v = _SCALARS.get(n, 1.0)
        elif t in ("List[int]", "List[SymInt]") and n in _INT_LISTS:
            v = _INT_LISTS[n]
        elif a.default_value is not None:
            have = False  # the schema's default
        elif optional:
            v = None
        else:
            raise CannotBuild(f"argument {n}: {a.type}")
        if not have or (v is None and a.default_value is not None):
            continue
        if a.kwarg_only:
            kwargs[n] = v
        else:
            args.append(v)
    return args, kwargs


def _run(s: Any, **kw: Any) -> Any:
    args, kwargs = _build(s, **kw)
    return _op(s)(*args, **kwargs)


def _why_not_built(s: Any) -> Optional[str]:
    """Why the walk has no call for schema s (None: it has one)."""
    if _op(s) is None:
        return _JIT_ONLY
    if [str(r.type) for r in s.returns] != ["Tensor"]:
        return _NO_TENSOR
    if any(a.alias_info is not None and a.alias_info.is_write for a in s.arguments):
        return _WRITES
    try:
        _run(s, src=CPU, device="cpu", dtype=None)
    except CannotBuild as e:
        return str(e)
    except Exception:
        return _REJECTED
    try:
        r = _run(s, src=CPU, device="meta", dtype=None)
        if r.device != META:
            return _NO_DEVICE
    except Exception:
        return _NO_DEVICE
    return None


_SCHEMAS = _walked_schemas()
_WALKED = [s for s in _SCHEMAS if _full_name(s) not in NOT_BUILT]


def test_not_built_table_is_exact():
    found = {}
    for s in _SCHEMAS:
        why = _why_not_built(s)
        if why is not None:
            found[_full_name(s)] = why
    assert found == NOT_BUILT
    # the walk is not empty: the *_like / new_* constructors, linspace/logspace of tensors, to, _to_copy
    assert len(_WALKED) >= 25, [_full_name(s) for s in _WALKED]


# (case, tensors' device, device argument, dtype argument, layout argument, expected device of the result)
CASES = [
    ("tpu->cpu", T0, "cpu", None, None, CPU),
    ("cpu->tpu", CPU, "tpu:0", None, None, T0),
    ("tpu:0->tpu:1", T0, "tpu:1", None, None, T1),
    ("tpu:1->tpu (current device 0)", T1, "tpu", None, None, T0),
    ("tpu->meta", T0, "meta", None, None, META),
    ("tpu dtype", T0, None, torch.bfloat16, None, T0),
    ("tpu->cpu dtype", T0, "cpu", torch.float64, None, CPU),
    ("tpu:1->tpu:0 dtype", T1, "tpu:0", torch.int32, None, T0),
    ("tpu->cpu sparse layout", T0, "cpu", None, torch.sparse_coo, CPU),
]


def _has_self(s: Any) -> bool:
    return any(a.name == "self" for a in s.arguments)


def _deterministic(name: str) -> bool:
    return "rand" not in name and "empty" not in name


def _check(s: Any, case: Tuple) -> None:
    label, src, device, dtype, layout, expected = case
    name = _full_name(s)
    if device is None and not _has_self(s):
        expected = CPU  # a factory whose numbers are tensors (linspace.Tensor_Tensor): the default device
    where = f"{name} [{label}]"
    try:
        ref = _run(s, src=CPU, device=None if device is None else "cpu", dtype=dtype, layout=layout)
    except Exception as e:
        with pytest.raises(type(e)):
            _run(s, src=src, device=device, dtype=dtype, layout=layout)
        return
    got = _run(s, src=src, device=device, dtype=dtype, layout=layout)
    assert got.device == expected, f"{where}: result on {got.device}, expected {expected}"
    assert got.dtype == ref.dtype, f"{where}: dtype {got.dtype}, expected {ref.dtype}"
    assert got.layout == ref.layout, f"{where}: layout {got.layout}, expected {ref.layout}"
    assert got.shape == ref.shape, f"{where}: shape {tuple(got.shape)}, expected {tuple(ref.shape)}"
    if expected == META:
        return
    host = got.cpu()
    if ref.layout != torch.strided:
        ref, host = ref.to_dense(), host.to_dense()
    if _deterministic(name):
        torch.testing.assert_close(host, ref, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{where}: {m}")
    elif "rand_like" in name:
        assert bool(((host >= 0) & (host < 1)).all()), where
    elif "randint_like" in name:
        low = 2 if "low" in name else 0
        assert bool(((host >= low) & (host < 7)).all()), where


# PyTorch's _to_copy pins only the cpu result of a non_blocking copy from an accelerator: pin_memory is no error for
# a CUDA (or tpu) result.
_IGNORES_PIN = {"aten::_to_copy", "aten::to.dtype_layout"}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_walk(case, eager_mode):
    assert torch.tpu.current_device() == 0
    for s in _WALKED:
        _check(s, case)
    torch.tpu.synchronize()


def test_pin_memory(eager_mode):
    """pin_memory=True: a tpu result raises as CUDA's does; a cpu result is pinned as CPU's reference is."""
    for s in _WALKED:
        if not any(a.name == "pin_memory" for a in s.arguments):
            continue
        name = _full_name(s)
        if name in _IGNORES_PIN:
            assert _run(s, src=T0, device="tpu:1", dtype=None, pin_memory=True).device == T1, name
        else:
            with pytest.raises(RuntimeError, match="Only dense CPU tensors can be pinned"):
                _run(s, src=T0, device="tpu:0", dtype=None, pin_memory=True)
            if _has_self(s):
                with pytest.raises(RuntimeError, match="Only dense CPU tensors can be pinned"):
                    _run(s, src=T0, device=None, dtype=None, pin_memory=True)
        try:
            ref = _run(s, src=CPU, device="cpu", dtype=None, pin_memory=True)
        except Exception as e:
            with pytest.raises(type(e)):
                _run(s, src=T0, device="cpu", dtype=None, pin_memory=True)
            continue
        got = _run(s, src=T0, device="cpu", dtype=None, pin_memory=True)
        assert got.device == CPU and got.is_pinned() == ref.is_pinned(), name


def test_named_calls():
    """The calls of the tracker's report, through the Python API."""
    x = torch.tensor(_SELF, device="tpu")
    for r, dev in [(torch.full_like(x, 3, device="cpu"), CPU), (torch.zeros_like(x, device="tpu:1"), T1),
                   (torch.ones_like(x, device="meta"), META), (x.new_zeros(2, device="cpu"), CPU),
                   (x.new_ones(2, device="tpu:1"), T1), (x.new_full((2,), 4.0, device="cpu"), CPU),
                   (torch.full_like(x, 3, dtype=torch.int32, device="tpu:1"), T1)]:
        assert r.device == dev
    assert torch.full_like(x, 3, device="cpu").tolist() == [[3.0] * 3] * 2
    assert torch.full_like(x, 3, dtype=torch.int32, device="tpu:1").cpu().tolist() == [[3] * 3] * 2
    assert x.new_full((2,), 4.0, device="tpu:1").cpu().tolist() == [4.0, 4.0]


def test_compiled(fresh_dynamo):
    """torch.compile(backend="tpu"): the graph keeps the device argument (full_like(x, 1, device=cpu) is one node);
    cpu results are the program's outputs copied to the host, results on another chip or on meta run eagerly."""
    from torch_tpu._dynamo_backend import _backend as backend  # where tpu_backend reads _compile_aten_graph

    graphs = []
    compile_graph = backend._compile_aten_graph

    def spy(gm, *args, **kwargs):
        graphs.append([(n.target, dict(n.kwargs)) for n in gm.graph.nodes])
        return compile_graph(gm, *args, **kwargs)

    def f(x):
        return (torch.full_like(x, 1, device="cpu"), x.new_zeros(3, device="cpu"), x.new_full((2,), 4.0, device="cpu"),
                torch.ones_like(x, device="tpu:1"), torch.zeros_like(x, device="meta"),
                torch.full_like(x, 2, dtype=torch.int32), x * 2)

    x = torch.tensor(_SELF, device="tpu")
    backend._compile_aten_graph = spy
    try:
        got = torch.compile(f, backend="tpu")(x)
    finally:
        backend._compile_aten_graph = compile_graph
    ref = f(x.cpu())
    full_like = [kw for g in graphs for target, kw in g if target is torch.ops.aten.full_like.default]
    assert any(kw.get("device") == CPU for kw in full_like), graphs
    expected = [CPU, CPU, CPU, T1, META, T0, T0]
    assert [t.device for t in got] == expected
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype and g.shape == r.shape
        if g.device != META:
            torch.testing.assert_close(g.cpu(), r.cpu(), rtol=0, atol=0)
