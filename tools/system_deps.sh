#!/bin/sh
# The system programs some tests need, beyond what pip puts in .venv (run by `make setup`/`make test`):
#   fuse3 (fusermount3 + libfuse3): the `kernel` tests' FUSE-served simulated boards;
#   systemd (systemd-analyze): the test that verifies systemd/jetbench.service;
#   postgresql (initdb, pg_ctl): the tune test on a shared PostgreSQL study.
# As root on a machine with apt-get, a missing one is installed (saying so); otherwise the exact
# command is printed once and the tests that need it skip, saying why (see tests/conftest.py).
# Never fatal: the rest of the suite runs either way. JETBENCH_NO_SYSTEM_DEPS=1 skips this step.
set -u
[ "${JETBENCH_NO_SYSTEM_DEPS:-}" = 1 ] && exit 0

have_libfuse3() {
    ldconfig -p 2>/dev/null | grep -q 'libfuse3\.so'
}

have_initdb() {  # on PATH, or in Debian's versioned folder (not on PATH there)
    command -v initdb >/dev/null 2>&1 && return 0
    for f in /usr/lib/postgresql/*/bin/initdb; do
        [ -x "$f" ] && return 0
    done
    return 1
}

missing=""
purpose=""
if ! command -v fusermount3 >/dev/null 2>&1 || ! have_libfuse3; then
    missing="$missing fuse3 libfuse3-3"
    purpose="$purpose FUSE-served boards (the kernel tests);"
fi
if ! command -v systemd-analyze >/dev/null 2>&1; then
    missing="$missing systemd"
    purpose="$purpose systemd-analyze (the service-file test);"
fi
if ! have_initdb; then
    missing="$missing postgresql"
    purpose="$purpose a PostgreSQL server (the shared tune study test);"
fi
[ -n "$missing" ] || exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing$missing with apt-get, for$purpose"
    if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends $missing) >/dev/null 2>&1; then
        echo "setup: installed$missing"
        exit 0
    fi
    echo "setup: could not install$missing (apt-get failed); the tests that need them will skip" >&2
    exit 0
fi
echo "setup: not installed:$missing (for$purpose); the tests that need them will skip."
echo "  to run them: sudo apt-get install$missing"
exit 0
