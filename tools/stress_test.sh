#!/usr/bin/env bash
# The stress run (TESTING.md, "Before each stop: the stress run"): the README's test command
# from a fresh clone of this repository's HEAD, started in the background with SIGINT ignored,
# no terminal and stdin closed, beside BURNERS CPU-burning processes, RUNS times in a row.
# Each run gets a clone of its own (its own .venv, built as on a new machine).
#
#   tools/stress_test.sh                 # 1 run beside 4 burners
#   RUNS=3 BURNERS=4 tools/stress_test.sh
#
# Prints one line per run (exit code, pytest's closing line, minutes, load average) and exits
# non-zero when any run failed; each run's whole log stays in WORK (printed at the start).
set -u
RUNS=${RUNS:-1}
BURNERS=${BURNERS:-4}
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel) || exit 2
WORK=${WORK:-$(mktemp -d /tmp/jetbench-stress.XXXXXX)}
echo "stress: $RUNS run(s) of make test at $(git -C "$repo" rev-parse --short HEAD)," \
     "each beside $BURNERS CPU burners; logs in $WORK"

burners=()
stop_burners() { [ ${#burners[@]} -eq 0 ] || kill "${burners[@]}" 2>/dev/null; burners=(); }
trap stop_burners EXIT
failed=0
for run in $(seq 1 "$RUNS"); do
    clone="$WORK/clone-$run"
    git clone -q "$repo" "$clone" || exit 2
    for _ in $(seq 1 "$BURNERS"); do
        python3 -c 'while 1: pass' &
        burners+=($!)
    done
    start=$(date +%s)
    # As a CI step or `make test &` runs it: in the background, SIGINT ignored, own session.
    (cd "$clone" && trap '' INT && exec setsid make test < /dev/null > "$WORK/run-$run.log" 2>&1) &
    wait $!
    rc=$?
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    stop_burners
    minutes=$(( ($(date +%s) - start + 30) / 60 ))
    summary=$(grep -E '(passed|failed|error)' "$WORK/run-$run.log" | tail -n 1)
    echo "run $run: exit $rc, ${minutes} min, load average $load: $summary"
    [ "$rc" -eq 0 ] || failed=1
    rm -rf "$clone"  # the log stays
done
exit $failed
