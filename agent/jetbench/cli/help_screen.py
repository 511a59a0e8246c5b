"""Every command's --help, drawn here in typer's panel layout without typer's rich help module.

typer's own renderer (typer.rich_utils) imports rich's Markdown (markdown-it) and Traceback
(pygments) at its top, for markdown help and pretty tracebacks jetbench never uses: more than
half of `jetbench --help`'s time (benchmarks/bench_startup.py). This one reads the same click
objects (panels from each parameter's and command's `rich_help_panel`, typer's default rules)
and writes boxes with the standard library's textwrap; colour only on a terminal, never with
NO_COLOR set or TERM=dumb."""

from __future__ import annotations

import enum
import inspect
import os
import shutil
import sys
import textwrap
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:  # typer's vendored click (typer 0.17+); older typer uses click itself
    from typer import _click as click

_BOLD_CYAN, _BOLD_GREEN, _BOLD_YELLOW, _DIM, _YELLOW, _RESET = (
    "\x1b[1;36m", "\x1b[1;32m", "\x1b[1;33m", "\x1b[2m", "\x1b[33m", "\x1b[0m")
_MIN_HELP_COLUMN = 24  # narrower than this, a row's help goes on the lines below its names
Row = Tuple[str, str, str, str]  # names, short or secondary names, placeholder, help
_NBSP = "\xa0"  # textwrap never breaks at it: "[default: 20]" stays on one line


def _unbroken(text: str) -> str:
    """`text` with its spaces made ones textwrap never breaks at."""
    return text.replace(" ", _NBSP)


class HelpCommand(TyperCommand):
    """A typer command whose --help is drawn by `help_text`."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write(help_text(self, ctx))


class HelpGroup(TyperGroup):
    """A typer group whose --help (and bare invocation) is drawn by `help_text`."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write(help_text(self, ctx))


def help_text(command: click.Command, ctx: click.Context) -> str:
    """The whole --help screen of `command` at the terminal's width (80 when piped)."""
    width = max(shutil.get_terminal_size((80, 24)).columns, 40)
    paint = _painter()
    out = ["", " " + paint(_YELLOW, "Usage: ") + _usage(command, ctx), ""]
    for paragraph in _paragraphs(command.help or ""):
        out += _wrap(paragraph, width - 2, " ", " ")
        out.append("")
    panels: Dict[str, List[Row]] = {}
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        default = "Arguments" if param.param_type_name == "argument" else "Options"
        panels.setdefault(getattr(param, "rich_help_panel", None) or default, []).append(
            _param_row(param, ctx))
    order = ["Arguments", "Options"] + [p for p in panels if p not in ("Arguments", "Options")]
    for name in order:
        if name in panels:
            out += _panel(name, panels[name], width, paint)
    if isinstance(command, TyperGroup):
        commands: Dict[str, List[Row]] = {}
        for sub_name in command.list_commands(ctx):
            sub = command.get_command(ctx, sub_name)
            if sub is None or sub.hidden:
                continue
            panel = getattr(sub, "rich_help_panel", None) or "Commands"
            commands.setdefault(panel, []).append(
                (sub_name, "", "", sub.get_short_help_str(limit=300)))
        for name, rows in commands.items():
            out += _panel(name, rows, width, paint)
    if command.epilog:
        out.append("")
        for paragraph in command.epilog.split("\n\n"):
            example = paragraph.startswith("  ")  # an example command: continued, indented
            out += _wrap(paragraph.strip(), width - 2, " ", "     " if example else " ")
            out.append("")
    return "\n".join(out) + "\n"


def _usage(command: click.Command, ctx: click.Context) -> str:
    return " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])


def _paragraphs(text: str) -> List[str]:
    """Paragraphs as single lines ("\\b" keeps a paragraph's own line breaks, as in click); a
    docstring's indentation and line breaks go (a command's help is its function's docstring)."""
    found = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        if paragraph.startswith("\b"):
            found.append(paragraph.strip("\b\n"))
        elif paragraph.strip():
            found.append(" ".join(paragraph.split()))
    return found


def _param_row(param: click.Parameter, ctx: click.Context) -> Row:
    long_names = [o for o in param.opts if o.startswith("--")]
    short = [o for o in param.opts if not o.startswith("--")] + list(param.secondary_opts)
    if param.param_type_name == "argument":
        name = param.metavar or (param.name or "").upper()
        return ("* " if param.required else "  ") + name, "", "", _param_help(param, ctx)
    flag = bool(getattr(param, "is_flag", False))
    # every jetbench option that takes a value names it (metavar); else its own name
    placeholder = param.metavar or ("" if flag else (param.name or "value").upper())
    names = ("* " if param.required else "") + ",".join(long_names)
    return names, ",".join(short), placeholder, _param_help(param, ctx)


def _param_help(param: click.Parameter, ctx: click.Context) -> str:
    text = " ".join(_paragraphs(getattr(param, "help", None) or ""))
    envvar = param.envvar
    if envvar and getattr(param, "show_envvar", False):
        names = envvar if isinstance(envvar, str) else ", ".join(envvar)
        text += " " + _unbroken(f"[env var: {names}]")
    default = _default_text(param, ctx)
    if default:
        text += " " + _unbroken(f"[default: {default}]")
    if param.required:
        text += " [required]"
    return text.strip()


def _default_text(param: click.Parameter, ctx: click.Context) -> Optional[str]:
    """What typer shows as `[default: ...]`: show_default's own text, else the default value
    (a flag pair: the name of the side that is on); nothing for None or a lone flag."""
    show = getattr(param, "show_default", None)
    if isinstance(show, str):
        return show
    if not (show or (show is None and ctx.show_default)):
        return None
    value = param.default
    if value is None or callable(value):
        return None
    if getattr(param, "is_flag", False):
        if not param.secondary_opts:
            return None
        names = param.opts if value else param.secondary_opts
        return names[0].lstrip("-")
    if isinstance(value, (list, tuple)):
        return ", ".join(_one(v) for v in value) or None
    return _one(value)


def _one(value: object) -> str:
    return str(value.value) if isinstance(value, enum.Enum) else str(value)


def _panel(title: str, rows: Sequence[Row], width: int, paint: _Paint) -> List[str]:
    """A box titled `title`: the names, short names and placeholders in aligned columns, the
    help wrapped in what is left (on the lines below when too little is)."""
    inner = width - 4  # "│ " and " │"
    widths = [max(len(r[k]) for r in rows) for k in range(3)]
    fixed = sum(w + 1 for w in widths if w) + 1  # two spaces before the help
    help_width = inner - fixed
    lines = [paint(_DIM, "╭─ ") + title + paint(_DIM, " " + "─" * max(width - len(title) - 5, 0)
                                                   + "╮")]
    for row in rows:
        cells = [(row[k].ljust(widths[k]), style) for k, style in
                 enumerate((_BOLD_CYAN, _BOLD_GREEN, _BOLD_YELLOW)) if widths[k]]
        lead = " ".join(paint(style, text) for text, style in cells)
        lead_len = sum(len(text) + 1 for text, _ in cells)
        if help_width >= _MIN_HELP_COLUMN:
            wrapped = _wrap(row[3], help_width, "", "") or [""]
            body = [(lead + "  ", lead_len + 1, wrapped[0])]
            body += [(" " * fixed, fixed, more) for more in wrapped[1:]]
        else:  # a narrow terminal: the help under the names, indented
            body = [(lead, lead_len - 1, "")]
            body += [("    ", 4, more) for more in _wrap(row[3], inner - 4, "", "")]
        for start, start_len, text in body:
            pad = " " * max(inner - start_len - len(text), 0)
            text = text.replace(_NBSP, " ")
            lines.append(paint(_DIM, "│ ") + start + _paint_default(text, paint) + pad
                         + paint(_DIM, " │"))
    lines.append(paint(_DIM, "╰" + "─" * (width - 2) + "╯"))
    return lines


def _paint_default(text: str, paint: _Paint) -> str:
    at = text.find("[default: ")
    return text if at < 0 else text[:at] + paint(_DIM, text[at:])


def _wrap(text: str, width: int, first: str, rest: str) -> List[str]:
    """Lines of at most `width` characters, split at spaces only (a path or option whole)."""
    lines: List[str] = []
    for line in text.split("\n"):
        lines += textwrap.wrap(line, width=max(width, 10), initial_indent=first,
                               subsequent_indent=rest, break_long_words=False,
                               break_on_hyphens=False) or [""]
    return lines


class _Paint:
    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, style: str, text: str) -> str:
        return f"{style}{text}{_RESET}" if self.on and text else text


def _painter() -> _Paint:
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    return _Paint(tty and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb")
