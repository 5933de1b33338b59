"""argparse value types shared by every ``vta`` subcommand (a bad number is a usage error,
exit 2, before any work starts)."""

from __future__ import annotations

import argparse

__all__ = ["nonnegative_int", "positive_int", "nonnegative_float", "positive_float"]


def _number(kind, text: str, ok, what: str):
    try:
        v = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a {what}") from None
    if not ok(v) or v != v:          # v != v: NaN
        raise argparse.ArgumentTypeError(f"{text!r} is not a {what}")
    return v


def nonnegative_int(text: str) -> int:
    """An integer >= 0."""
    return _number(int, text, lambda v: v >= 0, "non-negative integer")


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _number(int, text, lambda v: v >= 1, "positive integer")


def nonnegative_float(text: str) -> float:
    """A finite number >= 0."""
    return _number(float, text, lambda v: 0 <= v < float("inf"), "non-negative number")


def positive_float(text: str) -> float:
    """A finite number > 0."""
    return _number(float, text, lambda v: 0 < v < float("inf"), "positive number")
