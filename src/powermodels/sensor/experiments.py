"""Yang's sensor experiments (§IV) on a runner: the traces ``powermodels characterize`` fits.

:func:`record` runs them on any runner — the simulated GPU, a twin preset's
GPU (:mod:`powermodels.twin.sensor_check`) or a real GPU through CuPy — and
returns the trace tables that :func:`~powermodels.sensor.report.characterize_traces`
fits. It never changes a GPU setting.
"""

from __future__ import annotations

__all__ = ["FRACTIONS", "record"]

FRACTIONS = (2 / 3, 3 / 4, 4 / 5, 6 / 5, 5 / 4, 4 / 3)  # Yang §IV-C, artifact A4


def record(runner, *, seconds: float = 9.0, step_seconds: float = 3.0, log=print,
           design: str = "yang"):
    """Run the experiments on ``runner`` and return ``(square, step, probe)`` trace tables.

    ``design`` other than ``"yang"`` replaces the six square waves by that
    load of :mod:`powermodels.sensor.window_design` (``seconds`` of it in all).

    The load columns come from the launch intervals the runner returns (see
    :func:`~powermodels.sensor.report.attach_load`), so the same code serves
    the simulated GPU and a real one.
    """
    import numpy as np
    import pandas as pd

    from .. import schema
    from .report import attach_load
    from .update_period import UpdatePeriod

    def one(run_id, before_s, body, after_s):
        a, _ = runner.idle(before_s)
        iv = np.asarray(body(), dtype=float).reshape(-1, 2)
        _, b = runner.idle(after_s)
        return attach_load(runner.trace(a, b, run_id=run_id), iv)

    # A1: a 20 ms square wave for 2 s, fast enough for every known update period
    probe = one("probe", 0.3, lambda: runner.square_wave(0.01, 0.01, 100), 0.2)
    period = UpdatePeriod(power_column=schema.POWER_INSTANT_W).fit(probe).update_period_s_
    log(f"update period (probe): {period * 1e3:.1f} ms")
    runs = []
    if design != "yang":
        from .window_design import record_design

        log(f"{design}: {seconds:g} s of load")
        runs.append(record_design(runner, design, period, seconds))
    for frac in FRACTIONS if design == "yang" else ():
        p = frac * period
        n = max(4, int(np.ceil(seconds / p)))
        log(f"square wave {frac:.3f} × {period * 1e3:.0f} ms = {p * 1e3:.1f} ms, {n} periods")
        runs.append(one(f"square-{frac:.3f}", 0.5, lambda p=p, n=n: runner.square_wave(p / 2, p / 2, n),
                        0.3))
    square = pd.concat(runs, ignore_index=True)
    log(f"step: 2 s idle, {step_seconds} s load, 1.5 s idle")
    runner.idle(0.5)
    step = one("step", 2.0, lambda: [runner.step(step_seconds)], 1.5)
    return square, step, probe
