"""What :func:`xdem.cli.bound_process_memory` does to the CLI's process: GDAL's cache bounded,
freed buffers below the mmap threshold reused instead of faulted in again (glibc only)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from xdem.cli import GDAL_CACHE_MB, MMAP_THRESHOLD

#: A child that frees and allocates the same 2 MiB buffer 50 times and prints the page faults
#: of those 50 rounds; with ``bound`` it first calls ``bound_process_memory`` as ``xdem`` does,
#: otherwise it only fixes glibc's mmap threshold at the CLI's :data:`~xdem.cli.MMAP_THRESHOLD`.
CHILD = r"""
import ctypes, resource, sys
from xdem.cli import bound_process_memory
libc = ctypes.CDLL("libc.so.6")
if sys.argv[1] == "bound":
    bound_process_memory()
else:  # the fixed mmap threshold alone (glibc's default then trims every freed top above 128 KiB)
    libc.mallopt(-3, int(sys.argv[2]))
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
n = 2 << 20
def round_trip():
    p = libc.malloc(n)
    ctypes.memset(p, 1, n)
    libc.free(p)
round_trip()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    round_trip()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(MMAP_THRESHOLD)], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_cli_process_reuses_freed_buffers_instead_of_faulting_them_in():
    # 50 rounds of a 2 MiB buffer are 25,600 pages. A fixed mmap threshold (which keeps freed
    # chunk-sized arrays from staying resident) also fixes glibc's trim threshold at 128 KiB, so
    # the freed buffer at the heap's top is returned each time and every round faults its pages
    # in again; with the CLI's TOP_PAD the heap keeps them.
    unbound, bound = _faults("mmap-only"), _faults("bound")
    assert unbound > 10_000
    assert bound < 1_000


def test_cli_process_bounds_gdal_cache():
    code = ("import os; os.environ.pop('GDAL_CACHEMAX', None); from xdem.cli import bound_process_memory; "
            "bound_process_memory(); print(os.environ['GDAL_CACHEMAX'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(GDAL_CACHE_MB)
