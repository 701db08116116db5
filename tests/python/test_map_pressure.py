"""The process's memory mappings stay under vm.max_map_count however many distinct programs run.

The CPU plugin maps every loaded executable's code into the process (about five mappings each); past Linux's
vm.max_map_count the plugin aborts the process or leaves dangling exception-frame tables behind (the next C++
exception crashes). The program caches drop their least recently used half when the mappings pass three quarters of
the limit (core/pressure.h).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_tpu


def test_caches_trim_under_map_pressure():
    # A limit just above the process's current mappings: every check finds pressure, and the caches shrink.
    before = torch_tpu.cache_stats()
    try:
        torch_tpu._C._set_map_limit_for_testing(1)
        for i in range(140):
            y = torch.ones(2000 + i, device="tpu") * 3 + 1
            assert y[-1].item() == 4.0
        after = torch_tpu.cache_stats()
    finally:
        torch_tpu._C._set_map_limit_for_testing(0)
    mp = after["map_pressure"]
    assert mp["trims"] > before["map_pressure"]["trims"]
    assert mp["checks"] > before["map_pressure"]["checks"]
    assert after["evictions"] > before["evictions"]
    assert after["entries"] < before["entries"] + 2 * 140  # the ones, mul and add programs of 140 new lengths


def _map_limit() -> int:
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except OSError:
        return 0


@pytest.mark.skipif(not 0 < _map_limit() <= 70000, reason="needs Linux with a vm.max_map_count near its default")
def test_many_programs_near_the_mapping_limit(tmp_path):
    # The process holds all but 1500 of its allowed mappings; 450 new programs need about 2250 more. Without the
    # trimming the plugin aborts or the next exception crashes.
    code = textwrap.dedent(
        """
        import mmap, torch, torch_tpu
        def maps():
            with open('/proc/self/maps') as f:
                return sum(1 for _ in f)
        (torch.ones(3, device='tpu') + 1).cpu()
        limit = int(open('/proc/sys/vm/max_map_count').read())
        keep = []
        def more(n):
            for _ in range(n):
                rw = mmap.PROT_READ | (mmap.PROT_WRITE if len(keep) % 2 else 0)  # alternating: never merged
                keep.append(mmap.mmap(-1, 4096, prot=rw))
        while maps() < limit - 2500:
            more(1000)
        while maps() < limit - 1500:
            more(50)
        for i in range(150):
            y = torch.ones(1000 + i, device='tpu') * 7 - 2
            assert y[0].item() == 5.0
        try:
            torch.ones(2, device='tpu') + torch.ones(3, device='tpu')
        except RuntimeError as e:
            assert 'must match' in str(e)
        print('trims', torch_tpu.cache_stats()['map_pressure']['trims'])
        """
    )
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    trims = int(r.stdout.split("trims")[-1])
    assert trims > 0
