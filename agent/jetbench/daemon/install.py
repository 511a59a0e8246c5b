"""`jetbench install-service` / `uninstall-service`: put the unit and the udev rules in place,
create the jetbench group, enable the service; and take all of it away again.

Files are written under `dest` (the host's `/`, or a staging root for image builds and tests);
the commands (groupadd, systemctl, udevadm) run only when `dest` is `/` and not a dry run,
otherwise they are listed as skipped. The shipped files live in systemd/ and udev/ at the top
of the source tree (linked into the package, as profiles/ is).
"""

from __future__ import annotations

import grp
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from ..errors import HardwareError, PermissionDenied, UsageError
from ..ownership.lock import LOCK_FILE_MODE, LOCK_PATH
from ..ownership.statedir import STATE_DIR as _STATE_DIR
from ..ownership.statedir import hint_for

PACKAGE_DIR = Path(__file__).resolve().parent.parent
UNIT_NAME = "jetbench.service"
SHIPPED_UNIT = PACKAGE_DIR / "systemd" / UNIT_NAME
SHIPPED_RULES = PACKAGE_DIR / "udev"
SHIPPED_EXECUTABLE = "/usr/local/bin/jetbench"  # what the shipped unit says; replaced on install
GROUP = "jetbench"

UNIT_DEST = "etc/systemd/system/" + UNIT_NAME
DROPIN_DEST = "etc/systemd/system/jetbench.service.d/10-jetbench-home.conf"
ACCESS_DEST = "etc/systemd/system/jetbench.service.d/20-jetbench-access.conf"
# What the unit's DevicePolicy=closed lets through for NVML (a GPU host, Thor: nvidiactl,
# nvidiaN, nvidia-uvm... all of the driver's character devices, /proc/devices' names) and for
# serial meters (USB-serial adapters, the links 71-jetbench-meters.rules makes point at them).
NVML_DEVICES = ("char-nvidia* rw",)
METER_DEVICES = ("char-ttyUSB rw", "char-ttyACM rw")
RULES_DEST = "etc/udev/rules.d"
DEFAULTS_DEST = "etc/default/jetbench"
TMPFILES_DEST = "etc/tmpfiles.d/jetbench.conf"
# The state directory: root:jetbench, setgid so the journal and lock stay in the group, group
# writable so members of the group run apply/measure without sudo (ownership/statedir.py checks it).
STATE_DIR = _STATE_DIR.lstrip("/")
STATE_DIR_MODE = 0o2775
# ProtectHome=yes hides these: a jetbench installed in a home directory needs them readable.
HOME_PREFIXES = ("/home/", "/root/", "/run/user/")


@dataclass(frozen=True)
class Action:
    kind: str  # "write" | "remove" | "run" | "skip"
    what: str


def render_unit(text: str, executable: str) -> str:
    """The shipped unit with the real executable in ExecStart=/ExecStopPost=."""
    return text.replace(SHIPPED_EXECUTABLE, executable)


def defaults_text(profile: Optional[str], metrics: Optional[str], interval: Optional[str]) -> str:
    args: List[str] = []
    for option, value in (("--profile", profile), ("--metrics", metrics),
                          ("--interval", interval)):
        if value:
            args += [option, value]
    return ("# Options of `jetbench daemon` for jetbench.service (see `jetbench daemon --help`);\n"
            "# after editing: systemctl restart jetbench\n"
            f"JETBENCH_ARGS={shlex.quote(' '.join(shlex.quote(a) for a in args))}\n")


def tmpfiles_text() -> str:
    """systemd-tmpfiles creates the state directory at boot and puts its owner and mode back."""
    return ("# jetbench's state directory (journal, board lock): group members may pin clocks.\n"
            f"d /{STATE_DIR} {STATE_DIR_MODE:04o} root {GROUP} -\n"
            f"f {LOCK_PATH} {LOCK_FILE_MODE:04o} root {GROUP} -\n")


def access_text(logs: Sequence[str], nvml: bool, meters: bool) -> Optional[str]:
    """The drop-in that opens the unit's sandbox to what the daemon is told to use: each
    --log's directory (read-only; a whole directory, so a rotated log is seen; a home
    directory, which ProtectHome= hides, through a tmpfs with only that directory in it), the
    NVIDIA driver's devices for NVML, the serial meters' devices. None: nothing to open."""
    lines: List[str] = []
    home = False
    for log in logs:
        if not os.path.isabs(log):
            raise UsageError(f"--log {log}: give the log's absolute path")
        folder = os.path.dirname(os.path.normpath(log)) or "/"
        if (folder + "/").startswith(HOME_PREFIXES):  # hidden by ProtectHome=: bound in
            home = True
            lines.append(f"BindReadOnlyPaths=-{folder}")
        else:  # readable already (ProtectSystem=strict: all of / read-only): said so
            lines.append(f"ReadOnlyPaths=-{folder}")
    if home:
        lines.insert(0, "ProtectHome=tmpfs")
    lines += [f"DeviceAllow={d}" for d in (NVML_DEVICES if nvml else ())]
    lines += [f"DeviceAllow={d}" for d in (METER_DEVICES if meters else ())]
    if not lines:
        return None
    return ("# Written by `jetbench install-service`: what the daemon reads beyond the unit's "
            "sandbox.\n[Service]\n" + "\n".join(lines) + "\n")


def _state_dir(dest: Path, actions: List[Action], live: bool, dry_run: bool) -> None:
    """On the host: create the state directory root:jetbench 2775 now (tmpfiles.d does it at
    each boot); in a staging root the image's boot does it (the group's id is the image's)."""
    path = dest / STATE_DIR
    _run(["systemd-tmpfiles", "--create", str(dest / TMPFILES_DEST)], actions, live,
         check=False)
    if not live:
        actions.append(Action("skip", f"install -d -o root -g {GROUP} "
                                      f"-m {STATE_DIR_MODE:04o} {path}"))
        return
    actions.append(Action("write", f"{path} (root:{GROUP} {STATE_DIR_MODE:04o})"))
    try:
        path.mkdir(mode=0o755, parents=True, exist_ok=True)
        if path.is_symlink() or not path.is_dir():
            raise HardwareError("not a plain directory", path=str(path),
                                hint=f"remove it (sudo rm {path}) and install again")
        os.chown(path, 0, grp.getgrnam(GROUP).gr_gid, follow_symlinks=False)
        os.chmod(path, STATE_DIR_MODE)
    except KeyError as err:
        raise HardwareError(f"the {GROUP} group does not exist", hint="sudo groupadd "
                            f"--system {GROUP}, then install again") from err
    except OSError as err:
        raise HardwareError(f"cannot set up the state directory ({err.strerror})",
                            path=str(path), hint=hint_for(err, path)) from err


def _shipped_rules() -> List[Path]:
    rules = sorted(SHIPPED_RULES.glob("*.rules"))
    if not SHIPPED_UNIT.is_file() or not rules:
        raise UsageError(f"the shipped unit and udev rules are not found beside the package "
                         f"({SHIPPED_UNIT.parent}, {SHIPPED_RULES})",
                         hint="install from a source checkout: pip install -e .")
    return rules


def _write(dest: Path, rel: str, text: str, actions: List[Action], dry_run: bool,
           mode: int = 0o644) -> None:
    path = dest / rel
    actions.append(Action("write", str(path)))
    if dry_run:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except PermissionError as err:
        raise PermissionDenied("cannot write", path=str(path), hint="run with sudo") from err
    except OSError as err:
        raise HardwareError(f"cannot write ({err.strerror})", path=str(path),
                            hint=hint_for(err, path.parent)) from err


def _run(argv: Sequence[str], actions: List[Action], live: bool, check: bool = True) -> None:
    line = " ".join(shlex.quote(a) for a in argv)
    if not live:
        actions.append(Action("skip", line))
        return
    actions.append(Action("run", line))
    if shutil.which(argv[0]) is None:
        if check:
            raise HardwareError(f"{argv[0]} not found", hint="is this a systemd system?")
        return
    done = subprocess.run(list(argv), capture_output=True, text=True)
    if done.returncode != 0 and check:
        raise HardwareError(f"`{line}` failed: {(done.stderr or done.stdout).strip()}")


def install(dest: Path, executable: str, *, profile: Optional[str] = None,
            metrics: Optional[str] = None, interval: Optional[str] = None, start: bool = True,
            dry_run: bool = False, logs: Sequence[str] = (), nvml: Optional[bool] = None,
            meters: bool = False) -> List[Action]:
    """`nvml` None: where the host has the NVIDIA driver's /dev/nvidiactl (live installs)."""
    dest = Path(dest)
    live = str(dest.resolve()) == "/" and not dry_run
    executable = os.path.abspath(executable)
    rules = _shipped_rules()
    actions: List[Action] = []
    if live:
        try:
            grp.getgrnam(GROUP)
        except KeyError:
            _run(["groupadd", "--system", GROUP], actions, live)
    else:
        _run(["groupadd", "--system", GROUP], actions, live)
    unit = render_unit(SHIPPED_UNIT.read_text(encoding="utf-8"), executable)
    _write(dest, UNIT_DEST, unit, actions, dry_run)
    if executable.startswith(HOME_PREFIXES):
        _write(dest, DROPIN_DEST, "# jetbench is installed under a home directory: let the "
               "service read it.\n[Service]\nProtectHome=read-only\n", actions, dry_run)
    if nvml is None:
        nvml = live and os.path.exists("/dev/nvidiactl")
    access = access_text(logs, nvml, meters)
    if access is not None:
        _write(dest, ACCESS_DEST, access, actions, dry_run)
    elif (dest / ACCESS_DEST).exists() and not dry_run:
        (dest / ACCESS_DEST).unlink()  # an earlier install's: nothing to open now
    for rule in rules:
        _write(dest, f"{RULES_DEST}/{rule.name}", rule.read_text(encoding="utf-8"), actions,
               dry_run)
    if profile or metrics or interval or not (dest / DEFAULTS_DEST).exists():
        _write(dest, DEFAULTS_DEST, defaults_text(profile, metrics, interval), actions, dry_run)
    _write(dest, TMPFILES_DEST, tmpfiles_text(), actions, dry_run)
    _state_dir(dest, actions, live, dry_run)
    _run(["systemctl", "daemon-reload"], actions, live)
    _run(["systemctl", "enable"] + (["--now"] if start else []) + [UNIT_NAME], actions, live)
    _run(["udevadm", "control", "--reload"], actions, live, check=False)
    _run(["udevadm", "trigger"], actions, live, check=False)
    return actions


def uninstall(dest: Path, *, dry_run: bool = False, remove_group: bool = False) -> List[Action]:
    """Stop and disable the service (its ExecStopPost restores the board), remove the files.
    The group stays unless asked (users may be in it); the state directory is left alone."""
    dest = Path(dest)
    live = str(dest.resolve()) == "/" and not dry_run
    actions: List[Action] = []
    _run(["systemctl", "disable", "--now", UNIT_NAME], actions, live, check=False)
    paths = [UNIT_DEST, DROPIN_DEST, ACCESS_DEST, DEFAULTS_DEST, TMPFILES_DEST]
    paths += [f"{RULES_DEST}/{rule.name}" for rule in sorted(SHIPPED_RULES.glob("*.rules"))]
    for rel in paths:
        path = dest / rel
        if path.exists():
            actions.append(Action("remove", str(path)))
            if not dry_run:
                try:
                    path.unlink()
                except OSError as err:
                    raise HardwareError(f"cannot remove ({err.strerror})", path=str(path),
                                        hint="run with sudo") from err
    dropin_dir = (dest / DROPIN_DEST).parent
    if not dry_run and dropin_dir.is_dir() and not any(dropin_dir.iterdir()):
        dropin_dir.rmdir()
    _run(["systemctl", "daemon-reload"], actions, live, check=False)
    _run(["udevadm", "control", "--reload"], actions, live, check=False)
    if remove_group:
        _run(["groupdel", GROUP], actions, live, check=False)
    return actions
