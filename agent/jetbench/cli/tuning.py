"""`jetbench maxperf`, `apply`, `restore`, `profiles`."""

from __future__ import annotations

from typing import Optional

import typer

from .common import console, open_root, print_json

profiles_app = typer.Typer(help="List and show the profiles `apply` accepts.",
                           no_args_is_help=False, invoke_without_command=True)


def _apply(ctx: typer.Context, profile, dry_run: bool, title: str, as_json: bool) -> None:
    from ..session import open_board
    from ..tuning.apply import apply_profile, pin_notes, read_clocks
    from .render import plan_lines, requested_table

    root = open_root(ctx)
    with open_board(root, simulate_power=False) as board:
        result = apply_profile(root, board, profile, dry_run=dry_run)
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
        out.print(line, soft_wrap=True)
    if result.targets.requested:
        out.print(requested_table(result.targets.requested, applied, board.simulated))
    for note in notes:
        out.print(f"note: {note}", soft_wrap=True)
    if not dry_run and result.steps:
        out.print("Original values are journalled: [bold]jetbench restore[/] puts them back.")


def maxperf(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print each planned write "
                                 "(path, old value, new value); write nothing."),
    fan: bool = typer.Option(False, "--fan", help="Also run the fan at full speed."),
    as_json: bool = typer.Option(False, "--json", help="Print the writes as JSON."),
) -> None:
    """Everything at max: CPU cores online at max, cpuidle off, GPU min=max=max, railgate off,
    EMC locked at its (capped) max. The state is journalled first: `jetbench restore` undoes."""
    from ..tuning.profile import load_profile

    profile = load_profile("maxperf", open_root(ctx).base)
    if fan:
        profile = profile.with_fan(255)
    _apply(ctx, profile, dry_run, "maxperf", as_json)


def apply(
    ctx: typer.Context,
    profile: str = typer.Argument(..., help="A profile name (see `jetbench profiles`) or a "
                                  "TOML file."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the planned writes only."),
    as_json: bool = typer.Option(False, "--json", help="Print the writes as JSON."),
) -> None:
    """Pin a named or file profile. It is validated whole before anything is written."""
    from ..tuning.profile import load_profile

    _apply(ctx, load_profile(profile, open_root(ctx).base), dry_run, f"apply {profile}", as_json)


def restore(ctx: typer.Context) -> None:
    """Put back every value maxperf/apply/measure changed (from the state journal)."""
    from ..session import open_board
    from ..tuning.journal import restore as restore_journal

    root = open_root(ctx)
    with open_board(root, simulate_power=False):
        result = restore_journal(root)
    out = console()
    if not result.had_journal:
        out.print("Nothing to restore: jetbench has not changed this board's clocks.")
        return
    out.print(f"Restored {len(result.written)} value(s) "
              f"({result.unchanged} already at their original value); journal removed.")


@profiles_app.callback()
def _profiles_default(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        profiles_list(ctx)


@profiles_app.command("list")
def profiles_list(ctx: typer.Context) -> None:
    """Every profile `apply` accepts, with its description."""
    from rich.table import Table

    from ..tuning.profile import list_profiles, parse_profile

    table = Table(title="Profiles", title_justify="left")
    for col in ("name", "for", "description"):
        table.add_column(col, overflow="fold")
    for name, path in list_profiles(open_root(ctx).base):
        try:
            p = parse_profile(path.read_text(encoding="utf-8"), name, str(path))
            target = ", ".join(p.match_family or p.match_soc) or "any board"
            table.add_row(name, target, p.description)
        except Exception as err:  # a broken file must not hide the others
            table.add_row(name, "?", f"[red]invalid: {err}[/]")
    console().print(table)


@profiles_app.command("show")
def profiles_show(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Profile name or TOML file."),
    file: Optional[bool] = typer.Option(False, "--toml", help="Print the file itself."),
) -> None:
    """One profile's settings."""
    from pathlib import Path

    from ..tuning.profile import describe, load_profile
    from .render import kv

    profile = load_profile(name, open_root(ctx).base)
    if file:
        typer.echo(Path(profile.source).read_text(encoding="utf-8"), nl=False)
        return
    kv(console(), describe(profile), title=f"Profile {profile.name}")
