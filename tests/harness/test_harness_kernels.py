"""Kernel correctness against NumPy/CuPy references, and the CUDA-event clock (needs a GPU)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from powermodels import workloads

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("config", [{}, {"block_size_x": 128, "nr_outer": 8, "nr_inner": 256}])
def test_fp32_matches_closed_form(config):
    assert workloads.prepare("fp32", config).check() < 1e-4


def test_sgemm_configs_match_float64_matmul():
    space = workloads.search_space("sgemm")
    for config in [workloads.KERNELS["sgemm"].default, *random.Random(0).sample(space, 12)]:
        err = workloads.prepare("sgemm", config).check()
        assert err < 1e-4, (workloads.config_id("sgemm", config), err)


@pytest.mark.parametrize("kernel", ["stream_copy", "stream_triad"])
@pytest.mark.parametrize("vector_width", [1, 2, 4])
def test_stream_matches_cupy(kernel, vector_width):
    assert workloads.prepare(kernel, {"vector_width": vector_width}).check() < 1e-6


@pytest.mark.parametrize("amplitude", [0.25, 1.0])
def test_square_wave_matches_closed_form(amplitude):
    assert workloads.square_wave_kernel(amplitude, 5000).check() < 1e-4


def test_event_clock_bounds_the_offset():
    from powermodels.devices.event_clock import EventClock

    clock = EventClock()
    est = clock.calibrate(20)
    assert np.isfinite(est.offset_s) and 0 <= est.uncertainty_s < 1e-3
