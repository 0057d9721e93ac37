"""Where sub-commands register (``@command``), apart from ``cli.py`` so that the command modules and
the entry point do not import each other: cli.py imports the command modules, never the reverse."""

from __future__ import annotations

import argparse
from collections.abc import Callable

Handler = Callable[[argparse.Namespace], int]
Definer = Callable[[argparse.ArgumentParser], Handler]
COMMANDS: dict[str, tuple[Definer, str]] = {}


def command(name: str, help_text: str) -> Callable[[Definer], Definer]:
    """Register a sub-command. The decorated function adds the command's arguments to its parser and
    returns the handler that runs it."""
    def register(define: Definer) -> Definer:
        COMMANDS[name] = (define, help_text)
        return define
    return register
