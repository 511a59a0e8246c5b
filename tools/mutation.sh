#!/usr/bin/env bash
# Mutation testing of jetbench's core modules with mutmut (not run in CI: CPU heavy).
#
#   tools/mutation.sh                 # all five modules, their tests, 2 workers
#   MUTATION_JOBS=4 tools/mutation.sh
#   MUTATION_DIR=/tmp/mut tools/mutation.sh   # keep the work directory (default: a temp dir)
#
# mutmut (pip install -e '.[mutation]') maps tests to the functions they reach by module name, so it
# needs the package at the top of its work tree: the script stages agent/jetbench and tests/
# there, with its own [tool.mutmut] section, and never touches the checkout. The scores
# printed at the end (killed / (all - no tests)) per module go into TESTING.md.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PYTHON:-$REPO/.venv/bin/python}
[ -x "$PY" ] || PY=python3
STAGE=${MUTATION_DIR:-$(mktemp -d -t jetbench-mutation.XXXXXX)}
JOBS=${MUTATION_JOBS:-2}

# MUTATION_MODULES="jetbench/hw/fs.py" narrows the run.
read -r -a MODULES <<< "${MUTATION_MODULES:-jetbench/ownership/journal.py jetbench/sampling/energy.py \
jetbench/sampling/window.py jetbench/profiles/targets.py jetbench/hw/fs.py}"
# The tests that exercise those modules in-process (mutmut only sees in-process calls).
TESTS=(
  tests/test_fs.py
  tests/test_journal.py
  tests/test_power_energy.py
  tests/test_power_sampler.py
  tests/test_maxperf_restore.py
  tests/test_profiles.py
)

rm -rf "$STAGE/jetbench" "$STAGE/tests" "$STAGE/mutants"
mkdir -p "$STAGE"
cp -rL "$REPO/agent/jetbench" "$STAGE/jetbench"
cp -r "$REPO/tests" "$STAGE/tests"
find "$STAGE" -name __pycache__ -prune -exec rm -rf {} +
{
  echo '[tool.mutmut]'
  echo 'source_paths = ["jetbench"]'
  printf 'only_mutate = ['; printf '"%s", ' "${MODULES[@]}"; echo ']'
  printf 'pytest_add_cli_args_test_selection = ['
  for t in "${TESTS[@]}"; do [ -f "$REPO/$t" ] && printf '"%s", ' "$t"; done; echo ']'
  echo 'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-m", "not kernel"]'
  echo '[tool.pytest.ini_options]'
  echo 'markers = ["kernel: FUSE-served boards"]'
} > "$STAGE/pyproject.toml"

cd "$STAGE"
# Subprocesses the tests start (python -m jetbench...) import the mutated copy too. The
# directory must exist before Python starts: a missing sys.path entry is cached as absent, and
# jetbench would then be imported unmutated from wherever else it is installed.
mkdir -p "$STAGE/mutants"
export PYTHONPATH="$STAGE/mutants"
# -P: the staging directory's unmutated jetbench/ must not shadow mutants/ on sys.path.
"$PY" -P -m mutmut run --max-children "$JOBS" || true
"$PY" -P -m mutmut results --all true > "$STAGE/results.txt" 2>&1 || true
"$PY" - "$STAGE/results.txt" "${MODULES[@]}" <<'PYEOF'
import re, sys
from collections import Counter
lines = open(sys.argv[1]).read().splitlines()
by = {m: Counter() for m in sys.argv[2:]}
for line in lines:
    m = re.match(r"\s*(jetbench\.[\w.]+?)\.x.*?:\s*(\w[\w ]*)$", line)
    if not m:
        continue
    path = m.group(1).replace(".", "/") + ".py"
    if path in by:
        by[path][m.group(2).strip()] += 1
print(f"{'module':32} {'mutants':>7} {'killed':>6} {'survived':>8} {'no tests':>8} {'timeout':>7} {'score':>6}")
for path, c in by.items():
    total = sum(c.values())
    killed = c["killed"] + c["timeout"]
    tested = total - c["no tests"]
    score = f"{100 * killed / tested:.0f}%" if tested else "-"
    print(f"{path:32} {total:7} {c['killed']:6} {c['survived']:8} {c['no tests']:8} {c['timeout']:7} {score:>6}")
PYEOF
echo "work directory: $STAGE (mutmut show NAME there shows a mutant)"
