"""measure names the faster precision when a reduced one is slower than FP32 at the same clocks."""

from jetbench.run.result import precision_advice


def _doc(precision, ips, gpu_hz=691_200_000, status="ok"):
    return {"status": status,
            "workload": {"model": "alexnet", "precision": precision, "batch": 1, "device": "cpu"},
            "throughput": {"images_per_s": ips, "cv": 0.01},
            "settings": {"applied": {"gpu_hz": gpu_hz}}}


def test_slower_fp16_is_named_with_the_faster_choice():
    advice = precision_advice([_doc("fp32", 30.0), _doc("fp16", 2.0), _doc("bf16", 45.0)])
    assert len(advice) == 1
    assert "fp16 is 15.0x slower than fp32" in advice[0] and "use bf16" in advice[0]


def test_no_advice_within_noise_or_across_clocks():
    assert precision_advice([_doc("fp32", 30.0), _doc("fp16", 28.5)]) == []
    # FP16 at another GPU clock is not compared with this clock's FP32.
    assert precision_advice([_doc("fp32", 30.0), _doc("fp16", 2.0, gpu_hz=998_400_000)]) == []
    assert precision_advice([_doc("fp32", 30.0), _doc("fp16", None, status="oom")]) == []


def test_no_verdict_where_the_spread_is_unknown():
    """Issue 61: a rate with no spread gives no verdict, and says why."""
    docs = [_doc("fp32", 30.0), _doc("fp16", 2.0)]
    del docs[1]["throughput"]["cv"]
    (advice,) = precision_advice(docs)
    assert advice.startswith("no verdict on fp16 against fp32") and "unknown" in advice
