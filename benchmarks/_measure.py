"""Shared benchmark helpers: measure a command's wall time and peak memory, cached inputs, reports.

Use from any benchmark script::

    from _measure import measure, cached_pair, machine_description, update_doc_section

    res = measure([sys.executable, "-c", "print(1)"])
    res["wall_s"], res["peak_rss_bytes"], res["read_bytes"]
"""

from __future__ import annotations

import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

__all__ = [
    "BENCH_DIR",
    "CACHE_DIR",
    "REPO",
    "measure",
    "cached_pair",
    "machine_description",
    "update_doc_section",
    "fmt_bytes",
    "measure_or_exit",
]

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
CACHE_DIR = BENCH_DIR / "_cache"


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def measure(
    cmd: list[str], *, env: dict[str, str] | None = None, interval: float = 0.2, timeout: float | None = None,
    cwd: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Run ``cmd`` and sample its memory until it ends.

    Every ``interval`` seconds the resident set size (RSS) of the process and all its
    children is summed; the peak of that sum is reported. Bytes read are the sum of the
    processes' ``io_counters().read_bytes`` (bytes fetched from the storage layer, so a file
    already in the page cache counts as 0), last seen before each process ended.

    Parameters
    ----------
    cmd
        Command and arguments (no shell).
    env
        Extra environment variables, added to the current environment.
    interval
        Sampling period in seconds.
    timeout
        Kill the command after this many seconds (``returncode`` is then -9).
    cwd
        Working directory.

    Returns
    -------
    dict
        ``wall_s``, ``peak_rss_bytes``, ``read_bytes`` (``None`` where unsupported),
        ``cpu_s`` (user + system CPU seconds of the command and its waited-for children: less
        sensitive than wall time to other load on the machine), ``load_avg`` (1-minute load
        average before and after), ``returncode``, ``stdout``, ``stderr``.

    Examples
    --------
    >>> res = measure([sys.executable, "-c", "x = bytearray(50_000_000)"])
    >>> res["returncode"], res["peak_rss_bytes"] > 10_000_000
    (0, True)
    """
    full_env = {**os.environ, **(env or {})}
    out_path = CACHE_DIR / f".measure-{os.getpid()}-{time.monotonic_ns()}"
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(f"{out_path}.out", "w+b") as fout, open(f"{out_path}.err", "w+b") as ferr:
        usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        load0 = os.getloadavg()[0]
        start = time.perf_counter()
        popen = subprocess.Popen(cmd, env=full_env, stdout=fout, stderr=ferr, cwd=cwd)
        root = psutil.Process(popen.pid)
        peak = 0
        reads: dict[int, int] = {}
        io_ok = hasattr(root, "io_counters")
        killed = False
        while popen.poll() is None:
            total = 0
            for p in _tree(root):
                try:
                    total += p.memory_info().rss
                    if io_ok:
                        reads[p.pid] = p.io_counters().read_bytes
                except (psutil.Error, AttributeError):
                    continue
            peak = max(peak, total)
            if timeout is not None and time.perf_counter() - start > timeout:
                for p in reversed(_tree(root)):
                    try:
                        p.kill()
                    except psutil.Error:
                        pass
                killed = True
            time.sleep(interval)
        wall = time.perf_counter() - start
        usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        load1 = os.getloadavg()[0]
        fout.seek(0)
        ferr.seek(0)
        stdout, stderr = fout.read().decode(errors="replace"), ferr.read().decode(errors="replace")
    for suffix in (".out", ".err"):
        Path(f"{out_path}{suffix}").unlink(missing_ok=True)
    return {
        "wall_s": wall,
        "peak_rss_bytes": peak,
        "read_bytes": sum(reads.values()) if io_ok else None,
        "cpu_s": (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime),
        "load_avg": (load0, load1),
        "returncode": -9 if killed else popen.returncode,
        "stdout": stdout,
        "stderr": stderr,
    }


def cached_pair(size: int, *, seed: int = 0, shift: tuple[float, float, float] = (3.0, -2.0, 1.5),
                tilt: tuple[float, float] | None = None) -> dict:
    """Synthetic DEM pair of ``size`` x ``size`` pixels under ``benchmarks/_cache`` (made once).

    Returns the truth dict of :func:`xdem.examples.synthetic.generate_pair`, with ``ref`` and
    ``tba`` paths. Generating 20000^2 takes a few minutes; later calls reuse the files.
    """
    from xdem.examples.synthetic import generate_pair

    tag = f"pair_{size}_s{seed}" + ("" if tilt is None else "_tilt")
    return generate_pair(CACHE_DIR / tag, size=size, shift=shift, tilt=tilt, seed=seed)


def machine_description() -> str:
    """One line: CPU, cores, RAM, OS, Python and key library versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = []
    for mod in ("numpy", "dask", "rasterio"):
        try:
            versions.append(f"{mod} {__import__(mod).__version__}")
        except ImportError:
            pass
    try:
        import rasterio

        versions.append(f"GDAL {rasterio.__gdal_version__}")
    except ImportError:
        pass
    ram = psutil.virtual_memory().total / 2**30
    return (
        f"{cpu}, {psutil.cpu_count(logical=True)} logical cores, {ram:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}, " + ", ".join(versions)
    )


def update_doc_section(section: str, body: str, *, doc: Path = REPO / "docs" / "performance.md") -> None:
    """Replace (or append) the ``## {section}`` section of ``doc`` with ``body``."""
    header = f"## {section}"
    text = doc.read_text() if doc.exists() else "# Performance\n\nMeasured by the scripts in `benchmarks/`.\n"
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == header), None)
    new = [header, "", *body.strip("\n").splitlines(), ""]
    if start is None:
        lines = [*lines, "", *new] if lines and lines[-1].strip() else [*lines, *new]
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines = lines[:start] + new + lines[end:]
    doc.parent.mkdir(parents=True, exist_ok=True)
    tmp = doc.with_name(f".xdem-tmp-{doc.name}")
    tmp.write_text("\n".join(lines).rstrip("\n") + "\n")
    os.replace(tmp, doc)


def fmt_bytes(n: float | None) -> str:
    """Human-readable bytes (MiB/GiB)."""
    if n is None:
        return "n/a"
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def measure_or_exit(name: str, cmd: list[str]) -> dict[str, Any]:
    """:func:`measure` ``cmd``, print one line (wall, CPU, peak RSS, bytes read, load) and return
    the result; exit with its stderr's end when it fails."""
    r = measure(cmd)
    if r["returncode"] != 0:
        raise SystemExit(f"{name} failed:\n{r['stderr'][-3000:]}")
    print(f"  {name}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, peak RSS {fmt_bytes(r['peak_rss_bytes'])}, "
          f"read {fmt_bytes(r['read_bytes'])}, load {r['load_avg'][0]:.1f}->{r['load_avg'][1]:.1f}", flush=True)
    return r


if __name__ == "__main__":  # tiny self-check
    print(measure([sys.executable, "-c", "x = bytearray(200_000_000); import time; time.sleep(1)"]))
