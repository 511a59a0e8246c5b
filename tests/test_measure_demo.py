"""The demo path (`jetbench demo`) on a small network: simulated TX1, the whitepaper's
profile, table titled SIMULATED, a trace plot per configuration; the board tree removed."""



from jetbench.report import tables
from jetbench.report.plots import png_size
from jetbench.run.demo import demo_request, run_demo


def test_demo_measures_fp32_and_fp16_on_a_simulated_tx1(tmp_path, tiny):
    out = tmp_path / "demo"
    request = demo_request(out, models=("jb_tinynet:tiny",), duration_s=1.0, iterations=2,
                           warmup_s=0.0, idle_s=0.2, input_shape=(3, 16, 16))
    result = run_demo(out, request=request)
    docs = result.report.results
    assert [d["workload"]["precision"] for d in docs] == ["fp32", "fp16"]
    for d in docs:
        assert d["simulated"] is True and d["board"]["family"] == "tx1-r24"
        assert d["settings"]["profile"] == "tx1-690mhz"
        assert d["settings"]["applied"]["gpu_hz"] == 691_200_000
        assert d["efficiency"]["images_per_j"] > 0
        assert d["efficiency"]["pre_regulation_estimate"]["regulator_efficiency"] == 0.8
    assert "SIMULATED" in tables.title(docs)
    assert len(result.plots) == 2 and all(png_size(p) == (900, 500) for p in result.plots)
    assert result.report.restored == "restored"
    assert sorted(p.suffix for p in out.iterdir()) == [".csv"] * 2 + [".json"] * 2 + [".png"] * 2


def test_demo_with_out_leaves_no_temporary_directory(tmp_path, tiny, monkeypatch):
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    out = tmp_path / "demo"
    request = demo_request(out, models=("jb_tinynet:tiny",), precisions=("fp32",),
                           duration_s=0.3, iterations=2, warmup_s=0.0, idle_s=0.2,
                           input_shape=(3, 16, 16))
    result = run_demo(out, request=request)
    # jetbench's own (jetbench-demo-*) is gone; torch may leave its inductor cache there
    # (torchinductor_USER), depending on what ran before in this process: not the demo's.
    left = [p.name for p in scratch.iterdir() if not p.name.startswith("torchinductor_")]
    assert result.report.paths and left == []
