"""The time-marching core of the simulated GPU: physics on a fine grid, history kept bounded.

:class:`SimulationEngine` holds the simulated GPU's state — per 1 ms control
step the clocks, temperature, throttle reasons and power coefficients; per
0.2 ms fine step the core and memory activity; and the running integrals of
power and activity at the fine edges — and advances it: launches are placed
on the fine grid (a launch shorter than a step occupies it fractionally),
each finished control step heats the die (first-order thermal RC) and drives
the power-cap clock controller (:class:`~powermodels.devices.cap_controller.CapController`).

History is bounded: with ``history_s`` set, the state older than
``history_s`` behind :meth:`now` is dropped once the kept span exceeds 1.5 ×
``history_s`` (one array move per ``history_s / 2`` of simulated time, so
the cost per simulated second stays constant), and asking about dropped
times raises a ``ValueError`` that names ``history_s``.
:class:`~powermodels.devices.simulated.SimulatedGPU` adds the device
protocol, the emulated sensor and the public calls on top.
"""

from __future__ import annotations

import math

import numpy as np

from .cap_controller import THROTTLE_SW_POWER_CAP, CapController
from .physics import LEVEL_IDLE_GAP_S, clock_table
from .simulated_workload import SimulatedWorkload

__all__ = ["THROTTLE_SW_POWER_CAP", "SimulationEngine"]


class _Buffer:
    """A growable float/int array (amortised doubling)."""

    def __init__(self, dtype, capacity: int = 4096):
        self.data = np.zeros(capacity, dtype=dtype)

    def ensure(self, n: int) -> np.ndarray:
        if n > self.data.size:
            new = np.zeros(max(n, 2 * self.data.size), dtype=self.data.dtype)
            new[: self.data.size] = self.data
            self.data = new
        return self.data

    def drop_front(self, n: int) -> None:
        """Forget the first ``n`` entries: the rest moves to the front, the tail is zeroed."""
        d = self.data
        if n >= d.size:
            d[:] = 0
        elif n > 0:
            d[: d.size - n] = d[n:]
            d[d.size - n :] = 0  # future steps accumulate into zeros


class SimulationEngine:
    """State and time-marching of the simulated GPU (a base of :class:`SimulatedGPU`).

    A subclass sets ``physics``, ``ambient_c``, ``history_s``, the clock
    locks and the power limit, then calls :meth:`_init_simulation`.
    """

    def _init_simulation(self) -> None:
        ph = self.physics
        self._df = ph.fine_step_s
        self._r = round(ph.control_step_s / ph.fine_step_s)
        self._dc = self._df * self._r
        self._decay = math.exp(-self._dc / ph.thermal_tau_s)
        # Foster network (per pole: decay over one control step, steady-state rise per watt)
        self._pole_decay = np.array([math.exp(-self._dc / tau) for _, tau in ph.poles])
        self._pole_gain = np.array([r for r, _ in ph.poles]) * (1.0 - self._pole_decay)
        # the level states (physics.core_level_*, board-wide; SimulatedWorkload.level_*, each workload's own):
        # each its own random stream, so that a board without them (sd 0, the default) draws nothing and replays
        # exactly as before, and switching one on leaves the other's draws as they were
        self._level = 0.0  # what multiplies the core dynamic power now: the board's level plus the workload's
        self._board_level = 0.0
        self._level_rng = np.random.default_rng([getattr(self, "seed", 0), 29])
        self._workload_levels: dict[str, float] = {}
        self._workload_level_rng = np.random.default_rng([getattr(self, "seed", 0), 30])
        self._level_workload: str | None = None
        self._level_last_end_s = -math.inf
        self._clocks = clock_table(ph)
        v = ph.relative_voltage(self._clocks)
        self._leak_c = (ph.leakage_w * v).tolist()
        self._core_c = (ph.core_w_per_ghz * self._clocks / 1000.0 * v * v).tolist()

        # per control step
        self._fi = _Buffer(np.int64)        # SM clock index into self._clocks
        self._fm = _Buffer(float)           # memory clock
        self._temp = _Buffer(float)         # temperature at the step's start
        self._thr = _Buffer(np.int64)       # throttle reasons
        self._base = _Buffer(float)         # power at zero activity
        self._bc = _Buffer(float)           # W per unit core activity
        self._bm = _Buffer(float)           # W per unit memory activity
        self._core_load = _Buffer(float)    # ∫ core activity dt within the step
        self._mem_load = _Buffer(float)
        # per fine step
        self._act = _Buffer(float, 4096 * self._r)
        self._mact = _Buffer(float, 4096 * self._r)
        self._ecum = _Buffer(float, 4096 * self._r + 1)   # ∫ P dt at fine edges
        self._acum = _Buffer(float, 4096 * self._r + 1)   # ∫ core activity dt at fine edges
        self._n_cum = 0
        self._tick = 0
        # the buffers start at control step _k0 (fine step _j0 = _k0 * _r): older history is gone
        self._k0 = 0
        self._j0 = 0
        self._history_listeners: list = []

        fi0 = len(self._clocks) - 1
        fm0 = float(ph.mem_clocks_mhz[0])
        t0 = ph.idle_temperature_c(self.ambient_c, float(self._clocks[fi0]), fm0)
        self._set_step(0, fi0, fm0, t0, 0)
        self._pre_power = float(self._base.data[0])  # the GPU idled before t = 0
        # each pole at its idle steady state: its share R_i / R of the rise
        self._poles = np.array([r for r, _ in ph.poles]) / ph.total_thermal_resistance_k_per_w \
            * (t0 - self.ambient_c)
        self._cap = CapController(ph, self._clocks, self._dc, self._pre_power, self._limit_w())

    # ------------------------------------------------------------------
    # Bounded history
    # ------------------------------------------------------------------

    def _forget_old(self) -> None:
        """Drop the state older than ``history_s`` behind now, once 1.5 x ``history_s`` is kept.

        Called between the public calls that advance time. The move costs
        the kept span, once per ``history_s / 2`` of simulated time: constant
        per simulated second, and memory stays within ~2 x ``history_s``.
        """
        keep = self.history_s
        if keep is None or (self._tick - self._j0) * self._df <= 1.5 * keep:
            return
        self._update_cumulative()  # the integrals must reach now before their start moves
        k_new = min(int((self.now() - keep) // self._dc), self._tick // self._r)
        shift = k_new - self._k0
        if shift <= 0:
            return
        for listener in list(self._history_listeners):  # e.g. an EnergyMeter's open windows
            listener(self._j0 * self._df, k_new * self._dc)
        for buf in (self._fi, self._fm, self._temp, self._thr, self._base, self._bc, self._bm,
                    self._core_load, self._mem_load):
            buf.drop_front(shift)
        for buf in (self._act, self._mact, self._ecum, self._acum):
            buf.drop_front(shift * self._r)
        self._k0 = k_new
        self._j0 = k_new * self._r

    def add_history_listener(self, listener) -> None:
        """Call ``listener(from_s, to_s)`` just before the state in ``[from_s, to_s)`` is dropped.

        The listener may still read that span (``trace``) during the call; it
        runs under the GPU's lock, in the thread that advanced time.
        """
        self._history_listeners.append(listener)

    def remove_history_listener(self, listener) -> None:
        """Stop calling ``listener`` (see :meth:`add_history_listener`)."""
        if listener in self._history_listeners:
            self._history_listeners.remove(listener)

    def history_start_s(self) -> float:
        """The oldest simulated instant still kept (``-inf`` while nothing was dropped)."""
        return self._j0 * self._df if self._j0 else -math.inf

    def _check_kept(self, t: np.ndarray) -> None:
        """Refuse times whose history was dropped (``history_s``)."""
        if self._j0 and t.size and float(np.min(t)) < self._j0 * self._df - 1e-9:
            raise ValueError(
                f"SimulatedGPU: t = {float(np.min(t)):g} s is older than the kept history "
                f"(history_s={self.history_s:g}: from {self._j0 * self._df:g} s to now "
                f"{self.now():g} s); pass a larger history_s, or None to keep everything")


    def _limit_w(self) -> float:
        return self.physics.power_limit_w if self._power_limit is None else self._power_limit

    def _clock_index(self, mhz: float) -> int:
        ph = self.physics
        i = round((mhz - ph.sm_clock_min_mhz) / ph.sm_clock_step_mhz)
        return min(max(i, 0), len(self._clocks) - 1)

    def _target_index(self) -> int:
        return len(self._clocks) - 1 if self._sm_lock is None else self._clock_index(self._sm_lock)

    def _mem_target(self) -> float:
        return float(self.physics.mem_clocks_mhz[0]) if self._mem_lock is None else self._mem_lock

    def _coefficients(self, fi: int, fm: float, temp: float) -> tuple[float, float, float]:
        ph = self.physics
        leak = self._leak_c[fi] * (1.0 + ph.leakage_per_c * (temp - ph.t_ref_c))
        core = self._core_c[fi]
        mem = ph.mem_w_per_ghz * fm / 1000.0
        base = ph.p0_w + leak + core * ph.idle_activity + mem * ph.mem_idle_activity
        theta = 1.0 + ph.dynamic_per_c * (temp - ph.t_ref_c)  # the load's own temperature slope (physics.py)
        return (base, core * (1.0 - ph.idle_activity) * theta * (1.0 + self._level),
                mem * (1.0 - ph.mem_idle_activity) * theta)

    def _start_load(self, w: SimulatedWorkload) -> None:
        """A launch is about to run: at a load start the level states are kept or drawn anew.

        The board's (``physics.core_level_*``) and the workload's own (``w.level_*``); the core dynamic power
        carries their sum from the next control step.
        """
        ph = self.physics
        new_load = (w.name != self._level_workload
                    or self._tick * self._df - self._level_last_end_s >= LEVEL_IDLE_GAP_S)
        self._level_workload = w.name
        if not new_load:
            return
        if ph.core_level_sd > 0.0 and self._level_rng.random() >= ph.core_level_keep:
            self._board_level = float(self._level_rng.normal(0.0, ph.core_level_sd))
        if w.level_sd > 0.0 and (w.name not in self._workload_levels
                                 or self._workload_level_rng.random() >= w.level_keep):
            self._workload_levels[w.name] = float(self._workload_level_rng.normal(0.0, w.level_sd))
        self._level = self._board_level + self._workload_levels.get(w.name, 0.0)

    def _set_step(self, k: int, fi: int, fm: float, temp: float, thr: int) -> None:
        i = k - self._k0
        for buf in (self._fi, self._fm, self._temp, self._thr, self._base, self._bc, self._bm,
                    self._core_load, self._mem_load):
            buf.ensure(i + 1)
        self._fi.data[i] = fi
        self._fm.data[i] = fm
        self._temp.data[i] = temp
        self._thr.data[i] = thr
        self._base.data[i], self._bc.data[i], self._bm.data[i] = self._coefficients(fi, fm, temp)

    def _retarget_open_step(self) -> None:
        # called at a step boundary: the open step has no elapsed time yet
        k = self._tick // self._r
        self._set_step(k, self._target_index(), self._mem_target(), float(self._temp.data[k - self._k0]), 0)

    def _finalize(self, k: int) -> None:
        """Step ``k`` is over: its mean power heats the die and drives the power cap."""
        ph = self.physics
        i = k - self._k0
        a = self._core_load.data[i] / self._dc
        m = self._mem_load.data[i] / self._dc
        power = self._base.data[i] + self._bc.data[i] * a + self._bm.data[i] * m
        heat = power - (1.0 - ph.mem_heat_share) * self._bm.data[i] * m  # what heats the die's sensor
        if ph.thermal_poles:
            self._poles = self._poles * self._pole_decay + self._pole_gain * heat
            temp_next = self.ambient_c + float(self._poles.sum())
        else:
            temp = self._temp.data[i]
            temp_next = self.ambient_c + (temp - self.ambient_c) * self._decay \
                + ph.thermal_resistance_k_per_w * heat * (1.0 - self._decay)
        fm, target, fi_prev = self._mem_target(), self._target_index(), int(self._fi.data[i])
        fi, thr = self._cap.step(k, power, a, m, temp_next, fi_prev, target, fm, self._limit_w())
        self._set_step(k + 1, fi, fm, temp_next, thr)

    def _idle_to(self, tick: int) -> None:
        r = self._r
        while self._tick < tick:
            k = self._tick // r
            boundary = (k + 1) * r
            if tick >= boundary:
                self._tick = boundary
                self._finalize(k)
            else:
                self._tick = tick

    def _align_to_step(self) -> None:
        if self._tick % self._r:
            self._idle_to((self._tick // self._r + 1) * self._r)

    def _execute(self, w: SimulatedWorkload, launches: int, gap: float) -> np.ndarray:
        """March control steps, placing launches; returns ``(launches, 2)`` start/end times."""
        self._start_load(w)
        df, dc, r, k0 = self._df, self._dc, self._r, self._k0
        tick0 = self._tick
        k = tick0 // r
        t = tick0 * df
        starts: list = []
        ends: list = []
        n_left = launches
        q = 0.0      # remaining work of the launch in flight (fraction)
        g = 0.0      # remaining gap before the next launch
        cache: dict[tuple[int, float], float] = {}
        while n_left > 0 or q > 0.0:
            step_end = (k + 1) * dc
            fi = int(self._fi.data[k - k0])
            fm = float(self._fm.data[k - k0])
            key = (fi, fm)
            tk = cache.get(key)
            if tk is None:
                tk = w.time_s(float(self._clocks[fi]), fm)
                if not (math.isfinite(tk) and tk > 0):
                    raise ValueError(f"run: workload {w.name!r} takes {tk!r} s per launch at "
                                     f"{self._clocks[fi]:g}/{fm:g} MHz (must be > 0)")
                cache[key] = tk
            busy = 0.0
            while (n_left > 0 or q > 0.0) and step_end - t > 1e-15:
                avail = step_end - t
                if q > 0.0:
                    need = q * tk
                    if need <= avail:
                        t += need
                        busy += need
                        q = 0.0
                        ends.append(t)
                        g = gap if n_left > 0 else 0.0
                    else:
                        q -= avail / tk
                        busy += avail
                        t = step_end
                elif g > 0.0:
                    if g <= avail:
                        t += g
                        g = 0.0
                    else:
                        g -= avail
                        t = step_end
                else:
                    cycle = tk + gap
                    m = min(n_left, math.floor((avail + gap) / cycle))
                    if m > 0:
                        s = t + cycle * np.arange(m)
                        starts.append(s)
                        ends.append(s + tk)
                        busy += m * tk
                        n_left -= m
                        t = float(s[-1] + tk)
                        g = gap if n_left > 0 else 0.0
                    else:
                        starts.append(t)
                        n_left -= 1
                        q = 1.0
            self._core_load.data[k - k0] += w.activity * busy
            self._mem_load.data[k - k0] += w.mem_activity * busy
            if step_end - t <= 1e-15:
                t = step_end
                self._finalize(k)
                k += 1
        end_tick = max(math.ceil(t / df - 1e-9), tick0)
        if end_tick == (k + 1) * r:
            self._finalize(k)
        s = np.concatenate([np.atleast_1d(np.asarray(x, dtype=float)) for x in starts])
        e = np.concatenate([np.atleast_1d(np.asarray(x, dtype=float)) for x in ends])
        self._place(tick0, end_tick, s, e, w.activity, w.mem_activity)
        self._tick = end_tick
        self._level_last_end_s = float(e[-1]) if e.size else self._level_last_end_s
        return np.column_stack([s, e])

    def _place(self, tick0: int, tick1: int, s: np.ndarray, e: np.ndarray, activity: float,
               mem_activity: float) -> None:
        """Add the launches' fractional occupancy of each fine step to the activity grids."""
        if tick1 <= tick0:
            return
        edges = (tick0 + np.arange(tick1 - tick0 + 1)) * self._df
        dur = e - s
        cum = np.concatenate([[0.0], np.cumsum(dur)])
        i = np.searchsorted(s, edges, side="right") - 1
        ic = np.maximum(i, 0)
        busy = np.where(i >= 0, cum[ic] + np.clip(edges - s[ic], 0.0, dur[ic]), 0.0)
        occ = np.clip(np.diff(busy) / self._df, 0.0, 1.0)
        a0, a1 = tick0 - self._j0, tick1 - self._j0
        act = self._act.ensure(a1)
        mact = self._mact.ensure(a1)
        act[a0:a1] += activity * occ
        mact[a0:a1] += mem_activity * occ

    def _update_cumulative(self) -> None:
        n0, n1 = self._n_cum, self._tick
        if n1 <= n0:
            return
        j0 = self._j0
        a0, a1 = n0 - j0, n1 - j0
        ecum = self._ecum.ensure(a1 + 1)
        acum = self._acum.ensure(a1 + 1)
        act = self._act.ensure(a1)[a0:a1]
        mact = self._mact.ensure(a1)[a0:a1]
        k = np.arange(n0, n1) // self._r - self._k0
        power = self._base.data[k] + self._bc.data[k] * act + self._bm.data[k] * mact
        ecum[a0 + 1 : a1 + 1] = ecum[a0] + np.cumsum(power * self._df)
        acum[a0 + 1 : a1 + 1] = acum[a0] + np.cumsum(act * self._df)
        self._n_cum = n1

    def _interp_cumulative(self, buf: _Buffer, t: np.ndarray, before: float) -> np.ndarray:
        self._update_cumulative()
        cum = buf.data
        t = np.asarray(t, dtype=float)
        n = self._tick
        if n == 0:
            return np.where(t < 0, before * t, 0.0)
        self._check_kept(t)
        j0 = self._j0
        x = np.clip(t, j0 * self._df, n * self._df) / self._df - j0
        j = np.clip(np.floor(x).astype(np.int64), 0, n - j0 - 1)
        frac = x - j
        value = cum[j] + frac * (cum[j + 1] - cum[j])
        return np.where(t < 0, before * t, value)

    def _energy(self, t) -> np.ndarray:
        """∫₀ᵗ P dt (J); before 0 the GPU idled at its initial power."""
        return self._interp_cumulative(self._ecum, t, self._pre_power)

    def _activity_integral(self, t) -> np.ndarray:
        return self._interp_cumulative(self._acum, t, 0.0)

    def _step_at(self, t: np.ndarray) -> np.ndarray:
        """Row of the per-step buffers holding each time's control step."""
        t = np.asarray(t, dtype=float)
        self._check_kept(t)
        k = np.floor(t / self._dc + 1e-9).astype(np.int64)
        return np.clip(k, self._k0, self._tick // self._r) - self._k0

    def _noise(self, stream: int, idx: np.ndarray) -> np.ndarray:
        """Standard-normal draw per integer index, reproducible whatever the query order."""
        idx = np.asarray(idx, dtype=np.int64) + (1 << 40)
        block = 1 << 12
        out = np.empty(idx.shape, dtype=float)
        blocks = idx // block
        for b in np.unique(blocks):
            key = (stream, int(b))
            draws = self._noise_blocks.get(key)
            if draws is None:
                if len(self._noise_blocks) > 4096:
                    self._noise_blocks.clear()
                draws = np.random.default_rng([self.seed, stream, int(b)]).standard_normal(block)
                self._noise_blocks[key] = draws
            sel = blocks == b
            out[sel] = draws[idx[sel] - b * block]
        return out

