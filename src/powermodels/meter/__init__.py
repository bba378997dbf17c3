"""Zeus-style energy windows around any code region: :class:`EnergyMeter`.

>>> meter = EnergyMeter()                          # doctest: +SKIP
>>> meter.begin_window("step")                     # doctest: +SKIP
>>> train_step()                                   # doctest: +SKIP
>>> m = meter.end_window("step")                   # doctest: +SKIP
>>> m.energy_j, m.time_s, m.power_w, m.uncertainty_j   # doctest: +SKIP

or ``with meter.window("step") as w: ...`` and read ``w.result`` afterwards.

How a window is measured
------------------------
Where the GPU has a total-energy counter (Volta and newer), the meter polls
it on a background thread (:class:`~powermodels.measuring.counter_log.PolledCounterLog`:
a read every ~5 ms, a read costs ~4 ms on Hopper) and takes the energy at the
window's two ends from the reads around them
(:func:`~powermodels.measuring.counter_log.energy_bounds`):

* the counter is exact but published only at its updates (~100 ms apart on
  Hopper), so the energy at an arbitrary instant is *bounded* by the values
  published just before and just after it, and *estimated* by linear
  interpolation between the two updates' instants;
* ``end_window`` therefore waits for the first update after the window's end
  (up to one update period plus a read, ~0.1 s on Hopper) so that the end is
  bracketed; ``begin_window`` returns at once (the reads before it are
  already in the log). ``end_window(name, wait=False)`` returns at once too
  (a window per training step should not stall the loop) and extrapolates
  the end at the last update interval's power, with a larger uncertainty;
* ``end_window(name, steady=True)``, for a load that is the same all through
  the window (back-to-back launches of one kernel), takes the power between
  the first and last updates *inside* the window times its time: nothing is
  interpolated across the edges, only the two updates' instants are uncertain;
* ``energy_bounds_j`` holds whatever the power did inside the two edge
  updates; ``uncertainty_j`` is the 1-σ width that follows when the energy
  at each end is taken as uniform within its bounding update (per end:
  that update's energy / √12).

What a window shorter than the update period can and cannot give
-----------------------------------------------------------------
A window is resolved only as finely as the counter's updates. For a window
much longer than the update period the two edge updates are a small share
of the energy (a 10 s window at constant power on Hopper: ~0.4 % 1-σ). For a
window shorter than one update period the counter holds no value published
*inside* it: the energy then is the power of the update interval(s) around
it times the window's time — right for a steady load (a training step in a
loop), blind to what this window did differently from its neighbours.
``uncertainty_j`` grows to about one update's energy (``P × 0.1 s`` on
Hopper, i.e. larger than the window's own energy), ``short`` is set on the
result and a warning says so. Measure many repetitions in one window instead.

Windows of any length, and threads
----------------------------------
The meter keeps a bounded history of reads (10 minutes on a real GPU, the
simulated GPU's ``history_s``). A window's energy needs only the reads that
bracket its two ends (the counter is cumulative), so the reads around each
open window's start are kept aside as they leave the history, and the
clocks, temperatures and throttle reasons that leave it are folded into the
window's summary: a window of an hour costs the same memory as one of a
second and keeps its energy.

One meter may be used from several threads. Window names are shared by all
of them: ``begin_window`` of a name that is open (or being opened) in any
thread raises ``ValueError`` naming the thread that holds it, and of two
``end_window`` calls of one name the first measures the window and the
other raises ``ValueError`` (no window of that name is open). For a window
per thread, put the thread in the name.

Without an energy counter the meter integrates the power readings; their
boxcar window covers only part of each update on some GPUs (25 ms of 100 ms
on Hopper, Yang §IV-C) and carries the sensor's gain error (±5 %, Yang
§IV-B), which the uncertainty includes.

The simulated GPU's clock moves only when work is run: drive it with
``gpu.run(...)`` / ``gpu.idle(...)`` between ``begin_window`` and
``end_window``; ``end_window`` idles it until the next counter update, as
time passes on a real GPU while the meter waits (not with ``wait=False``).
"""

from __future__ import annotations

import math
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .window_energy import POWER_GAIN_ERROR, WindowMeasurement, measure_window, with_thermal  # noqa: F401

__all__ = ["EnergyMeter", "WindowMeasurement"]
# WindowMeasurement and POWER_GAIN_ERROR live in meter/window_energy.py (the measuring half of the
# meter, split off for issue 23's module size); imported here so that
# powermodels.meter.WindowMeasurement (docs, zeus integration, pickles of saved windows) keeps working.


@dataclass
class _OpenWindow:
    """An open window: its start (None while ``begin_window`` is still syncing), what the log keeps."""

    thread: str
    start: float | None = None
    held: object = None


class _Handle:
    """What ``with meter.window(name) as w`` binds: ``w.result`` once the block has ended."""

    def __init__(self, name: str):
        self.name = name
        self.result: WindowMeasurement | None = None


def _open(device, index: int = 0):
    from ..devices import Device, open_device

    if isinstance(device, Device):
        return device, False
    if isinstance(device, str):
        return open_device(device, index=index), True
    raise ValueError(f"EnergyMeter: device must be 'auto', 'nvml', 'simulated' or a Device, got {device!r}")


def _auto_sync():
    """A device synchronize for the frameworks already imported (torch, cupy), or None."""
    syncs = []
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "cuda", None) is not None and torch.cuda.is_initialized():
        syncs.append(torch.cuda.synchronize)
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        syncs.append(lambda: cupy.cuda.Device().synchronize())
    if not syncs:
        return None
    return lambda: [s() for s in syncs]


class EnergyMeter:
    """Measure the GPU energy of named code regions (windows), Zeus style.

    Parameters
    ----------
    device : {"auto", "nvml", "simulated"} or Device, default="auto"
        Where readings come from ("auto": NVML when a GPU is present, else the
        simulated GPU, said on stderr).
    index : int, default=0
        Which GPU, when ``device`` is a kind (one meter per GPU).
    sync : "auto", callable or None, default="auto"
        Called at both ends of a window so queued GPU work is inside it:
        "auto" synchronizes PyTorch and CuPy when they are imported; None
        measures exactly the host instants of the calls.
    delay_s : float, default=0
        Counter lag (a value published at ``u`` covers energy up to ``u - delay_s``).
    wait_timeout_s : float, default=2
        Longest ``end_window`` waits for the counter update after the window.
    reference_temperature_c : float, optional
        ``T_ref`` of every window's ``energy_at_ref_j`` (thesis eq. 4.7); by default the board's
        pooled α's, else the window's own temperature rounded. Each window carries the thermal
        columns of a callable's row (:attr:`WindowMeasurement.thermal`); its α is the board's learned
        α pooled at the window's clock (the α cache of earlier measurements), else the assumption.

    Notes
    -----
    See the module docstring for what a window can and cannot resolve.
    """

    def __init__(self, device="auto", *, index: int = 0, sync="auto", delay_s: float = 0.0,
                 wait_timeout_s: float = 2.0, reference_temperature_c: float | None = None):
        from ..measuring.counter_log import open_counter_log
        from ..thermal.normalise import check_reference_temperature

        if reference_temperature_c is not None:
            reference_temperature_c = check_reference_temperature(reference_temperature_c,
                                                                  "EnergyMeter: reference_temperature_c")
        #: ``T_ref`` of every window's ``energy_at_ref_j`` (None: the board α's, else the window's own, rounded)
        self.reference_temperature_c = reference_temperature_c
        self._board_alpha = None  # the α cache's entries for this GPU, read at the first window

        if not (sync is None or sync == "auto" or callable(sync)):
            raise ValueError(f"EnergyMeter: sync must be 'auto', a callable or None, got {sync!r}")
        if not (isinstance(delay_s, (int, float)) and math.isfinite(delay_s) and delay_s >= 0):
            raise ValueError(f"EnergyMeter: delay_s must be a finite number >= 0, got {delay_s!r}")
        self.device, self._owns = _open(device, index)
        self.simulated = self.device.info.kind == "simulated"
        self._sync_mode = None if self.simulated else sync
        self.delay_s = float(delay_s)
        self.wait_timeout_s = float(wait_timeout_s)
        self._log = open_counter_log(self.device)
        self._windows: dict[str, _OpenWindow] = {}
        self._lock = threading.Lock()
        if not self.simulated and self._log.has_counter:
            self._wait_first_update()

    # -- windows ------------------------------------------------------------

    def begin_window(self, name: str) -> None:
        """Open window ``name`` now (after a sync); windows may nest and overlap by name.

        Window names are shared by every thread using this meter: opening a
        name that is open — in any thread, or still being opened by another —
        is a ``ValueError`` naming the thread that holds it. For one window
        per thread, put the thread in the name (``f"step-{threading.get_ident()}"``).
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"begin_window: name must be a non-empty string, got {name!r}")
        record = _OpenWindow(threading.current_thread().name)
        with self._lock:  # the name is reserved before the sync, which may release the GIL
            if name in self._windows:
                raise ValueError(f"begin_window: window {name!r} is already open "
                                 f"(begun by thread {self._windows[name].thread!r})")
            self._windows[name] = record
        try:
            self._synchronize()
            start = self.device.now()
            held = self._log.hold(start, self._bracket_s())
        except BaseException:
            with self._lock:
                self._windows.pop(name, None)
            raise
        with self._lock:
            record.held = held
            record.start = start

    def end_window(self, name: str, *, wait: bool = True, steady: bool = False,
                   idle_power_w: float | None = None, wait_clock: bool = False) -> WindowMeasurement:
        """Close window ``name`` and measure it (waits for the counter's next update, ~0.1 s).

        Of two threads ending the same window at once, one measures it and
        the other gets the ``ValueError`` of a window that is not open. The
        window is closed even when measuring it raises.

        Parameters
        ----------
        name : str
            A window begun with :meth:`begin_window`.
        wait : bool, default=True
            Wait for the counter's first update after the window's end (up to
            one update period plus a read), so the end is bracketed. With
            False the call returns at once — for a window per training step,
            where a 0.1 s stall per step would cost more than it tells — and
            the end is extrapolated at the last update interval's power
            (:func:`~powermodels.measuring.counter_log.extrapolated_energy`):
            the upper bound is then unknown (``inf``) and the uncertainty
            includes the unseen time since the last update.
        steady : bool, default=False
            Only when the load is the same all through the window (back-to-back
            launches of one kernel, as Kernel Tuner's continuous benchmark): the
            power is taken between the first and last counter updates inside
            the window and multiplied by its time, so nothing is interpolated
            across its edges (:func:`~powermodels.measuring.counter_log.steady_power`);
            needs two updates inside (a window of ≥ ~2 update periods), else the
            default estimate is used and a note says so.
        idle_power_w : float, optional
            Only when the GPU idled at this power from the update before the
            window's start to the start, and from its end to the update after
            (as around a whole program run): each end is then anchored to the
            update outside the window instead of interpolated across the
            load change, which leaves only the update instants' brackets as
            error (:func:`~powermodels.measuring.counter_log.anchored_energy`).
        wait_clock : bool, default=False
            Also wait until every SM-clock reading that can describe the window's end is
            published (delay + window + one update period after it: ~0.2 s on an H100 whose
            reading is not characterised), so the window's clock and its uncertainty cover the
            whole window (:mod:`powermodels.meter.window_clock`). Without it the readings
            published by then are used and ``clock_covered`` says whether they were all.
        """
        if idle_power_w is not None and not (isinstance(idle_power_w, (int, float))
                                             and math.isfinite(idle_power_w) and idle_power_w >= 0):
            raise ValueError(f"end_window: idle_power_w must be a finite number >= 0, got {idle_power_w!r}")
        with self._lock:  # claimed here: a second end_window of this name gets the ValueError below
            record = self._windows.get(name)
            if record is None:
                open_ = sorted(self._windows)
                raise ValueError(f"end_window: no window named {name!r} is open "
                                 f"(open: {open_ if open_ else 'none'})")
            if record.start is None:
                raise ValueError(f"end_window: window {name!r} is still being opened by thread "
                                 f"{record.thread!r}")
            del self._windows[name]
        try:
            self._synchronize()
            end = self.device.now()
            result = measure_window(self._log, name, record.start, end, delay_s=self.delay_s,
                                    wait_timeout_s=self.wait_timeout_s, idle_power_w=idle_power_w,
                                    wait=wait, steady=steady, held=record.held, device=self.device,
                                    simulated=self.simulated, wait_clock=wait_clock)
            # the thermal columns a callable's row has (α: the board's pooled, else assumed)
            return with_thermal(result, self.device, reference_temperature_c=self.reference_temperature_c,
                                board=self._board_entries())
        finally:
            self._log.release(record.held)

    def _board_entries(self) -> list:
        """This GPU's learned α (the state folder's α cache), read once: a window per training step
        must not read a file per step."""
        if self._board_alpha is None:
            from ..thermal.alpha_cache import AlphaCache

            info = self.device.info
            try:
                self._board_alpha = AlphaCache().entries(info.uuid or f"{info.kind}-{info.index}", driver=info.driver)
            except OSError:  # an unreadable state folder: the windows take the assumption
                self._board_alpha = []
        return self._board_alpha

    def cancel_window(self, name: str) -> None:
        """Forget open window ``name`` without measuring it."""
        with self._lock:
            record = self._windows.get(name)
            if record is None or record.start is None:
                raise ValueError(f"cancel_window: no window named {name!r} is open")
            del self._windows[name]
        self._log.release(record.held)

    @contextmanager
    def window(self, name: str, *, wait: bool = True):
        """``with meter.window(name) as w:`` — ``w.result`` holds the measurement after the block.

        A block that raises cancels the window (the error propagates, nothing
        is measured). ``wait`` as in :meth:`end_window`.
        """
        handle = _Handle(name)
        self.begin_window(name)
        try:
            yield handle
        except BaseException:
            self.cancel_window(name)
            raise
        handle.result = self.end_window(name, wait=wait)

    @property
    def open_windows(self) -> list[str]:
        """Names of the windows begun and not yet ended."""
        with self._lock:
            return sorted(self._windows)

    def close(self) -> None:
        """Stop the background polling (and close the device if the meter opened it)."""
        self._log.close()
        if self._owns:
            self.device.close()

    def __enter__(self) -> EnergyMeter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- measuring ----------------------------------------------------------

    def _synchronize(self) -> None:
        # "auto" is resolved at every call: PyTorch or CuPy may be imported after the meter
        sync = _auto_sync() if self._sync_mode == "auto" else self._sync_mode
        if sync is not None:
            sync()

    def _bracket_s(self) -> float:
        """How far around a window's start the counter reads are kept (three update periods)."""
        period = self._log.update_period_s() if self._log.has_counter else math.nan
        return 3.0 * period if math.isfinite(period) and period > 0 else 1.0

    def _wait_first_update(self) -> None:
        # a window's start interpolates from the update before it; wait=False extrapolates
        # from the last two: have two updates in the log before the first window
        import time

        deadline = time.monotonic() + self.wait_timeout_s
        while time.monotonic() < deadline:
            _, _, j = self._log.reads(-math.inf, math.inf)
            if j.size >= 3 and np.count_nonzero(j[1:] > j[:-1]) >= 2:
                return
            self._log.advance()
