"""A property over every simulated board, in each power mode it has, on the kernel-faithful
(FUSE-served) board: for `maxperf`, `apply` of every shipped profile, the pin `measure --freq`
makes at each GPU table entry, and `restore`,

- no write is refused (the server logs every write to a knob, with its errno);
- every knob jetbench reports writing reads back what it reported, and the clock it reports as
  resolved is the clock that runs (a kernel that rounds inside its rules is no other agent);
- no clock runs above the mode's cap (each policy's `scaling_max_freq`, each devfreq node's
  `max_freq`, as the mode left them before jetbench wrote anything);
- `restore` leaves every setting byte-identical.

The capped modes put their caps between two table entries, as nvpmodel's confs do (Nano 5 W:
CPU 918000 kHz between 825600 and 921600, GPU 640 MHz between 614.4 and 691.2; TX2 MAXQ; Xavier
NX 10 W; Orin Nano 7 W; AGX Orin 15 W and 30 W; Thor 120 W): the expected caps are read from the
tree before the first write, never from jetbench. One mount per board and mode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from typer.testing import CliRunner

from jetbench.sim.boards import BOARDS

from conftest import cli, diff, fuse_board

pytestmark = pytest.mark.kernel

runner = CliRunner()
CASES = [(key, mode, ()) for key, b in sorted(BOARDS.items())
         for mode in (None, *(m for m, _caps in b.mode_caps))]
# JetPack 6/7 firmware (issue 57): AGX Orin R36's BPMP boot cap on the EMC, Thor's firmware
# re-floor of the EMC.
CASES += [("orin-agx", None, ("emc-boot-cap",)), ("thor", None, ("emc-refloor",))]
# nvpmodel's EMC cap, where each release keeps it (docs/hardware.md, "EMC"); 0 = no cap
EMC_CAP_FILES = ("sys/kernel/nvpmodel_emc_cap/emc_iso_cap", "sys/kernel/nvpmodel_clk_cap/emc")
BPMP_EMC_RATE = "sys/kernel/debug/bpmp/debug/clk/emc/rate"
# Files the kernel computes (clocks that run, rail readings), the journal's directory, and
# scaling_setspeed (it shows the running clock): not settings.
NOT_SETTINGS = ("scaling_cur_freq", "cpuinfo_cur_freq", "cur_freq", "target_freq", "clk_rate",
                "gbus/rate", "emc/rate", "cur_pwm", "scaling_setspeed")



def knob_files(root: Path) -> List[Path]:
    """Every file the board lets root write under /sys (mode 0644: an attribute with a store
    function; sysfs serves the others 0444), links not followed."""
    out = []
    for path in sorted((root / "sys").rglob("*")):
        if not path.is_symlink() and path.is_file() and path.stat().st_mode & 0o200 \
                and not path.name.endswith(NOT_SETTINGS):
            out.append(path)
    return out


def settings(files: List[Path]) -> Dict[str, str]:
    return {str(f): f.read_text() for f in files}


def read(path: Path) -> str:
    return path.read_text().strip()


def policies(root: Path) -> List[Path]:
    cpu = root / "sys/devices/system/cpu"
    return sorted(cpu.glob("cpufreq/policy*")) or sorted(cpu.glob("cpu[0-9]*/cpufreq"))


def devfreq_nodes(root: Path) -> List[Path]:
    return sorted((root / "sys/class/devfreq").glob("*"))


def caps(root: Path) -> Dict[Path, int]:
    """The max knob of each CPU policy and devfreq node as the power mode left it, and the
    BPMP EMC's rate under the mode's EMC cap file (where non-zero)."""
    out = {p: int(read(p / "scaling_max_freq")) for p in policies(root)}
    out.update({d: int(read(d / "max_freq")) for d in devfreq_nodes(root)})
    emc = [int(read(root / f)) for f in EMC_CAP_FILES if (root / f).exists()]
    if (root / BPMP_EMC_RATE).exists() and any(emc):
        out[root / BPMP_EMC_RATE] = min(c for c in emc if c)
    return out


def running(node: Path) -> int:
    if node.name == "rate":  # the BPMP EMC's rate file: the rate that runs
        return int(read(node))
    name = "scaling_cur_freq" if (node / "scaling_cur_freq").exists() else "cur_freq"
    return int(read(node / name))


def above_cap(root: Path, cap: Dict[Path, int]) -> List[str]:
    return [f"{node}: runs {running(node)} above its cap {limit}"
            for node, limit in cap.items() if running(node) > limit]


def refused(board) -> List[tuple]:
    return [w for w in board.writes() if w[2] != "ok"]


def check_report(root: Path, doc: Dict) -> List[str]:
    """Each write reads back as reported; each resolved cpu/gpu clock is the one running."""
    resolved = {(r["domain"], r["setting"]): r["resolved_hz"] for r in doc["requested"]}
    # the BPMP EMC rate is rounded (and held under a firmware ceiling) by the clock framework:
    # it must read back the clock the report resolved (and names), not the value written
    kept = {w["path"]: str(resolved[("emc", "freq")]) if w["path"].endswith(BPMP_EMC_RATE)
            and ("emc", "freq") in resolved else w["new"] for w in doc["writes"]}
    wrong = [f"{w['path']}: reported {kept[w['path']]!r}, reads {read(root / w['path'][1:])!r}"
             for w in doc["writes"] if read(root / w["path"][1:]) != kept[w["path"]]]
    for w in doc["writes"]:
        node = (root / w["path"][1:]).parent
        if w["path"].endswith("/scaling_min_freq") and ("cpu", "freq") in resolved:
            want = resolved[("cpu", "freq")] // 1000  # kHz in cpufreq files
        elif w["path"].endswith("/min_freq") and w["step"].startswith("gpu ") \
                and ("gpu", "freq") in resolved:
            want = resolved[("gpu", "freq")]
        else:
            continue
        if running(node) != want:
            wrong.append(f"{node}: resolved {want}, runs {running(node)}")
    return wrong


def pin_at(root: Path, board, entry_hz: int) -> Optional[str]:
    """What `measure --freq ENTRY` pins (planning's run/request.resolve_gpu, then
    run/request.build_profile and apply_profile), in process: None when pinned, else the
    refusal (a power mode's cap: nothing written)."""
    from jetbench.errors import JetbenchError
    from jetbench.hw.fs import Root
    from jetbench.profiles.apply import apply_profile
    from jetbench.run.request import MeasureRequest, build_profile, resolve_gpu

    try:
        gpu = resolve_gpu(Root(root), board, entry_hz, beyond_power_mode=False)
        profile = build_profile(MeasureRequest(), gpu, root)
        apply_profile(Root(root), board, profile)
    except JetbenchError as err:
        return str(err)
    return None


@pytest.mark.parametrize("key,mode,quirks", CASES,
                         ids=[f"{k}-{m if m is not None else 'default'}" + "".join(
                             f"-{q}" for q in qs) for k, m, qs in CASES])
def test_every_command_pins_what_the_kernel_runs_within_the_mode(tmp_path, key, mode, quirks):
    from jetbench.hw.board import detect
    from jetbench.hw.fs import Root
    from jetbench.profiles.profile import list_profiles

    with fuse_board(tmp_path, key, quirks=quirks, power_mode=mode) as b:
        root = b.root
        cap = caps(root)
        files = knob_files(root)
        assert len(files) > 10, files  # the clock, fan and idle knobs, at least
        before = settings(files)
        assert above_cap(root, cap) == []

        def round_trip(what: str) -> None:
            assert refused(b) == [], (what, refused(b))
            assert above_cap(root, cap) == [], what
            done = cli(root, "restore")
            assert done.exit_code == 0, (what, done.output)
            assert diff(before, settings(files)) == [], what
            assert refused(b) == [], (what, refused(b))

        r = cli(root, "maxperf", "--json")
        assert r.exit_code == 0, r.output
        assert check_report(root, json.loads(r.output)) == []
        round_trip("maxperf")

        for name, _path in list_profiles(root):
            writes = len(b.writes())
            r = cli(root, "apply", name, "--json")
            if r.exit_code == 1:  # a profile for another board, or above this mode's caps
                assert "nothing was written" in r.output, (name, r.output)
                assert len(b.writes()) == writes, name
                continue
            assert r.exit_code == 0, (name, r.output)
            assert check_report(root, json.loads(r.output)) == [], name
            round_trip(f"apply {name}")

        # `measure --freq` at each entry, one after another as a sweep pins them (the journal
        # keeps the first originals), then one restore.
        board = detect(Root(root))
        gpu_cap = next((limit for node, limit in cap.items()
                        if board.gpu is not None and node.name == board.gpu.name), None)
        for entry in board.gpu.available_hz if board.gpu is not None else ():
            writes = len(b.writes())
            refusal = pin_at(root, board, entry)
            if gpu_cap is not None and entry > gpu_cap:
                assert refusal is not None and "power mode's cap" in refusal, (entry, refusal)
                assert len(b.writes()) == writes, entry
                continue
            assert refusal is None, (entry, refusal)
            assert int(read(root / board.gpu.cur_freq[1:])) == entry, entry
            assert refused(b) == [], (entry, refused(b))
            assert above_cap(root, cap) == [], entry
        round_trip("measure --freq at each GPU table entry")
