"""What every command shares: the global options, consoles, JSON output."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer


@dataclass(frozen=True)
class GlobalOptions:
    root: Path


def global_options(ctx: typer.Context) -> GlobalOptions:
    obj = ctx.find_root().obj
    if isinstance(obj, GlobalOptions):
        return obj
    return GlobalOptions(root=Path("/"))


def open_root(ctx: typer.Context):
    """The filesystem root every hardware access goes through."""
    from ..hw.fs import Root

    return Root(global_options(ctx).root)


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False) + "\n")
