"""Where one ``xdem coreg`` run page-faults: minor faults and thread CPU per stage and per compiled kernel.

The run goes through the ``xdem`` CLI (so its glibc settings apply) in a fresh subprocess, on the
synchronous scheduler (one thread computes: a fault counted around a call is that call's), with
every numba kernel of the loaded ``xdem`` modules, the reader's decode, the block writes and the
stages of :mod:`xdem.workflows.coreg` wrapped to count the process's minor faults
(``/proc/self/stat``) and the thread's CPU. A kernel's count is listed per stage (``kernel@stage``).
The floor (a GDAL COG copy of TBA) faults about 47,000 times at 8000^2 (issue 28).

Input: the pair of ``bench_methods.py`` at ``--size``. Output: a table on stdout. Linux only.

Run: ``python benchmarks/profile_faults.py [--size 8000] [--method nuthkaab]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_methods import methods_pair  # noqa: E402

CHILD = r"""
import collections, json, sys, time
def faults():
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])
f0 = faults()
from click.testing import CliRunner
import xdem.cli.coreg  # noqa: F401
import xdem.cli._coreg_run  # noqa: F401 (the run's own imports)
from numba.core.dispatcher import Dispatcher
from xdem.cli import main as cli
import xdem.io.cog as COG, xdem.io.open as OPEN, xdem.workflows.coreg as W
rec, stage = collections.defaultdict(lambda: [0, 0, 0.0]), ["imports"]
rec["imports"][0] = faults() - f0
def counted(fn, label, is_stage=False):
    def wrapper(*a, **k):
        f, t = faults(), time.thread_time()
        if is_stage:
            stage[0] = label
        try:
            return fn(*a, **k)
        finally:
            r = rec[label if is_stage else f"{label}@{stage[0]}"]
            r[0] += faults() - f; r[1] += 1; r[2] += time.thread_time() - t
    return wrapper
kernels = {}
for mod in [m for n, m in list(sys.modules.items()) if n.startswith("xdem") and m is not None]:
    for attr, v in list(vars(mod).items()):
        if isinstance(v, Dispatcher):
            w = kernels.setdefault(id(v), counted(v, f"{v.py_func.__module__}.{v.py_func.__name__}"))
            setattr(mod, attr, w)
OPEN._NamedReader._decode = counted(OPEN._NamedReader._decode, "decode")
COG._write_block = counted(COG._write_block, "block write (+ fused statistics)")
COG.copy_with_progress = counted(COG.copy_with_progress, "GDAL COG copy")
for name in ("open_inputs", "fit", "write", "measure", "document"):
    setattr(W, name, counted(getattr(W, name), name, is_stage=True))
r = CliRunner().invoke(cli, ["coreg", *sys.argv[1:], "--quiet", "--scheduler", "synchronous"], catch_exceptions=False)
print(json.dumps({"exit": r.exit_code, "total": faults() - f0, "rows": rec}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8000)
    parser.add_argument("--method", default="nuthkaab")
    args = parser.parse_args()
    pair = methods_pair(args.size)
    with tempfile.TemporaryDirectory() as work:
        cmd = [sys.executable, "-c", CHILD, str(pair["ref"]), str(pair["tba"]), "-o", f"{work}/out.tif",
               "--method", args.method]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.exit(proc.stderr[-600:])
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"{args.size}^2 {args.method}: {result['total']} minor faults (exit {result['exit']})")
    print(f"{'faults':>8} {'calls':>6} {'CPU s':>6}  where")
    for label, (n, calls, cpu) in sorted(result["rows"].items(), key=lambda kv: -kv[1][0]):
        print(f"{n:8d} {calls:6d} {cpu:6.2f}  {label}")


if __name__ == "__main__":
    main()
