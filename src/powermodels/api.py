"""Public one-liners: ``powermodels.measure(workload)``.

>>> import powermodels
>>> from powermodels.workloads import SimulatedTwin
>>> def step():  # on a real GPU: enqueue the work (CuPy, PyTorch, ...)
...     pass
>>> m = powermodels.measure(step, device="simulated", simulated=SimulatedTwin(time_s=2e-3))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["measure"]


def _protocol(protocol, runner, params: dict):
    from .measuring.protocols import Protocol, default_protocol, make_protocol

    if protocol is None:
        return default_protocol(runner, **params)
    if isinstance(protocol, Protocol):
        if params:
            raise ValueError(f"measure: protocol parameters {sorted(params)} given with a Protocol "
                             "object; set them on the object instead")
        return protocol
    if isinstance(protocol, str):
        return make_protocol(protocol, **params)
    raise ValueError(f"measure: protocol must be None, a name or a Protocol, got {type(protocol).__name__}")


def _calibration_alpha(cal, params: dict) -> dict:
    """The counter protocol's α and T_ref from a calibration file (``alpha_source = file``),
    unless the caller gave their own."""
    from .thermal.row import alpha_from_calibration

    alpha, t_ref = alpha_from_calibration(*cal)
    if alpha is not None and "alpha_w_per_c" not in params:
        params.update(alpha_w_per_c=alpha.alpha_w_per_c, alpha_uncertainty_w_per_c=alpha.uncertainty_w_per_c,
                      alpha_source="file")
    if t_ref is not None:
        params.setdefault("reference_temperature_c", t_ref)
    return params


def _runner(device):
    """``(runner, owned)`` for a Runner, a Device or a device kind."""
    from .devices.base import Device
    from .measuring.runner import Runner, make_runner

    if isinstance(device, Runner):
        return device, False
    if isinstance(device, (Device, str)):
        return make_runner(device), True
    raise ValueError(f"measure: device must be 'auto', 'nvml', 'simulated', a Device or a Runner, "
                     f"got {type(device).__name__}")


def measure(workload, *, protocol=None, device="auto", config: Mapping | str | None = None,
            simulated=None, calibration=None, allow_other_device: bool = False, **params):
    """Measure the energy, time and power of one execution of ``workload``.

    Parameters
    ----------
    workload : callable, Workload, str or list of str
        A Python callable that enqueues GPU work (called with no arguments;
        bind arguments with :class:`~powermodels.workloads.CallableWorkload`),
        a :class:`~powermodels.workloads.SourceKernel` or any other
        :class:`~powermodels.workloads.Workload`, a registry kernel name
        (``"sgemm"``), ``"module:function"``, or a program's argv list.
    protocol : str or Protocol, optional
        ``None`` (default): :func:`~powermodels.measuring.protocols.default_protocol`
        for the device (the energy-counter protocol where the GPU has the
        counter, else ``good_practice``). A name from
        :data:`~powermodels.measuring.protocols.PROTOCOLS` or a Protocol object.
    device : {"auto", "nvml", "simulated"}, Device or Runner, default="auto"
        Where to measure: "auto" picks the NVIDIA GPU when there is one,
        else the simulated GPU (which runs the workload's simulated twin).
    config : dict or str, optional
        Configuration of a tunable workload (``"p=v,..."`` or a dict); its
        default when None.
    simulated : SimulatedTwin, dict or SimulatedWorkload, optional
        The twin of a callable given bare (run on the simulated GPU).
    calibration : str or Path, optional
        A ``powermodels calibrate`` file: the row also gets ``corrected_power_w`` and
        ``corrected_energy_j`` at the file's reference clock and temperature
        (:func:`powermodels.workflows.calibration_apply.correct_row`; warns when it
        extrapolates). A file made on another GPU model is refused.
    allow_other_device : bool, default=False
        Use ``calibration`` even if it was made on another GPU model.
    **params
        Protocol parameters (e.g. ``trials=5`` for ``good_practice``). For the default
        ``counter`` protocol: ``reference_temperature_c`` (the row's ``energy_at_ref_j`` and
        ``power_at_ref_w`` refer to it; default the calibration's, else the learned α's),
        ``launch="as_called"`` (measure the call as your program makes it, host gaps
        included), ``learn_alpha=False`` (no first-time ≤ 10 s warm-up), ``alpha_w_per_c``
        (your own α); see :class:`~powermodels.measuring.protocols.counter.Counter` and
        ``docs/thermal.md``.

    Returns
    -------
    Measurement
        ``.row`` (a run-table row: ``energy_j`` per execution, ``time_s``,
        ``power_w``, conditions, uncertainty where the protocol gives one),
        ``.trace`` and ``.launches``; ``.run_table()`` as a DataFrame.

    Raises
    ------
    ValueError
        Naming the problem: a workload that cannot be converted, a bad
        configuration, a workload without a twin on the simulated GPU, a
        callable that raises (:class:`~powermodels.workloads.WorkloadError`).
    """
    from .workloads import CallableWorkload, as_workload

    if simulated is not None:
        if isinstance(workload, CallableWorkload) or not callable(workload):
            raise ValueError("measure: simulated= is for a bare callable; give a Workload its twin "
                             "with its own simulated= argument")
        workload = CallableWorkload(workload, simulated=simulated)
    w = as_workload(workload)
    full = w.validate_config(w.parse_config(config))  # before opening the GPU
    runner, owned = _runner(device)
    try:
        cal = None
        if calibration is not None:  # checked before measuring: a wrong file fails fast
            from .workflows.calibration_apply import load_for_device

            cal = load_for_device(calibration, runner.device_name, allow_other_device=allow_other_device)
        params = dict(params)
        if cal is not None and (protocol is None or protocol == "counter"):
            params = _calibration_alpha(cal, params)
        proto = _protocol(protocol, runner, params)
        m = proto.measure(runner, w, full)
        if cal is not None:
            from .workflows.calibration_apply import correct_row

            m.row = correct_row(m.row, *cal)
        return m
    finally:
        if owned:
            runner.close()
