"""The server's allocator policy: a large block freed is reused by the next allocation without
faulting in fresh pages; an operator's own allocator setting is left alone."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

PROBE = r"""
import json, resource, sys, threading
import numpy as np
from windowstore.server import allocator
on = allocator.keep_freed_memory() if sys.argv[1] == "on" else False
a = np.ones(64 << 17)              # 64 MiB, as a sealed sub-window's column
del a
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
b = np.ones(64 << 17)              # the next seal's column
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
del b

def seal_thread():                 # a seal on the seal thread, while the main thread allocates too
    for _ in range(3):
        c = np.ones(64 << 17)
        del c
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
t = threading.Thread(target=seal_thread)
t.start()
while t.is_alive():
    small = [bytearray(100) for _ in range(100)]
t.join()
threaded = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"on": on, "faults": faults, "threaded": threaded}))
"""


def _probe(mode: str, **env) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], env={**clean, **env}, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


@pytest.mark.slow
def test_a_freed_large_block_is_reused_without_fresh_pages():
    kept, default = _probe("on"), _probe("off")
    if platform.libc_ver()[0] != "glibc":  # elsewhere the policy is not in force, and says so
        assert not kept["on"] and not default["on"]
        return
    assert kept["on"] and not default["on"]
    # unmapped and mapped again, the default faults in every page of the 64 MiB again (with transparent
    # huge pages at least 32 faults of 2 MiB); kept, the heap's pages are still there
    assert default["faults"] >= 32 and default["threaded"] >= 3 * 32
    assert kept["faults"] < 8
    assert kept["threaded"] < 24  # reused on another thread too (one arena), not mapped three times


@pytest.mark.slow
def test_the_operator_s_allocator_setting_wins():
    assert not _probe("on", MALLOC_TRIM_THRESHOLD_="1000000")["on"]
