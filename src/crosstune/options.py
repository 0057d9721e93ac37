"""Command-line option types and help layout shared by every command.

Numbers are checked where argparse reads them, so a bad value stops the command before any data is
read; lists are comma-separated everywhere (``--models a,b``), and the options that took
space-separated values before still do (``--network a b``)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence


# ---------------------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------------------

def split_list(text: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``."""
    return [part.strip() for part in text.split(",") if part.strip()]


def integer(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An integer in [low, high] (either bound optional)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        _check_range(value, low, high, closed_low=True, closed_high=True)
        return value
    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


def number(low: float | None = None, high: float | None = None, *, closed_low: bool = True,
           closed_high: bool = True) -> Callable[[str], float]:
    """A finite number in the interval from low to high; NaN and infinities are never accepted
    (``--lr nan`` would otherwise train a model of NaNs for an hour)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        _check_range(value, low, high, closed_low, closed_high)
        return value
    parse.__name__ = "number"
    return parse


def _check_range(value, low, high, closed_low: bool, closed_high: bool) -> None:
    too_low = low is not None and (value < low if closed_low else value <= low)
    too_high = high is not None and (value > high if closed_high else value >= high)
    if too_low or too_high:
        left = "-inf" if low is None else f"{low:g}"
        right = "inf" if high is None else f"{high:g}"
        interval = f"{'[' if closed_low and low is not None else '('}{left}, {right}{']' if closed_high and high is not None else ')'}"
        raise argparse.ArgumentTypeError(f"{value:g} is out of range: must be in {interval}")


POSITIVE_INT = integer(1)
COUNT = integer(0)
SEED = integer(0, 2**32 - 1)
FRACTION = number(0.0, 1.0, closed_low=False, closed_high=False)  # strictly between 0 and 1


def choice_list(choices: Sequence[str] | None = None) -> Callable[[str], list[str]]:
    """A comma-separated list whose items (when ``choices`` is given) come from a closed set."""
    def parse(text: str) -> list[str]:
        items = split_list(text)
        if not items:
            raise argparse.ArgumentTypeError("an empty list")
        if choices is not None:
            unknown = [item for item in items if item not in choices]
            if unknown:
                raise argparse.ArgumentTypeError(f"{', '.join(unknown)} not among {','.join(choices)}")
        return items
    parse.__name__ = "list"
    parse.names = choices  # shown in --help by HelpFormatter
    return parse


def number_list(item: Callable[[str], float]) -> Callable[[str], list[float]]:
    """A comma-separated list of numbers, each checked by ``item`` (e.g. ``number(0, 2)``)."""
    def parse(text: str) -> list[float]:
        items = split_list(text)
        if not items:
            raise argparse.ArgumentTypeError("an empty list")
        return [item(x) for x in items]
    parse.__name__ = "list of numbers"
    return parse


class ExtendList(argparse.Action):
    """``--opt a,b c`` -> ``[a, b, c]``: the comma form of every command, and the space-separated form
    some options had first. Each value has already been split by the option's ``type``."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, [item for value in values for item in value])


# ---------------------------------------------------------------------------------------------------
# help and errors
# ---------------------------------------------------------------------------------------------------

def describe_default(value) -> str:
    if value is None:
        return "none"
    if value is False:
        return "off"
    if value is True:
        return "on"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) if value else "none"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) if value else "none"
    return str(value)


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default (or "required"); a help text that already states its
    default (it contains "default") is left as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        names = getattr(action.type, "names", None)
        if names is not None:
            text = f"{text} (from: {', '.join(names)})"
        if action.default is argparse.SUPPRESS or not action.option_strings or "default" in text:
            return text
        if action.required:
            return f"{text} (required)"
        shown = describe_default(action.default).replace("%", "%%")  # help strings are %-formatted
        return f"{text} (default: {shown})"


    def _split_lines(self, text: str, width: int) -> list[str]:
        # never break "by-hardware" or "conv2d_transpose" across lines: users copy these names
        import textwrap

        text = " ".join(text.split())
        return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr (exit 2), like every other user mistake."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
