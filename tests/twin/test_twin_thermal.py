"""The thermal network's fit: the counter's intervals drive it exactly, gaps included; boards share poles."""

import numpy as np
import pytest

from powermodels.thermal.foster import fit_foster, fit_foster_segments, simulate_foster

POLES = ((0.04, 0.3), (0.02, 120.0))


def gapped(ambient_c: float, start_power: float = 140.0):
    """25 s loads at 650 W and 28 s idles at 140 W: a 10 Hz counter during the loads, one interval per idle.

    The truth is simulated on a 10 ms grid; what is returned is what a trace with gaps gives (the
    counter's mean power over each interval, the temperature at its end).
    """
    fine_t = np.arange(0.0, 4 * 53.0, 0.01)
    fine_p = np.where((fine_t % 53.0) < 25.0, 650.0, 140.0)
    # the power over the interval ending at each fine time
    fine_p = np.r_[fine_p[0], fine_p[:-1]]
    truth = simulate_foster(fine_t, fine_p, POLES, ambient_c, start_power=start_power)
    coarse = [0]
    for i in range(1, fine_t.size):
        in_load = (fine_t[i] % 53.0) < 25.0
        if in_load and fine_t[i] - fine_t[coarse[-1]] >= 0.1 - 1e-9:
            coarse.append(i)
        elif not in_load and (fine_t[i] % 53.0) >= 53.0 - 0.01 - 1e-9:
            coarse.append(i)  # the idle's end: one counter interval over the whole gap
    idx = np.array(coarse)
    energy = np.r_[0.0, np.cumsum(fine_p[1:] * np.diff(fine_t))]
    t = fine_t[idx]
    p = np.r_[fine_p[0], np.diff(energy[idx]) / np.diff(t)]
    return t, p, truth[idx]


def test_each_interval_is_driven_by_its_own_power_across_a_gap():
    t, p, truth = gapped(40.0)
    assert np.diff(t).max() > 25.0  # the idles are single intervals
    model = simulate_foster(t, p, POLES, 40.0, start_power=140.0)
    # after a 28 s idle the die is at its idle level plus what the slow pole kept, not at the load's
    assert np.max(np.abs(model - truth)) < 0.15  # an interval mixing idle and load: ~0.08 °C


def test_boards_share_poles_and_keep_their_own_ambient():
    segments = []
    for ambient in (30.0, 41.0):
        t, p, temp = gapped(ambient)
        segments.append((t, p, np.round(temp, 2), None))
    fit = fit_foster_segments(segments, n_poles=2, grid=9, bands=((0.03, 1.0), (8.0, 300.0)))
    assert fit["ambient_c"] == pytest.approx([30.0, 41.0], abs=0.5)
    slow = max(fit["poles"], key=lambda pole: pole[1])
    assert slow[0] == pytest.approx(0.02, rel=0.2) and 60.0 < slow[1] < 250.0
    # one segment alone: the single-trace fit returns the same numbers
    one = fit_foster(*segments[0][:3], n_poles=2, grid=9, bands=((0.03, 1.0), (8.0, 300.0)))
    alone = fit_foster_segments(segments[:1], n_poles=2, grid=9, bands=((0.03, 1.0), (8.0, 300.0)))
    assert one["poles"] == alone["poles"] and one["ambient_c"] == alone["ambient_c"][0]
