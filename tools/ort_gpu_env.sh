#!/bin/sh
# The real onnxruntime-gpu wheel for the `ort_gpu` tests (run by `make test`): on a machine
# without CUDA its CUDA and TensorRT providers fail to load exactly as on a board missing
# libraries, so jetbench's provider fallback, ORT's stdout banner and the reasons it quotes are
# tested against the library itself, not a stand-in.
#
#   tools/ort_gpu_env.sh PYTHON MAIN_VENV ORT_VENV
#
# ORT_VENV holds onnxruntime-gpu and sees MAIN_VENV's packages (and the system's) after its
# own (a .pth that adds MAIN_VENV's site-packages), so its `onnxruntime` is the GPU build while
# torch and the rest come from MAIN_VENV. x86-64 Linux with Python 3.11+ only (the pinned
# wheel's); elsewhere, or when the wheel cannot be had, it says so and the tests skip, saying
# why. Never fatal. JETBENCH_NO_ORT_GPU=1 skips it.
set -u
[ "${JETBENCH_NO_ORT_GPU:-}" = 1 ] && exit 0
PY=$1 MAIN=$2 ORT=$3
WHEEL="onnxruntime-gpu==1.31.1"
[ -f "$ORT/.installed" ] && exit 0
if [ "$(uname -m)" != x86_64 ] || ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "setup: the ort_gpu tests skip here ($WHEEL is for x86-64 and Python 3.11+)"
    exit 0
fi
echo "setup: a second venv, $ORT, with the real $WHEEL for the ort_gpu tests (about 250 MB)..."
rm -rf "$ORT"
# --no-deps: what it needs (numpy, protobuf, flatbuffers, sympy) is in MAIN_VENV already, beside
# the CPU onnxruntime that has the same needs
if "$PY" -m venv --system-site-packages "$ORT" && "$ORT/bin/python" -m pip install -q --no-deps "$WHEEL"; then
    main_site=$("$MAIN/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    ort_site=$("$ORT/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "import site; site.addsitedir('$main_site')" > "$ort_site/zz_jetbench_main_venv.pth"
    touch "$ORT/.installed"
else
    echo "setup: could not install $WHEEL: the ort_gpu tests will skip, saying so"
    rm -rf "$ORT"
fi
exit 0
