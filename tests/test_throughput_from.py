"""--throughput-from parsing, pure: trtexec's summary lines (the fake trtexec prints them in
the format of TensorRT's sampleReporting.cpp), a regex's last match, trtexec's batch."""

import subprocess
import sys
from pathlib import Path

import pytest

from jetbench.errors import UsageError
from jetbench.workload.command.spec import command_spec
from jetbench.workload.command.throughput_from import (
    OutputParser,
    parse_throughput_from,
    shapes_batch,
    stats_ms,
)

FAKES = Path(__file__).parent / "fake_commands"


def _fake_trtexec_lines(*args):
    out = subprocess.run([sys.executable, str(FAKES / "fake_trtexec.py"), "--run-s=0.25", *args],
                         capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def _fed(spec_text, lines):
    parser = OutputParser(parse_throughput_from(spec_text))
    for line in lines:
        parser.feed(line)
    return parser


def test_trtexec_summary_is_read_from_its_documented_lines():
    p = _fed("trtexec", _fake_trtexec_lines())
    assert p.value == 411.25
    assert p.latency_ms == {"min": 2.25, "max": 2.9, "mean": 2.4, "p50": 2.375, "p90": 2.5,
                            "p95": 2.625, "p99": 2.8}
    assert p.gpu_compute_ms["mean"] == 2.25 and p.gpu_compute_ms["p99"] == 2.625
    assert (p.queries, p.inference_s, p.walltime_s) == (1234, 0.25, 0.25)
    assert p.missing() is None


def test_older_trtexec_end_to_end_line_is_not_the_latency():
    p = _fed("trtexec", _fake_trtexec_lines("--old"))
    assert p.latency_ms == {"min": 2.25, "max": 2.9, "mean": 2.4, "p50": 2.375, "p99": 2.8}


def test_trtexec_numbers_in_stream_notation_and_without_the_logger_prefix():
    p = _fed("trtexec", ["Throughput: 1.23457e+06 qps"])
    assert p.value == 1234570.0
    assert stats_ms("min = 1e-05 ms, median = 0.5 ms, percentile(99.9%) = 2 ms") == {
        "min": 1e-05, "p50": 0.5, "p99.9": 2.0}


def test_no_summary_says_what_was_missing():
    p = _fed("trtexec", ["[I] Starting inference", "&&&& FAILED TensorRT.trtexec"])
    assert p.value is None
    assert "Throughput: N qps" in p.missing()


def test_regex_last_match_wins_even_on_one_line():
    p = _fed(r"regex:eval rate: +([0-9.]+) tokens/s",
             ["eval rate:  12.5 tokens/s", "noise",
              "eval rate: 3 tokens/s eval rate: 17.25 tokens/s", "eval rate: later garbage"])
    assert p.value == 17.25


@pytest.mark.parametrize("text", ["regex:no group", "regex:(a)(b)", "regex:([0-9]", "items:0",
                                  "items:many", "trtexec:x", "tokens", ""])
def test_bad_throughput_from_is_a_usage_error(text):
    with pytest.raises(UsageError):
        parse_throughput_from(text)


def test_items_spec():
    spec = parse_throughput_from("items:500")
    assert spec.items == 500.0 and spec.text() == "items:500"
    assert _fed("items:500", []).missing() is None


def test_shapes_batch():
    assert shapes_batch(["trtexec", "--shapes=input:8x3x224x224,mask:8x128"]) == (8, [])
    assert shapes_batch(["trtexec", "--shapes", "'x':4x3x8x8"]) == (4, [])
    batch, notes = shapes_batch(["--shapes=a:2x3,b:4x3"])
    assert batch == 2 and "different first dimensions" in notes[0]
    assert shapes_batch(["trtexec", "--loadEngine=m.engine"]) == (None, [])


def test_trtexec_batch_sources():
    shaped = command_spec("trtexec --loadEngine=m.engine --shapes=in:8x3x224x224", "trtexec")
    assert (shaped.batch, shaped.batch_source, shaped.qps_factor) == (8, "--shapes", 8)
    given = command_spec("trtexec --shapes=in:8x3x224x224", "trtexec", batch=16)
    assert (given.batch, given.qps_factor) == (16, 16) and "differs" in given.notes[0]
    implicit = command_spec("trtexec --deploy=x.prototxt --batch=4", "trtexec")
    assert (implicit.batch, implicit.qps_factor) == (4, 1)  # its qps already counts samples
    unknown = command_spec("trtexec --loadEngine=m.engine", "trtexec")
    assert (unknown.batch, unknown.qps_factor) == (1, 1) and "not known" in unknown.notes[0]
    assert command_spec("llama-bench -m x.gguf", "items:5", batch=3).qps_factor == 1


def test_command_names_skip_launchers():
    assert command_spec("python3 /x/bench_llm.py --n 3", "items:1").name == "bench_llm"
    assert command_spec("taskset -c 0 /usr/src/tensorrt/bin/trtexec", "trtexec").name == "trtexec"


@pytest.mark.parametrize("args", [("", "trtexec"), ("true", None), ("true", "items:1", "watts"),
                                  ("'unclosed", "items:1")])
def test_bad_command_options(args):
    with pytest.raises(UsageError):
        command_spec(*args)


def _fake_lines(name, *args):
    out = subprocess.run([sys.executable, str(FAKES / name), "0", *args], capture_output=True,
                         text=True, check=True)
    return (out.stdout + out.stderr).splitlines()


def test_readme_recipes_read_their_fakes():
    """The README's regexes against the fakes' (published-output) layouts."""
    assert _fed(r"regex:\| +tg[0-9]+ +\| +([0-9.]+) ±",
                _fake_lines("fake_llama_bench.py")).value == 42.37
    assert _fed(r"regex:^eval rate: +([0-9.]+) tokens/s",
                _fake_lines("fake_llm_bench.py")).value == 17.25
    assert _fed(r"regex:average: ([0-9.]+)",
                _fake_lines("fake_fpsdisplaysink.py")).value == 30.12
    vllm = ["Request throughput (req/s):              4.80",
            "Output token throughput (tok/s):         613.9",
            "Total Token throughput (tok/s):          3069.4"]
    assert _fed(r"regex:^Output token throughput \(tok/s\): +([0-9.]+)", vllm).value == 613.9


def test_the_runner_reads_chunks_whole_lines_and_a_last_line_without_newline(tmp_path):
    """Output read in 64 KiB chunks still reaches the parser as whole lines (one split across
    chunks, the last one without a newline), and every byte reaches --cmd-log."""
    import dataclasses

    from jetbench.workload.command.run import run_command

    code = ("import sys\nfor i in range(20000): sys.stdout.write('line %d of padding\\n' % i)\n"
            "sys.stdout.write('[I] Throughput: 7.5 qps')")
    log = tmp_path / "out.log"
    spec = dataclasses.replace(command_spec("x", "trtexec", log_path=log),
                               argv=(sys.executable, "-c", code))
    events = []
    run = run_command(spec, lambda: events.append("start"), lambda: events.append("end"))
    assert events == ["start", "end"] and run.exit_code == 0
    assert run.parser.value == 7.5
    assert run.tail[-2:] == ["line 19999 of padding", "[I] Throughput: 7.5 qps"]
    expected = sum(len(f"line {i} of padding\n") for i in range(20000)) + 23
    header = len(f"# jetbench: {spec.line}\n")
    assert log.stat().st_size == header + expected


def test_blocks_give_the_same_answer_as_lines():
    spec = parse_throughput_from(r"regex:^eval rate: +([0-9.]+) tokens/s")
    block = OutputParser(spec)
    block.feed_block("prompt eval rate:     155.60 tokens/s\nnoise")
    assert block.value is None  # anchored per line: the prompt's rate is not the eval rate
    block.feed_block("eval rate:   9.5 tokens/s\nprompt eval rate: 3 tokens/s\n"
                     "eval rate: 11.25 tokens/s\ntrailing")
    assert block.value == 11.25
    trt = OutputParser(parse_throughput_from("trtexec"))
    trt.feed_block("[I] GPU latency: 2.38 ms\n[I] Host latency: 2.4 ms")
    assert trt.value is None and trt.latency_ms == {}
    trt.feed_block("[I] x\n[I] Throughput: 12 qps\n[I] Latency: min = 1 ms, median = 2 ms")
    assert trt.value == 12.0 and trt.latency_ms == {"min": 1.0, "p50": 2.0}


# -- issue 35, item 8: a user's pattern runs in linear time ---------------------------------
CATASTROPHIC = r"regex:^(?:a+)+b([0-9])$"  # Python's re backtracks 2^34 ways on 34 a's


def test_a_catastrophic_pattern_is_matched_in_linear_time():
    """In a child with a bound: Python's re would run past it (the issue: over 90 s)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "from jetbench.workload.command.throughput_from import OutputParser, "
            "parse_throughput_from\n"
            f"p = OutputParser(parse_throughput_from({CATASTROPHIC!r}))\n"
            "p.feed_block('a' * 34 + '\\n' + 'a' * 5000)\n"
            "for n in range(30, 40): p.feed('a' * n)\n"
            "p.feed('aaab7')\n"
            "print(p.value)\n")
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent.parent / "agent")],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "7.0"


@pytest.mark.parametrize("pattern", [r"(a)\1([0-9]+)", r"(?<=rate: )([0-9]+)",
                                     r"([0-9]+)(?= tok)"])
def test_a_pattern_re2_cannot_run_is_one_usage_error(pattern, capfd):
    with pytest.raises(UsageError, match="linear time") as caught:
        parse_throughput_from("regex:" + pattern)
    assert "\n" not in caught.value.message
    assert "re2.cc" not in capfd.readouterr().err  # RE2's own log line is not printed


@pytest.mark.parametrize("text", ["items:inf", "items:nan", "items:1e400", "items:-inf"])
def test_items_must_be_a_finite_count(text):
    with pytest.raises(UsageError, match="positive number"):
        parse_throughput_from(text)
