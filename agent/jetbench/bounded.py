"""Limits on documents jetbench reads from files others can write (result JSON, profile
TOML): how deeply a parsed document nests, counted without recursion."""

from __future__ import annotations

from typing import Iterable, List, Tuple


def nesting_depth(doc: object, limit: int) -> int:
    """How deeply lists and dicts (JSON arrays and objects, TOML arrays and tables) nest, up to
    just past `limit` (iterative: a hostile file cannot recurse us). A document that is one
    scalar (JSON `5`) is 1 deep."""
    deepest = 0
    stack: List[Tuple[object, int]] = [(doc, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if level > limit:
            break
        children: Iterable[object] = node.values() if isinstance(node, dict) else \
            node if isinstance(node, list) else ()
        stack.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))
    return deepest
