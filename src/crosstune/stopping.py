"""How a stop signal (SIGTERM, Ctrl-C) ends a command: at once, or, while TVM tunes, after the round under way.

A KeyboardInterrupt raised while TVM's C++ is calling back into Python (a cost model's predict, a measure
callback) can reach C++ code that cannot pass it on: the process then aborts with "Segfault encountered" and
a C++ stack (seen when a tune-compare arm was stopped with `kill`). So inside ``between_rounds()`` the first
SIGTERM is only recorded, and the tuning loop calls ``check()`` once the round is saved. Ctrl-C still stops at
once: the terminal sends it to TVM's build and run workers too, so the round could not finish anyway."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

_requested: int | None = None  # the signal that asked this process to stop, once one has
_deferring = False


def install() -> None:
    """Handle SIGTERM like Ctrl-C (children stopped, exit 130) for the command about to run."""
    global _requested
    _requested = None
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)


def requested() -> bool:
    """True once SIGTERM or Ctrl-C arrived during this command."""
    return _requested is not None


def _on_signal(signum, frame) -> None:
    global _requested
    first = _requested is None
    _requested = signum
    if _deferring and first and signum == signal.SIGTERM:
        print("crosstune: stopping once the round under way is measured and saved (signal again to stop now)",
              file=sys.stderr, flush=True)
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def between_rounds():
    """A first SIGTERM inside this block waits for ``check()``."""
    global _deferring
    previous, _deferring = _deferring, True
    try:
        yield
    finally:
        _deferring = previous


@contextlib.contextmanager
def failures_after_a_stop_are_interruptions():
    """Once a stop signal has arrived, any failure is the stop's doing: the KeyboardInterrupt raised while TVM
    was calling our Python comes out of TVM as its RuntimeError, and a stop can break what it interrupted (a
    half-done compile). Such a failure is raised as the KeyboardInterrupt it is, not shown as an error."""
    try:
        yield
    except BrokenPipeError:
        raise  # the reader of our output went away: not the stop's doing
    except Exception:
        if _requested is None:
            raise
        raise KeyboardInterrupt from None


def check() -> None:
    """Stop here (KeyboardInterrupt) if a signal asked to."""
    if _requested is not None:
        raise KeyboardInterrupt
