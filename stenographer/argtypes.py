"""Range-checked number arguments for the command line (argparse ``type=``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["ranged"]


def ranged(convert: type[int] | type[float], low: float, high: float, unit: str = "",
           note: str = "") -> Callable[[str], int | float]:
    """An argparse type: ``convert(text)`` within ``low``-``high`` (in ``unit``, e.g.
    "seconds"), else an error that names the valid range and ``note``."""
    of_unit = f" of {unit}" if unit else ""
    span = f"{low:g}-{high:g}" + (f" {unit}" if unit else "") + note

    def parse(text: str) -> int | float:
        try:
            value = convert(text)
        except ValueError:
            noun = "a whole number" if convert is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}{of_unit} ({span})"
                                             ) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value:g} is out of range ({span})")
        return value
    return parse
