"""What :func:`xdem.io._heap.release_free_heap` does: the free pages that glibc keeps inside its
heaps (pinned there by small live buffers) go back to the system above the bound, and nothing is
done below it nor again before the process has grown by the bound (glibc only: elsewhere it does nothing and says so)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from xdem.io._heap import free_heap_bytes, release_free_heap

#: A child with the CLI's allocator settings that allocates 300 buffers of 1 MiB (below the
#: CLI's mmap threshold: in the heap), each followed by a small live one, frees the large ones
#: (glibc cannot trim them: the small ones pin the heap) and reports its resident memory and
#: the heap's free bytes before and after a release refused by its bound, then one accepted.
CHILD = r"""
import json
import numpy as np
from xdem.cli import bound_process_memory
bound_process_memory()
from xdem.io._heap import free_heap_bytes, release_free_heap

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))

large, pins = [], []
for _ in range(300):
    large.append(np.ones(1 << 18, dtype=np.float32))  # 1 MiB, touched
    pins.append(np.ones(512))  # 4 KiB, kept
del large
free, before = free_heap_bytes(), rss()
refused = release_free_heap(above=free + 1)
after_refused = rss()
done = release_free_heap(above=free // 2)
again = release_free_heap(above=free // 2)  # still as much free, but nothing resident grew since
print(json.dumps({"again": again, "free": free, "before": before, "refused": refused, "after_refused": after_refused,
                  "done": done, "after": rss(), "free_after": free_heap_bytes(), "pins": sum(p.size for p in pins)}))
"""


@pytest.mark.skipif(free_heap_bytes() is None, reason="glibc >= 2.33 only (mallinfo2, malloc_trim)")
def test_release_free_heap_returns_pinned_free_pages_above_its_bound_only():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    mib = 2**20
    assert r["free"] > 250 * mib  # the 300 MiB freed stay inside the heap (the pins hold it)
    assert r["before"] > 300 * mib  # and resident
    assert r["refused"] is False and abs(r["after_refused"] - r["before"]) < 20 * mib  # below the bound: untouched
    assert r["done"] is True
    assert r["before"] - r["after"] > 250 * mib  # the free pages went back to the system
    assert r["free_after"] > 250 * mib  # still free for glibc to hand out (only the pages were returned)
    assert r["again"] is False  # no trim on every call: only once the process grew again


def test_release_free_heap_does_nothing_under_an_unreachable_bound():
    assert release_free_heap(above=1 << 62) is False


#: As CHILD, 100 buffers of 1 MiB, then the trim a fit makes before its solves: no growth asked.
SOLVE_CHILD = r"""
import json
import numpy as np
from xdem.cli import bound_process_memory
bound_process_memory()
from xdem.io._heap import SOLVE_RELEASE_ABOVE, free_heap_bytes, release_free_heap

large, pins = [], []
for _ in range(100):
    large.append(np.ones(1 << 18, dtype=np.float32))
    pins.append(np.ones(512))
release_free_heap(above=0, grown=0)  # a trim just before: no growth since
del large
free = free_heap_bytes()
print(json.dumps({"free": free, "bound": SOLVE_RELEASE_ABOVE, "grown": release_free_heap(above=SOLVE_RELEASE_ABOVE),
                  "solve": release_free_heap(above=SOLVE_RELEASE_ABOVE, grown=0), "left": free_heap_bytes()}))
"""


@pytest.mark.skipif(free_heap_bytes() is None, reason="glibc >= 2.33 only (mallinfo2, malloc_trim)")
def test_the_trim_before_a_solve_asks_no_growth():
    out = subprocess.run([sys.executable, "-c", SOLVE_CHILD], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    assert r["bound"] == 32 * 2**20 and r["free"] > r["bound"]  # 100 MiB freed, pinned: above the solve's bound
    assert r["grown"] is False  # a block's trim: refused, the process did not grow by the bound since the last one
    assert r["solve"] is True  # the solve's: trimmed all the same
    assert r["left"] > r["bound"]  # the bytes stay free for glibc (only their pages went back)
