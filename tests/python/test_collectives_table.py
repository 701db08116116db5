"""The collectives table (csrc/lowering/collectives.h): one row per collective says whether a compiled graph may keep
it inside its program; Python reads that list through _C instead of keeping its own."""
import torch_tpu
from torch_tpu import _dynamo_backend


def test_python_reads_the_in_program_list_from_the_table():
    names = torch_tpu._C._collectives_in_program()
    assert set(names) == set(_dynamo_backend._IN_PROGRAM)
    for n in ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single", "broadcast",
              "wait_tensor"):
        assert n in names, names
    # In-place forms are rows too, run through the process group.
    assert "all_reduce_" not in names and "broadcast_" not in names
