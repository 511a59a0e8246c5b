"""`jetbench maxperf`, `apply`, `restore`, `profiles`."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import typer

from .common import beyond_power_mode_option, console, open_root, print_json
from .help_screen import HelpCommand, HelpGroup

if TYPE_CHECKING:
    from ..hw.board import Board
    from ..hw.fs import Root
    from ..ownership.journal import RestoreResult
    from ..ownership.owner import Brokered
    from ..profiles.apply import ApplyResult

profiles_app = typer.Typer(cls=HelpGroup,
                           help="List and show the profiles `apply` accepts.",
                           no_args_is_help=False, invoke_without_command=True)

WAIT_FOREVER = "forever"
WAIT_HELP = ("When another jetbench command holds the board: wait for it (for ever, or at most "
             "SECONDS) instead of failing at once.")


def wait_option() -> Any:  # typer.Option's own type: an OptionInfo used as a default
    return typer.Option(None, "--wait", metavar="[SECONDS]", help=WAIT_HELP)


def wait_seconds(value: Optional[str]) -> Optional[float]:
    """--wait's value -> seconds to wait for the board lock (None: for ever; 0: not at all)."""
    from ..units import parse_duration_s

    if value is None:
        return 0.0
    if value == WAIT_FOREVER:
        return None
    return parse_duration_s(value)


def optional_wait_value(args: List[str]) -> List[str]:
    """`--wait` may stand alone (wait for ever) or take SECONDS: typer options cannot have an
    optional value, so a bare `--wait` gets the value `forever` here, before parsing."""
    from ..errors import UsageError
    from ..units import parse_duration_s

    out = list(args)
    i = 0
    while i < len(out):
        if out[i] == "--":
            break
        if out[i] == "--wait":
            following = out[i + 1] if i + 1 < len(out) else None
            try:
                ok = following is not None and (following == WAIT_FOREVER
                                                or parse_duration_s(following) >= 0)
            except UsageError:
                ok = False
            if not ok:
                out.insert(i + 1, WAIT_FOREVER)
            i += 1
        i += 1
    return out


TUNING_STOPPED = ("Its live tuning (--tune) is stopped and pins nothing until a reload "
                  "(sudo systemctl reload jetbench) or a `pin` request on its socket.")


def _render_brokered(done: Brokered, title: str, as_json: bool) -> None:
    reply = done.result
    if as_json:
        print_json({"daemon": {"pid": done.daemon.pid, "socket": str(done.socket)}, **reply})
        return
    out = console()
    out.print(f"{title}: done by the jetbench daemon (pid {done.daemon.pid}), which holds the "
              f"board: {reply.get('summary', '')}", highlight=False, markup=False,
              soft_wrap=not out.is_terminal)
    out.print("It re-pins this profile until told otherwise; `jetbench restore` asks it to put "
              "the board back.", highlight=False, soft_wrap=not out.is_terminal)
    if reply.get("tuning_stopped"):
        out.print(TUNING_STOPPED, highlight=False, soft_wrap=not out.is_terminal)


def _apply(ctx: typer.Context, profile, dry_run: bool, title: str, as_json: bool,
           wait: Optional[str] = None, daemon_request: Optional[Dict[str, object]] = None
           ) -> None:
    from ..errors import UsageError
    from ..open_board import open_board
    from ..ownership.owner import own_board
    from ..profiles.apply import apply_profile

    root = open_root(ctx)
    if dry_run:  # reads only: never takes the board
        with open_board(root, simulate_power=False) as board:
            result = apply_profile(root, board, profile, dry_run=True)
        _render_applied(root, board, result, title, as_json, dry_run)
        return
    refused = None
    if profile.beyond_power_mode:
        refused = UsageError("the jetbench daemon holds the board and pins within the power "
                             "mode as it was started",
                             hint="start the daemon with --beyond-power-mode (in its unit "
                                  "file), or stop it first (sudo systemctl stop jetbench)")
    elif daemon_request is None:
        refused = UsageError(f"the jetbench daemon holds the board and applies named "
                             f"profiles only, not the file {profile.source}",
                             hint="copy it to /etc/jetbench/profiles/NAME.toml and run "
                                  "`jetbench apply NAME`, or stop the daemon first "
                                  "(sudo systemctl stop jetbench)")

    def here() -> Tuple[Board, ApplyResult]:
        with open_board(root, simulate_power=False) as board:
            return board, apply_profile(root, board, profile, dry_run=False)

    with own_board(root, title, wait_seconds(wait)) as owner:
        done = owner.carry_out(here, daemon_request, refused)
    if done.daemon is not None:
        _render_brokered(done, title, as_json)
    else:
        board, result = done.result
        _render_applied(root, board, result, title, as_json, dry_run)


def _render_applied(root: Root, board: Board, result: ApplyResult, title: str, as_json: bool,
                    dry_run: bool) -> None:
    from ..hw.clocks.domains import read_clocks
    from ..profiles.apply import pin_notes
    from .render import plan_lines, requested_table

    applied = read_clocks(root, board)  # after the simulated kernel's last pass, if simulated
    notes = list(result.targets.notes) + ([] if dry_run else
                                          pin_notes(board, result.targets, applied))
    if as_json:
        print_json({
            "simulated": board.simulated,
            "profile": result.profile,
            "dry_run": dry_run,
            "writes": [
                {"step": s.label, "path": w.path, "old": w.old, "new": w.value}
                for s in result.steps for w in s.writes
            ],
            "requested": [r.__dict__ for r in result.targets.requested],
            "notes": notes,
        })
        return
    out = console()
    for line in plan_lines(result.steps, title, board.simulated, dry_run):
        out.print(line, soft_wrap=not out.is_terminal)
    if result.targets.requested:
        out.print(requested_table(result.targets.requested, applied, board.simulated,
                                  dry_run=dry_run))
    for note in notes:
        out.print(f"note: {note}", markup=False, highlight=False,
                  soft_wrap=not out.is_terminal)
    if not dry_run and result.steps:
        out.print("Original values are journalled: [bold]jetbench restore[/] puts them back.")


def maxperf(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print each planned write "
                                 "(path, old value, new value); write nothing."),
    fan: bool = typer.Option(False, "--fan", help="Also run the fan at full speed (a running "
                             "nvfancontrol service is stopped first; restore starts it)."),
    as_json: bool = typer.Option(False, "--json", help="Print the writes as JSON."),
    wait: Optional[str] = wait_option(),
    beyond_power_mode: bool = beyond_power_mode_option(),
) -> None:
    """Everything at max, as NVIDIA's jetson_clocks: CPU cores online at max, cpuidle off, GPU
    min=max=max, railgate off, EMC locked at its (capped) max; discrete NVIDIA GPUs locked at
    their max supported clocks with the highest power limit (NVML). On a board with power modes
    (nvpmodel), max is the active mode's max and the cores it took offline stay offline, unless
    --beyond-power-mode. The state is journalled first: `jetbench restore` undoes. While the
    jetbench daemon holds the board, the daemon does it."""
    from ..profiles.profile import load_profile

    profile = load_profile("maxperf", open_root(ctx).base)
    if fan:
        profile = profile.with_fan(255)
    profile = dataclasses.replace(profile, beyond_power_mode=beyond_power_mode)
    _apply(ctx, profile, dry_run, "maxperf", as_json, wait,
           {"cmd": "maxperf", "fan": fan})


def apply(
    ctx: typer.Context,
    profile: str = typer.Argument(...,
                                  metavar="PROFILE",
                                  help="A profile name (see `jetbench profiles`) or a TOML file."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the planned writes only."),
    as_json: bool = typer.Option(False, "--json", help="Print the writes as JSON."),
    wait: Optional[str] = wait_option(),
    beyond_power_mode: bool = beyond_power_mode_option(),
) -> None:
    """Pin a named or file profile. It is validated whole before anything is written ("max"
    and every clock within the active power mode's caps, unless --beyond-power-mode). While
    the jetbench daemon holds the board, the daemon pins it (named profiles only)."""
    from ..ownership.wire import PROFILE_NAME
    from ..profiles.profile import load_profile

    loaded = dataclasses.replace(load_profile(profile, open_root(ctx).base),
                                 beyond_power_mode=beyond_power_mode)
    by_name = PROFILE_NAME.match(profile) and not profile.endswith(".toml")
    _apply(ctx, loaded, dry_run, f"apply {profile}", as_json, wait,
           {"cmd": "apply", "profile": profile} if by_name else None)


def restore(
    ctx: typer.Context,
    discard: bool = typer.Option(False, "--discard", help="Restore nothing: move the state "
                                 "journal aside (journal.json.discarded-<time>) after you "
                                 "have checked the board's clocks by hand. For a journal "
                                 "jetbench refuses."),
    wait: Optional[str] = wait_option(),
) -> None:
    """Put back every value maxperf/apply/measure changed (from the state journal). While the
    jetbench daemon holds the board, the daemon restores it and stops holding its profile
    (until `jetbench apply NAME`, or a restart of the service) and stops its live tuning
    (until a reload)."""
    from ..errors import UsageError
    from ..open_board import open_board
    from ..ownership.journal import restore as restore_journal
    from ..ownership.owner import own_board

    root = open_root(ctx)
    refused = UsageError("the jetbench daemon holds the board: stop it before discarding its "
                         "journal (sudo systemctl stop jetbench)") if discard else None

    def here() -> Optional[RestoreResult]:
        if discard:
            _discard(root)
            return None
        with open_board(root, simulate_power=False):
            return restore_journal(root)

    with own_board(root, "restore", wait_seconds(wait)) as owner:
        done = owner.carry_out(here, {"cmd": "restore"}, refused)
    if done.daemon is not None:
        reply = done.result
        console().print(f"Restored by the jetbench daemon (pid {done.daemon.pid}): "
                        f"{reply.get('restored', 0)} value(s) written "
                        f"({reply.get('unchanged', 0)} already at their original value). "
                        "It keeps running and pins nothing until `jetbench apply NAME`.",
                        highlight=False, soft_wrap=not console().is_terminal)
        if reply.get("tuning_stopped"):
            console().print(TUNING_STOPPED, highlight=False, soft_wrap=not console().is_terminal)
        _print_moved(_strings(reply.get("moved")), _strings(reply.get("changed")))
        return
    result = done.result
    if result is None:  # --discard said what it did
        return
    out = console()
    if not result.had_journal:
        out.print("Nothing to restore: jetbench has not changed this board's clocks.")
        return
    out.print(f"Restored {len(result.written)} value(s) "
              f"({result.unchanged} already at their original value); journal removed.")
    _print_moved([m.note() for m in result.moved], [c.note() for c in result.changed])


def _strings(value: object) -> List[str]:
    """A list in the daemon's reply, as strings ([] when absent)."""
    return [str(item) for item in value] if isinstance(value, list) else []


def _print_moved(moved: List[str], changed: List[str]) -> None:
    """Knobs another tool (jetson_clocks, nvpmodel, jtop) moved while jetbench held the board:
    restore put the originals back over that tool's values (moved), or left knobs jetbench
    never wrote as that tool set them (changed); either way, say so."""
    out = console()
    for note in moved:
        out.print(f"Note: moved by another tool since: {note}", highlight=False,
                  markup=False, soft_wrap=not out.is_terminal)
    for note in changed:
        out.print(f"Note: changed since jetbench began, by another tool (or the kernel): {note}",
                  highlight=False, markup=False, soft_wrap=not out.is_terminal)
    if changed:
        out.print("Those were never jetbench's to restore: put them back with the tool that "
                  "changed them (`jetson_clocks --restore`, nvpmodel).", highlight=False,
                  soft_wrap=not out.is_terminal)


def _discard(root: Root) -> None:
    from ..ownership.journal import discard

    moved = discard(root)
    if moved is None:
        console().print("Nothing to discard: there is no state journal.")
        return
    console().print(f"The state journal was moved aside, nothing was restored: {moved}\n"
                    "The board keeps the clocks it has now; `jetbench info` shows them.",
                    soft_wrap=True)


@profiles_app.callback()
def _profiles_default(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        profiles_list(ctx)


@profiles_app.command("list", cls=HelpCommand)
def profiles_list(ctx: typer.Context) -> None:
    """Every profile `apply` accepts, with its description."""
    from rich.table import Table
    from rich.text import Text

    from ..profiles.profile import list_profiles, parse_profile

    rows = []
    for name, path in list_profiles(open_root(ctx).base):
        try:
            p = parse_profile(path.read_text(encoding="utf-8"), name, str(path))
            target = ", ".join(p.match_family or p.match_soc) or "any board"
            rows.append((name, target, p.description, ""))
        except Exception as err:  # a broken file must not hide the others
            rows.append((name, "?", f"invalid: {err}", "red"))
    out = console()
    name_w = max((len(r[0]) for r in rows), default=4)
    for_w = min(max((len(r[1]) for r in rows), default=3), 16)
    # One line each where the screen allows (64 lines at 80 columns before): the name whole,
    # the boards folded, the description cut to the rest (`show` prints it whole).
    text_w = max(out.width - name_w - for_w - 4, 20)
    table = Table(title="Profiles", title_justify="left", box=None, pad_edge=False)
    table.add_column("name", no_wrap=True, width=name_w)
    table.add_column("for", overflow="fold", width=for_w)
    table.add_column("description", no_wrap=True, width=text_w)
    for name, target, text, style in rows:
        cut = text if len(text) <= text_w else text[:text_w - 1] + "…"
        table.add_row(Text(name), Text(target), Text(cut, style=style))
    out.print(table)
    console().print("`jetbench profiles show NAME`: one profile whole (description, clocks).")



@profiles_app.command("show", cls=HelpCommand)
def profiles_show(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="Profile name or TOML file."),
    file: Optional[bool] = typer.Option(False, "--toml", help="Print the file itself."),
) -> None:
    """One profile's settings."""
    from pathlib import Path

    from ..profiles.profile import describe, load_profile
    from .render import kv

    profile = load_profile(name, open_root(ctx).base)
    if file:
        typer.echo(Path(profile.source).read_text(encoding="utf-8"), nl=False)
        return
    kv(console(), describe(profile), title=f"Profile {profile.name}")
