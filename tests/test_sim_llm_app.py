"""Issue 59, item 3: `jetbench sim app --llm`, a simulated LLM server whose speed follows the
simulated board's clocks: prefill compute-bound (the GPU clock), decode memory-bound (the EMC
clock, barely the GPU's), with vLLM's metric names. Driven with the test's own times (no
thread, no sleep) on a simulated Orin Nano whose running clocks are written into its tree."""

from __future__ import annotations

import pytest

from conftest import make_board, run_cli

pytest.importorskip("prometheus_client")

GPU_CUR = "sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu/cur_freq"
EMC_RATE = "sys/kernel/debug/bpmp/debug/clk/emc/rate"
GPU_LOAD = "sys/devices/platform/bus@0/17000000.gpu/load"


def _serve(base, gpu_hz: int, emc_hz: int, seconds: float = 30.0, **kw):
    """The app on `base` at these running clocks for `seconds` of its own time, one request
    after another (demand max: batch 1 throughout)."""
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.workload.sim_app import parse_demand
    from jetbench.workload.sim_llm_app import SimLlmApp

    (base / GPU_CUR).write_text(f"{gpu_hz}\n")
    (base / EMC_RATE).write_text(f"{emc_hz}\n")
    root = Root(str(base))
    app = SimLlmApp(root, detect(root), "llama-3.2-1b", "fp16", parse_demand("max"),
                    prompt_tokens=512, output_tokens=64, chunk_tokens=256, **kw)
    t, end = 1000.0, 1000.0 + seconds
    while t < end:
        t = app.step_until(t)
    return app


def _value(app, name: str) -> float:
    return sum(s.value for m in app.registry.collect() for s in m.samples if s.name == name)


def _tpot_s(app) -> float:
    """The mean time per generated token (a decode step at batch 1)."""
    return _value(app, "vllm:time_per_output_token_seconds_sum") / _value(
        app, "vllm:time_per_output_token_seconds_count")


def test_decode_follows_the_emc_clock_and_prefill_the_gpus(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    top = _serve(base, 624_750_000, 2_133_000_000)
    low_gpu = _serve(base, 306_000_000, 2_133_000_000)
    low_emc = _serve(base, 624_750_000, 665_600_000)
    # A decode step reads the 1.24 B fp16 weights once: 2.48 GB at 2133 MHz x 2 x 16 bytes x
    # 0.9 = 61.4 GB/s is 40.4 ms; its compute, 2.48 GFLOP at 1024 cores x 16 x 624.75 MHz x
    # 0.55, is 0.44 ms (0.90 ms at 306 MHz), a quarter of it showing: the GPU's clock halved
    # adds 0.1 ms to ~44 ms (under 1%), the EMC's 3.2x lower multiplies the step by ~3.
    assert _tpot_s(low_gpu) / _tpot_s(top) == pytest.approx(1.0, abs=0.01)
    assert 2.7 <= _tpot_s(low_emc) / _tpot_s(top) <= 3.3
    # A 256-token prefill chunk: 0.635 TFLOP is 113 ms at 624.75 MHz, 230 ms at 306 MHz; its
    # weights' 40 ms (128 ms at 665.6 MHz) mostly hidden under it: the time to first token
    # (two chunks, demand max: no wait) nearly doubles with the GPU's clock halved, and moves
    # by a fraction with the EMC's.
    ttft = {k: sum(a.ttfts_s) / len(a.ttfts_s) for k, a in
            (("top", top), ("gpu", low_gpu), ("emc", low_emc))}
    assert 1.8 <= ttft["gpu"] / ttft["top"] <= 2.0, ttft
    assert 1.05 <= ttft["emc"] / ttft["top"] <= 1.4, ttft
    assert 0.2 <= ttft["top"] <= 0.3, ttft  # 2 x (113 + 40/4 + 2) ms
    # decode is most of the time: 64 tokens x ~44 ms against a 0.25 s prefill
    assert _value(top, "vllm:request_success_total") >= 30 / (0.25 + 64 * 0.047)


def test_the_metrics_are_vllms_and_the_phase_shows_in_which_counter_moves(tmp_path):
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.workload.sim_app import parse_demand
    from jetbench.workload.sim_llm_app import SimLlmApp

    base = make_board(tmp_path, "orin-nano")
    root = Root(str(base))
    app = SimLlmApp(root, detect(root), "llama-3.2-1b", "fp16", parse_demand("0.5"),
                    prompt_tokens=600, output_tokens=10, chunk_tokens=256)
    t, moves, loads = 1000.0, [], set()
    before = (0.0, 0.0)
    while t < 1004.0:
        t = app.step_until(t)
        loads.add(int((base / GPU_LOAD).read_text()))
        now = (_value(app, "vllm:prompt_tokens_total"),
               _value(app, "vllm:generation_tokens_total"))
        if now != before:
            moves.append((now[0] - before[0], now[1] - before[1]))
        before = now
    # one request at 0.5/s: three prefill chunks (256, 256, 88 tokens: only the prompt counter
    # moves), the last one ending with the first token; then 9 decode steps of one token each
    assert moves[:3] == [(256, 0), (256, 0), (88, 1)], moves
    assert moves[3:12] == [(0, 1)] * 9, moves
    assert _value(app, "vllm:request_success_total") >= 1
    names = {s.name for m in app.registry.collect() for s in m.samples}
    for name in ("vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                 "vllm:time_to_first_token_seconds_bucket",
                 "vllm:e2e_request_latency_seconds_bucket",
                 "vllm:time_per_output_token_seconds_bucket", "vllm:num_requests_running",
                 "vllm:num_requests_waiting", "vllm:request_success_total"):
        assert name in names, sorted(names)
    labels = {s.labels.get("model_name") for m in app.registry.collect() for s in m.samples
              if s.name.startswith("vllm:")}
    assert labels == {"sim:llama-3.2-1b"}
    # the GPU's load file shows the work (busy most of a request), for the power model
    assert max(loads) >= 900, loads


def test_sim_app_llm_refuses_bad_input_in_one_message(tmp_path):
    base = make_board(tmp_path, "orin-nano")
    for args, says in ((("--llm-model", "gpt-5"), "--llm-model 'gpt-5'"),
                       (("--prompt-tokens", "0"), "at least 1"),
                       (("--demand", "fast"), "--demand 'fast'")):
        done = run_cli("sim", "app", str(base), "--llm", "--port", "0", *args)
        assert done.returncode == 1 and says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
