"""Quantities as people read them (a module of its own: the CLI imports it at start-up)."""

from __future__ import annotations


def format_bytes(n: int) -> str:
    """``n`` bytes as people read them: ``512 B``, ``17.6 KiB``, ``1.2 GiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{size:.1f} TiB"
