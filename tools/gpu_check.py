#!/usr/bin/env python3
"""`make gpu-check`: every GPU path of jetbench once, on a machine with an NVIDIA GPU, as one
table (path, result, reason, seconds). On a machine without one it says so in one line and
exits 0.

Each path runs the jetbench CLI in a subprocess of its own with a time limit, so one path that
fails, hangs or crashes is that path's row and the others still run:

- `time` of resnet18 batch 8 under each runtime x fp32/tf32/fp16/int8, with its output check
  (one command per runtime and precision: a failure is that row's);
- NVML power: `info --meter nvml`; NVML energy: `measure --meter nvml` (the window's joules);
- `measure --freq` on NVML locked clocks (the middle supported clock), then whether the clocks
  were put back: no journal left, and the clock a busy GPU runs after the restore (a CUDA load
  for a few seconds, `nvidia-smi`'s SM clock read through it) above the lock measure set. A
  lock (`nvmlDeviceSetGpuLockedClocks`, `nvidia-smi -lgc`) changes neither the max nor the
  application clocks, so comparing those proves nothing;
- `tune --budget 4 --knobs gpu` on the same GPU (its NVML clocks);
- several runtimes and precisions in one `time` (a row that cannot run is its own row), and
  a CUDA graph replayed under TorchScript with its output check;
- ONNX Runtime's TensorRT provider twice on one engine cache (the second session faster);
- `--devices 2` where there are two GPUs;
- `daemon --tune` on the NVML clocks against a CUDA loop that counts its items on a
  Prometheus page of its own: it holds a point, and SIGTERM puts the clocks back.

    python3 tools/gpu_check.py [--out DIR] [--runtimes torch,onnxruntime] [--limit-s 600]
        [--only daemon-tune,clocks]

Writes DIR/gpu_check.json (the rows and each command's output tail) when --out is given.
The last line counts each result: `ok` (proved), `unavailable` (the machine lacks it, such as
TensorRT: its reason), `skipped` (not applicable here, such as --devices 2 on one GPU), `not run`
(gpu-check's time limit came first) and `failed`. Exit 0 only when something was proved and
nothing failed or was left unrun; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
RUNTIMES = ("torch", "torchscript", "compile", "onnxruntime", "tensorrt")
PRECISIONS = ("fp32", "tf32", "fp16", "int8")
MODEL, BATCH = "resnet18", "8"
SHORT = ("--duration", "1s", "--warmup", "0.5s", "--iterations", "10")
# row results: proved, lacking here, not applicable here (these three are no failure); a path
# gpu-check's time limit left unrun, and a failure, are
FINE = ("ok", "unavailable", "skipped")
NOT_RUN = "not run"
RESULTS = ("ok", "unavailable", "skipped", NOT_RUN, "failed")


def gpu_names() -> List[str]:
    """The NVIDIA GPUs `nvidia-smi -L` lists ([] when there is none or no driver)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line for line in out.stdout.splitlines() if line.startswith("GPU ")]


class Check:
    """Runs jetbench commands and keeps one row per path."""

    def __init__(self, root: Path, work: Path, limit_s: float):
        self.root, self.work, self.limit_s = root, work, limit_s
        self.rows: List[Dict[str, object]] = []
        self.started = time.monotonic()

    def jetbench(self, *args: str, timeout_s: float = 300,
                 env: Optional[Dict[str, str]] = None) -> Dict[str, object]:
        """One CLI run: exit code, stdout, stderr, seconds (exit None: it hit its limit)."""
        left = self.limit_s - (time.monotonic() - self.started)
        timeout_s = max(1.0, min(timeout_s, left))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(REPO / "agent"), os.environ.get("PYTHONPATH", "")]), COLUMNS="200",
            **(env or {}))
        t0 = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "-m", "jetbench.cli.main", *args],
                                  capture_output=True, text=True, timeout=timeout_s, env=env,
                                  stdin=subprocess.DEVNULL, cwd=self.work)
            rc, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            rc = None
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return {"rc": rc, "out": out, "err": err, "s": round(time.monotonic() - t0, 1),
                "argv": ["jetbench", *args]}

    def row(self, path: str, result: str, reason: str, run: Optional[Dict[str, object]],
            seconds: Optional[float] = None) -> None:
        tail = None if run is None else (str(run["err"]) + str(run["out"]))[-3000:]
        self.rows.append({"path": path, "result": result, "reason": reason.strip(),
                          "s": seconds if seconds is not None else (run or {}).get("s"),
                          "argv": None if run is None else run["argv"], "output_tail": tail})
        print(f"gpu-check: {path}: {result} ({self.rows[-1]['s']} s) {reason.strip()[:150]}",
              flush=True)

    def out_of_time(self) -> bool:
        return time.monotonic() - self.started >= self.limit_s - 5


def _first_error(run: Dict[str, object]) -> str:
    if run["rc"] is None:
        return "did not finish within its limit"
    lines = [ln.strip() for ln in str(run["err"]).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower() or "Traceback" in ln]
    return (errors or lines or [f"exit {run['rc']}"])[-1][:300]


def check_time(c: Check, runtimes: Sequence[str], precisions: Sequence[str]) -> None:
    for runtime in runtimes:
        for precision in precisions:
            path = f"time {runtime} {precision} {MODEL} b{BATCH}"
            if c.out_of_time():
                c.row(path, NOT_RUN, "gpu-check's time limit came first (--limit-s)", None, 0.0)
                continue
            run = c.jetbench("time", "--model", MODEL, "--batch", BATCH, "--device", "cuda",
                             "--runtime", runtime, "--precision", precision, *SHORT, "--json",
                             timeout_s=240)
            try:
                doc = json.loads(str(run["out"]))
                (res,) = doc["results"]
            except (ValueError, KeyError, TypeError):
                c.row(path, "failed", _first_error(run), run)
                continue
            status = str(res.get("status"))
            if status == "ok":
                thr = res.get("throughput", {})
                workload = res.get("workload", {})
                what = f"{thr.get('images_per_s', 0):.4g} img/s"
                check = workload.get("output_check") or workload.get("check")
                if isinstance(check, dict):
                    what += f", output check max diff {check.get('max_abs_diff', '?')}"
                c.row(path, "ok", what, run)
            else:
                c.row(path, status, str(res.get("message") or "")[:300], run)


def check_rows_together(c: Check, out: Path) -> None:
    """Several runtimes and precisions in one command: a row that cannot run (a CPU-only
    onnxruntime on this GPU, bf16 under ONNX Runtime) is that row's, the others still run."""
    path = "time torch,torchscript,onnxruntime x fp32,bf16 in one command"
    run = c.jetbench("time", "--model", MODEL, "--batch", BATCH, "--device", "cuda",
                     "--runtime", "torch,torchscript,onnxruntime", "--precision", "fp32,bf16",
                     *SHORT, "--json", timeout_s=240)
    try:
        rows = json.loads(str(run["out"]))["results"]
    except (ValueError, KeyError, TypeError):
        c.row(path, "failed", _first_error(run), run)
        return
    said = "; ".join(f"{r['workload'].get('runtime')} {r['workload'].get('precision')} "
                     f"{r['status']}" for r in rows)
    ok = len(rows) == 6 and not any(r["status"] == "failed" for r in rows)
    c.row(path, "ok" if ok else "failed", said, run)


def check_cuda_graph(c: Check, out: Path) -> None:
    path = f"time torchscript fp16 --cuda-graph {MODEL} b{BATCH}"
    run = c.jetbench("time", "--model", MODEL, "--batch", BATCH, "--device", "cuda",
                     "--runtime", "torchscript", "--precision", "fp16", "--cuda-graph", *SHORT,
                     "--json", timeout_s=240)
    try:
        (res,) = json.loads(str(run["out"]))["results"]
    except (ValueError, KeyError, TypeError):
        c.row(path, "failed", _first_error(run), run)
        return
    check = (res.get("workload") or {}).get("output_check") or {}
    c.row(path, "ok" if res.get("status") == "ok" else str(res.get("status")),
          f"{(res.get('throughput') or {}).get('images_per_s', 0):.4g} img/s, output check "
          f"max diff {check.get('max_abs_diff', '?')}" if res.get("status") == "ok"
          else str(res.get("message"))[:300], run)


def check_ort_tensorrt_cache(c: Check, out: Path) -> None:
    """ONNX Runtime's TensorRT provider twice in one cache: the second session loads the
    engine the first built (its build is the difference between the two runs' seconds)."""
    path = "onnxruntime tensorrt provider: engine cache (second session faster)"
    cache = {"JETBENCH_CACHE_DIR": str(c.work / "ort-trt-cache")}
    runs = []
    for _ in range(2):
        run = c.jetbench("time", "--model", MODEL, "--batch", BATCH, "--device", "cuda",
                         "--runtime", "onnxruntime", "--provider", "tensorrt", "--precision",
                         "fp16", *SHORT, "--json", timeout_s=300, env=cache)
        try:
            (res,) = json.loads(str(run["out"]))["results"]
        except (ValueError, KeyError, TypeError):
            c.row(path, "failed", _first_error(run), run)
            return
        if res.get("status") != "ok":
            c.row(path, str(res.get("status")), str(res.get("message"))[:300], run)
            return
        runs.append(run)
    first, second = (float(str(r["s"])) for r in runs)
    c.row(path, "ok" if second < first else "failed",
          f"first session {first} s, second {second} s", runs[1], first + second)


def check_nvml(c: Check, out: Path) -> None:
    run = c.jetbench("--root", str(c.root), "info", "--meter", "nvml", "--json", timeout_s=120)
    try:
        info = json.loads(str(run["out"]))
        text = json.dumps(info)
        ok = run["rc"] == 0 and "nvml" in text.lower()
        c.row("NVML power (info --meter nvml)", "ok" if ok else "failed",
              "an NVML power source listed" if ok else _first_error(run), run)
    except ValueError:
        c.row("NVML power (info --meter nvml)", "failed", _first_error(run), run)
    res_dir = out / "measure-nvml"
    run = c.jetbench("--root", str(c.root), "measure", "--model", MODEL, "--batch", BATCH,
                     "--device", "cuda", "--meter", "nvml", "--duration", "2s", "--warmup", "1s",
                     "--out", str(res_dir), timeout_s=240)
    docs = [json.loads(p.read_text()) for p in sorted(res_dir.glob("*.json"))]
    if not docs:
        c.row("NVML energy (measure --meter nvml)", "failed", _first_error(run), run)
        return
    doc = docs[0]
    total = (doc.get("power") or {}).get("total") or {}
    energy = total.get("energy_j")
    ok = doc.get("status") == "ok" and isinstance(energy, (int, float)) and energy > 0
    c.row("NVML energy (measure --meter nvml)", "ok" if ok else "failed",
          f"{total.get('mean_w')} W, {energy} J over the window, valid "
          f"{(doc.get('validity') or {}).get('valid')}; exit {run['rc']}", run)


# A CUDA load for the restore check: a busy GPU runs its top clock unless something locks it.
LOAD = ("import sys, time, torch\n"
        "a = torch.randn(2048, 2048, device='cuda', dtype=torch.float16)\n"
        "end = time.monotonic() + float(sys.argv[1])\n"
        "while time.monotonic() < end:\n"
        "    for _ in range(10):\n"
        "        a = (a @ a).clamp_(-1, 1)\n"
        "    torch.cuda.synchronize()\n")


def _sm_clocks_mhz() -> Optional[Sequence[int]]:
    """GPU 0's SM clock now and its max, MHz (None: not readable)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "-i", "0", "--query-gpu=clocks.sm,clocks.max.sm",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=30)
        now, top = (int(x.strip()) for x in out.stdout.strip().split(","))
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    return now, top


def clock_under_load(load_argv: Sequence[str], seconds: float = 4.0) -> Optional[Sequence[int]]:
    """The highest SM clock GPU 0 ran while `load_argv` kept it busy, and its max (MHz)."""
    load = subprocess.Popen(list(load_argv) + [str(seconds + 2)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    seen: List[int] = []
    top = None
    try:
        time.sleep(1.0)  # the load starts, the clock rises
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            read = _sm_clocks_mhz()
            if read is not None:
                seen.append(read[0])
                top = read[1]
            time.sleep(0.5)
    finally:
        load.kill()
        load.wait()
    return (max(seen), top) if seen and top else None


def check_restore(c: Check, locked_mhz: Optional[int], journal: Path,
                  load_argv: Sequence[str]) -> None:
    """After `measure --freq` locked the clocks at `locked_mhz`: put back means no journal left
    and, under load, the GPU running above that lock (where its max is above it)."""
    path = "restore after measure --freq"
    under = clock_under_load(load_argv)
    if under is None:
        c.row(path, "failed", "the SM clock could not be read under load (nvidia-smi)", None,
              0.0)
        return
    seen, top = under
    lock_left = locked_mhz is not None and top > locked_mhz * 1.05 and \
        seen <= locked_mhz * 1.02
    ok = not journal.exists() and not lock_left
    c.row(path, "ok" if ok else "failed",
          f"journal left: {journal.exists()}; under load after the restore the GPU ran up to "
          f"{seen} MHz (max {top} MHz; measure locked {locked_mhz} MHz)"
          + ("; a lock was left behind" if lock_left else ""), None, 0.0)


def _middle_graphics_mhz() -> Optional[int]:
    """The middle entry of the GPU's supported graphics clocks: a lock there shows, since the
    clock a busy GPU runs unlocked is its top one."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    out = subprocess.run([smi, "-i", "0", "--query-supported-clocks=graphics",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True,
                         timeout=60)
    mhz = sorted({int(x) for x in out.stdout.split() if x.strip().isdigit()})
    return mhz[len(mhz) // 2] if mhz else None


def check_clocks(c: Check, out: Path) -> None:
    mhz = _middle_graphics_mhz()
    freq = f"{mhz}MHz" if mhz else "max"
    path = f"measure --freq {freq} (NVML locked clocks)"
    res_dir = out / "measure-freq"
    run = c.jetbench("--root", str(c.root), "measure", "--model", MODEL, "--batch", BATCH,
                     "--device", "cuda", "--freq", freq, "--meter", "nvml", "--duration", "2s",
                     "--warmup", "1s", "--out", str(res_dir), timeout_s=240)
    docs = [json.loads(p.read_text()) for p in sorted(res_dir.glob("*.json"))]
    journal = c.root / "var/lib/jetbench/journal.json"
    if not docs:
        c.row(path, "failed", _first_error(run), run)
    else:
        doc = docs[0]
        observed = [o for o in (doc.get("clocks") or {}).get("observed", [])
                    if o.get("domain") == "gpu"]
        mean = observed[0].get("mean_hz") if observed else None
        ran_there = mhz is None or (mean is not None and abs(mean / 1e6 - mhz) <= 0.02 * mhz)
        ok = doc.get("status") == "ok" and run["rc"] == 0 and ran_there
        c.row(path, "ok" if ok else "failed",
              f"observed mean {None if mean is None else mean / 1e6} MHz; valid "
              f"{(doc.get('validity') or {}).get('valid')}; exit {run['rc']} "
              f"{'' if run['rc'] == 0 else _first_error(run)}", run)
    check_restore(c, mhz, journal, [sys.executable, "-c", LOAD])


def check_tune(c: Check, out: Path) -> None:
    run = c.jetbench("--root", str(c.root), "tune", "--model", MODEL, "--batch", BATCH,
                     "--device", "cuda", "--knobs", "gpu", "--budget", "4", "--duration", "1s",
                     "--warmup", "0.5s", "--out", str(out / "tune"), timeout_s=300)
    c.row("tune --budget 4 --knobs gpu", "ok" if run["rc"] == 0 else "failed",
          "finished its budget" if run["rc"] == 0 else _first_error(run), run)


WORKLOAD = """
import sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import torch
count = [0]
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("# TYPE items counter\\nitems_total %d\\n" % count[0]).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
server = ThreadingHTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(server.server_address[1], flush=True)
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    for _ in range(20):
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
    count[0] += 20
"""


def _counter(port: int) -> float:
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    return float(text.decode().split("items_total", 1)[1].split()[0])


def check_daemon_tune(c: Check, out: Path) -> None:
    """`daemon --tune` on the GPU's NVML clocks: a CUDA loop (fp16 4096^2 matmuls) counting
    its items on a Prometheus page of its own, the constraint half its rate at the start; the
    daemon must hold a point, then put the clocks back on SIGTERM."""
    path = "daemon --tune (NVML clocks, a live CUDA loop)"
    script = c.work / "workload.py"
    script.write_text(WORKLOAD)
    load = subprocess.Popen([sys.executable, str(script), "150"], stdout=subprocess.PIPE,
                            text=True, cwd=c.work)
    daemon = None
    try:
        port = int(load.stdout.readline())
        first, t0 = _counter(port), time.monotonic()
        time.sleep(3.0)
        rate = (_counter(port) - first) / (time.monotonic() - t0)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(REPO / "agent"), os.environ.get("PYTHONPATH", "")]))
        sock = c.work / "daemon.sock"
        log = open(out / "daemon-tune.log", "w")
        daemon = subprocess.Popen(
            [sys.executable, "-m", "jetbench.cli.main", "--root", str(c.root), "daemon",
             "--socket", str(sock), "--tune", "--tune-knobs", "gpu", "--tune-window", "2s",
             "--throughput-from", f"prometheus:http://127.0.0.1:{port}/metrics#items",
             "--constraint", f"items_per_s>={rate / 2:.1f}"], stdout=log, stderr=log, env=env,
            cwd=c.work)
        tune: Dict[str, object] = {}
        deadline = time.monotonic() + 100
        while time.monotonic() < deadline and daemon.poll() is None:
            time.sleep(2.0)
            run = c.jetbench("status", "--socket", str(sock), "--json", timeout_s=20)
            try:
                tune = json.loads(str(run["out"])).get("tune") or {}
            except ValueError:
                continue
            if tune.get("phase") == "holding":
                break
        daemon.send_signal(15)
        code = daemon.wait(timeout=60)
        log.close()
        journal = c.root / "var/lib/jetbench/journal.json"
        held = tune.get("held") or {}
        point = held.get("point_hz") or {}
        held_mhz = int(point["gpu"] / 1e6) if isinstance(point, dict) and point.get("gpu") \
            else None
        # the CUDA loop still runs: the clock it gets now says whether the lock went with it
        seen = [r[0] for r in (_sm_clocks_mhz() for _ in range(6)) if r is not None]
        top = _sm_clocks_mhz()
        lock_left = bool(held_mhz and seen and top and top[1] > held_mhz * 1.05
                         and max(seen) <= held_mhz * 1.02)
        ok = tune.get("phase") == "holding" and code == 0 and not lock_left and \
            not journal.exists() and bool(seen)
        c.row(path, "ok" if ok else "failed",
              f"rate at the start {rate:.0f}/s; phase {tune.get('phase')}, held "
              f"{held.get('point_hz')} at {held.get('items_per_s')}/s, "
              f"{held.get('items_per_j')} items/J after {tune.get('windows')} windows; exit "
              f"{code}; busy after SIGTERM the GPU ran up to {max(seen) if seen else '?'} MHz"
              f"{' (a lock left behind)' if lock_left else ''}, journal left "
              f"{journal.exists()}", None, round(time.monotonic() - t0, 1))
    except Exception as err:  # noqa: BLE001 - one row, whatever failed
        c.row(path, "failed", f"{type(err).__name__}: {err}", None, 0.0)
        if daemon is not None and daemon.poll() is None:
            daemon.send_signal(15)
            daemon.wait(timeout=60)
    finally:
        load.kill()
        load.wait()


def check_devices(c: Check, out: Path, gpus: int) -> None:
    if gpus < 2:
        c.row("measure --devices 2", "skipped", f"{gpus} GPU on this machine", None, 0.0)
        return
    run = c.jetbench("--root", str(c.root), "measure", "--model", MODEL, "--batch", BATCH,
                     "--device", "cuda", "--devices", "2", "--duration", "2s", "--warmup", "1s",
                     "--out", str(out / "devices2"), timeout_s=300)
    c.row("measure --devices 2", "ok" if run["rc"] == 0 else "failed",
          "one gathered result" if run["rc"] == 0 else _first_error(run), run)


def table(rows: Sequence[Dict[str, object]]) -> str:
    width = max(len(str(r["path"])) for r in rows)
    lines = [f"{'path':<{width}}  {'result':<11}  {'s':>6}  reason"]
    for r in rows:
        reason = str(r["reason"]).replace("\n", " ")
        lines.append(f"{r['path']!s:<{width}}  {r['result']!s:<11}  {r['s']!s:>6}  "
                     f"{reason[:160]}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write gpu_check.json and results here")
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--only", default="", help="run only these paths (comma-separated "
                        "names: nvml, clocks, tune, rows, graph, ort-trt, daemon-tune, "
                        "devices, time)")
    parser.add_argument("--limit-s", type=float, default=480.0,
                        help="stop starting new paths after this many seconds (default 480)")
    args = parser.parse_args(argv)
    gpus = gpu_names()
    if not gpus:
        print("gpu-check: no NVIDIA GPU here (nvidia-smi lists none): nothing to check")
        return 0
    print(f"gpu-check: {len(gpus)} GPU(s): {'; '.join(gpus)}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="jetbench-gpu-check-"))
    out = args.out or work / "results"
    out.mkdir(parents=True, exist_ok=True)
    c = Check(Path("/"), work, args.limit_s)
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    steps = (("nvml", check_nvml), ("clocks", check_clocks), ("tune", check_tune),
             ("rows", check_rows_together), ("graph", check_cuda_graph),
             ("ort-trt", check_ort_tensorrt_cache), ("daemon-tune", check_daemon_tune))
    for name, step in steps:  # the short ones first
        if only and name not in only:
            continue
        if c.out_of_time():
            c.row(step.__name__, NOT_RUN, "gpu-check's time limit came first (--limit-s)",
                  None, 0.0)
        else:
            step(c, out)
    if not only or "devices" in only:
        check_devices(c, out, len(gpus))
    if not only or "time" in only:
        check_time(c, [r for r in args.runtimes.split(",") if r],
                   [p for p in args.precisions.split(",") if p])
    print(table(c.rows))
    (out / "gpu_check.json").write_text(json.dumps(
        {"gpus": gpus, "rows": c.rows, "seconds": round(time.monotonic() - c.started, 1)},
        indent=1))
    return summary(c.rows, out / "gpu_check.json")


def summary(rows: Sequence[Dict[str, object]], where: Path) -> int:
    """The last line (each result counted) and the exit code: 0 only when a path was proved
    and none failed or was left unrun."""
    counts = {r: sum(1 for row in rows if row["result"] == r) for r in RESULTS}
    other = len(rows) - sum(counts.values())  # a result none of the above (an odd status)
    said = ", ".join(f"{n} {r}" for r, n in counts.items() if n)
    print(f"gpu-check: {said or 'nothing'} of {len(rows)} paths"
          + (f", {other} other" if other else "") + f"; {where}")
    bad = counts["failed"] + counts[NOT_RUN] + other
    return 1 if bad or not counts["ok"] else 0


if __name__ == "__main__":
    sys.exit(main())
