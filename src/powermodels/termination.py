"""SIGTERM / SIGHUP as an exception, so a killed measurement still flushes what it has.

``timeout``, a batch scheduler and a closed terminal end a process with SIGTERM or SIGHUP.
Python's default for both is to die at once: no ``finally`` block runs, so a recording kept
in memory is lost (a natural-DVFS run killed by ``timeout`` in its last thermal series wrote
nothing and lost five minutes of GPU time, ``datasets/h100-2026-11-25-session5``). Inside
:func:`terminate_raises`, either signal raises :class:`Terminated` (a ``SystemExit``, so
``except Exception`` does not swallow it) in the main thread; ``finally`` blocks and
``except BaseException`` flushes run, and the process exits with ``128 + signal``.

The settings guard (:mod:`powermodels.devices.settings_restore`) installs its own handler
while it holds changed settings and chains to the one it found, so both work together.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Terminated", "terminate_raises"]

_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


class Terminated(SystemExit):
    """Raised in the main thread on SIGTERM/SIGHUP inside :func:`terminate_raises`.

    Attributes
    ----------
    signal_name : str
        ``"SIGTERM"`` or ``"SIGHUP"``.
    """

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signal_name = signal.Signals(signum).name

    def __str__(self) -> str:
        return f"stopped by {self.signal_name}"


def _raise(signum, frame) -> None:
    raise Terminated(signum)


@contextmanager
def terminate_raises() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`Terminated` (main thread only).

    Elsewhere (a worker thread, where Python cannot install handlers) it does nothing.
    A signal the process ignores (``nohup``) stays ignored. The previous handlers come back
    on exit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in _SIGNALS:
        current = signal.getsignal(signum)
        if current == signal.SIG_IGN:
            continue
        previous[signum] = current
        signal.signal(signum, _raise)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if signal.getsignal(signum) is _raise:
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
