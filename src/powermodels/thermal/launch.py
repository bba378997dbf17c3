"""How a row's launches were issued, and whether the host's gaps dominate its time.

For a kernel of a few microseconds the launch mode changes the answer: on the
lent H100 a ~6 µs CuPy elementwise call measured graph-batched (device-side,
back to back) cost 1.57 mJ and 5.8 µs, the same call as a program makes it
2.11 mJ and 10.6 µs (the GPU idles in the host's gaps and those are charged
to the call). Neither is wrong; the row says which it is:

``graph``
    Launches captured into CUDA graphs: the GPU's own cost of the work, no
    host in between. Report this for the kernel's energy (tuning, models).
``back_to_back``
    One host call per launch, queued ahead of the GPU: the same as ``graph``
    for kernels longer than the host's launch overhead (tens of µs and up).
``as_called``
    The call made the way the user's program makes it (``--launch as-called``):
    what the program pays per call, host gaps included. Report this for the
    energy a program spends.

``launch_bound`` is set when the host's gaps take more than
``gap_share`` (20 %) of the time per launch: the GPU waited for the host, so
the energy per launch depends on the host as much as on the kernel.
"""

from __future__ import annotations

import math

from .. import schema

__all__ = ["GAP_SHARE", "check_launch_mode", "launch_bound", "launch_mode"]

#: Share of the time per launch spent in host gaps above which a row is ``launch_bound``.
GAP_SHARE = 0.2


def check_launch_mode(value: str) -> str:
    """``value`` as a launch mode (``as-called`` spelled either way), or a one-line ValueError."""
    mode = str(value).replace("-", "_")
    if mode not in schema.LAUNCH_MODES:
        raise ValueError(f"launch mode: expected one of {', '.join(m.replace('_', '-') for m in schema.LAUNCH_MODES)}, "
                         f"got {value!r}")
    return mode


def launch_mode(batch: int, *, as_called: bool = False) -> str:
    """The mode of launches issued in graphs of ``batch`` (1: one host call each), or as called."""
    if as_called:
        return "as_called"
    return "graph" if int(batch) > 1 else "back_to_back"


def launch_bound(time_per_launch_s: float, device_time_s: float, *, gap_share: float = GAP_SHARE) -> bool:
    """Whether host gaps exceed ``gap_share`` of ``time_per_launch_s``.

    Parameters
    ----------
    time_per_launch_s : float
        The row's time per launch (span of the measured launches / their number).
    device_time_s : float
        The kernel's own time per launch on the GPU (graph-batched, or an
        isolated event-timed launch).
    """
    if not (math.isfinite(time_per_launch_s) and math.isfinite(device_time_s)) or time_per_launch_s <= 0:
        return False
    return bool(1.0 - device_time_s / time_per_launch_s > gap_share)
