"""Pass 1 of :mod:`xdem.io.cog` under a ``distributed.Client``: the workers compute the blocks,
the client writes them.

On a cluster the workers share no disk with the client: a worker must not write a path the
client (or another worker) then reads. So each task computes one block of one array (and the
per-block ``also`` results of :class:`xdem.io.cog.BlockStats`, in the same task) and *returns*
it; the client process receives the blocks and writes each into its own local temporary GTiff
(one open handle per file, the main thread only: no lock). Memory stays bounded: a sliding
window of at most :func:`window_size` blocks is in flight (submitted, computing, or held by a
worker until the client has it), in row-major order so that neighbouring blocks sharing
overlap inputs (a halo read, a resampling window) are computed together; a block is written
and released as soon as it arrives. A signal (or any error) cancels every future in flight.

Examples
--------
>>> window_size({"tcp://a:1": 2, "tcp://b:2": 4})
12
>>> window_size({})
2
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
import rasterio
import rasterio.windows
from dask.delayed import Delayed
from dask.optimization import cull

from xdem import interrupt
from xdem.io._heap import release_free_heap
from xdem.io.grid import block_tasks

__all__ = ["StreamItem", "stream_blocks", "window_size"]

#: Blocks in flight per worker thread.
IN_FLIGHT_PER_THREAD = 2


@dataclass(frozen=True)
class StreamItem:
    """One array of the pass: its data, the temp GTiff (created already) it goes to, the file's
    dtype and the ``(func, others)`` pairs of its ``also``."""

    data: da.Array
    tmp: str
    dtype: np.dtype
    stats: Sequence[tuple[Callable[..., Any], Sequence[da.Array]]] = ()


def window_size(nthreads: Mapping[str, int]) -> int:
    """Blocks in flight at once: :data:`IN_FLIGHT_PER_THREAD` per worker thread (at least 2)."""
    return max(2, IN_FLIGHT_PER_THREAD * sum(int(n) for n in nthreads.values()))


def _block_result(block: np.ndarray, *others: np.ndarray, stats: tuple[tuple[Callable[..., Any], int], ...],
                  dtype: np.dtype, row0: int, col0: int) -> tuple[np.ndarray, list]:
    """One task: the block as the file's dtype and its ``also`` results (on the block as computed,
    as the writing task of a local scheduler does)."""
    out, k = [], 0
    for func, n in stats:
        out.append(func(block, *others[k : k + n], row0=row0, col0=col0))
        k += n
    return np.ascontiguousarray(block, dtype=dtype), out


@dataclass(frozen=True)
class _Unit:
    item: int
    row0: int
    col0: int
    key: Any


def _units(items: Sequence[StreamItem]) -> tuple[list[_Unit], dict]:
    """Every (array, block) task, row-major over all arrays (the blocks at one place together),
    and the one optimised graph they share (a task two arrays share keeps one key)."""
    tasks: list[Delayed] = []
    where: list[tuple[int, int, int]] = []
    for i, it in enumerate(items):
        others = [o.rechunk(it.data.chunks) for _, arrs in it.stats for o in arrs]
        spec = tuple((func, len(arrs)) for func, arrs in it.stats)
        rows = np.cumsum((0,) + it.data.chunks[0][:-1])
        cols = np.cumsum((0,) + it.data.chunks[1][:-1])
        blocks = block_tasks(_block_result, [it.data, *others], stats=spec, dtype=it.dtype)
        tasks.extend(blocks)
        where.extend((i, int(r), int(c)) for r in rows for c in cols)
    optimised = dask.optimize(*tasks)
    graph: dict = {}
    seen: set[int] = set()
    for d in optimised:
        if id(d.dask) not in seen:
            seen.add(id(d.dask))
            graph.update(d.dask)
    units = [_Unit(i, r, c, d.key) for (i, r, c), d in zip(where, optimised)]
    order = sorted(range(len(units)), key=lambda u: (units[u].row0, units[u].col0, units[u].item))
    return [units[u] for u in order], graph


class _Count:
    """A count of the blocks written on stderr (``distributed.progress`` needs every future up
    front, which a sliding window does not have): redrawn at most once a second on a terminal,
    else one line at every tenth of the blocks (a log file or a pipe)."""

    def __init__(self, total: int, *, show: bool) -> None:
        self.total, self.show, self.done, self.last = total, show, 0, 0.0
        self.tty = show and sys.stderr.isatty()

    def step(self) -> None:
        self.done += 1
        if not self.show:
            return
        text = f"blocks written: {self.done}/{self.total}"
        if self.tty:
            now = time.monotonic()
            if now - self.last >= 1.0 or self.done == self.total:
                self.last = now
                print("\r" + text, end="\n" if self.done == self.total else "", file=sys.stderr, flush=True)
        elif self.done * 10 // self.total != (self.done - 1) * 10 // self.total:
            print(text, file=sys.stderr, flush=True)


def _submitted(client: Any, graph: dict, units: Sequence[_Unit]) -> Iterator[tuple[_Unit, Any]]:
    for unit in units:
        sub, _ = cull(graph, [unit.key])
        yield unit, client.compute(Delayed(unit.key, sub), optimize_graph=False)


def stream_blocks(items: Sequence[StreamItem], *, client: Any, progress: bool, cache_bytes: int) -> list[list]:
    """Compute every block of every item on ``client``'s workers and write it here, into the
    item's temp GTiff; at most :func:`window_size` blocks in flight. Returns, per item, per
    ``stats`` entry, the per-block results in row-major order."""
    from distributed import as_completed

    units, graph = _units(items)
    results: dict[tuple[int, int, int], list] = {}
    count = _Count(len(units), show=progress)
    pending = _submitted(client, graph, units)
    window = window_size(client.nthreads())
    inflight: dict[Any, _Unit] = {}
    with rasterio.Env(GDAL_CACHEMAX=cache_bytes), contextlib.ExitStack() as stack:
        handles = [stack.enter_context(rasterio.open(it.tmp, "r+")) for it in items]
        try:
            for unit, future in _take(pending, window):
                inflight[future] = unit
            done = as_completed(list(inflight), loop=client.loop)
            for future in done:
                unit = inflight.pop(future)
                block, stats = future.result()
                future.release()
                window_ = rasterio.windows.Window(unit.col0, unit.row0, block.shape[1], block.shape[0])
                handles[unit.item].write(block, 1, window=window_)
                del block
                release_free_heap()  # see xdem.io._heap
                results[(unit.item, unit.row0, unit.col0)] = stats
                count.step()
                interrupt.checkpoint()
                interrupt.event()
                for nxt, fut in _take(pending, 1):
                    inflight[fut] = nxt
                    done.add(fut)
        except BaseException:
            client.cancel(list(inflight))
            raise
    out: list[list] = []
    for i, it in enumerate(items):
        mine = [results[(u.item, u.row0, u.col0)] for u in sorted((u for u in units if u.item == i),
                                                                   key=lambda u: (u.row0, u.col0))]
        out.append([[r[k] for r in mine] for k in range(len(it.stats))])
    return out


def _take(it: Iterator[tuple[_Unit, Any]], n: int) -> list[tuple[_Unit, Any]]:
    got = []
    for _ in range(n):
        nxt = next(it, None)
        if nxt is None:
            break
        got.append(nxt)
    return got

