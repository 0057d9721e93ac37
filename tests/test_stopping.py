"""A stop signal ends a command at once, except a first SIGTERM while tuning rounds: that one waits for the
round under way (see crosstune/stopping.py for why)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from crosstune import stopping


@pytest.fixture
def handlers(signal_handlers_restored):
    stopping.install()


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(5)  # the handler runs (and raises, if it does) long before this ends


def test_a_sigterm_outside_the_rounds_stops_at_once(handlers):
    with pytest.raises(KeyboardInterrupt):
        _signal_self(signal.SIGTERM)
    assert stopping.requested()


def test_a_first_sigterm_between_rounds_waits_for_the_check(handlers, capsys):
    with stopping.between_rounds():
        stopping.check()  # nothing asked yet
        started = time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the handler ran during this and did not raise
        assert time.monotonic() - started >= 0.2
        assert stopping.requested()
        assert "stopping once the round under way is measured and saved" in capsys.readouterr().err
        with pytest.raises(KeyboardInterrupt):
            stopping.check()


def test_a_second_sigterm_or_a_ctrl_c_between_rounds_stops_at_once(handlers):
    with stopping.between_rounds():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        with pytest.raises(KeyboardInterrupt):
            _signal_self(signal.SIGTERM)
    stopping.install()  # a new command: nothing asked
    assert not stopping.requested()
    with stopping.between_rounds(), pytest.raises(KeyboardInterrupt):
        _signal_self(signal.SIGINT)
