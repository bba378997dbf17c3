"""PTX (DSO Table II) and ncu runtime (Table I) features (harness/profiling.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from powermodels import schema
from powermodels.microbench.profiling import (
    NCU_METRICS,
    PTX_DATA_TYPES,
    PTX_STATE_SPACES,
    compile_ptx,
    count_ptx,
    ncu_command,
    parse_ncu_csv,
    ptx_features,
    read_nv_dvfs_benchmark,
    split_ptx_entries,
)

REPO = Path(__file__).resolve().parents[2]

# nvcc 13.0 -arch=sm_90 -ptx output for a saxpy through shared memory (trimmed header).
PTX = """
.version 9.0
.target sm_90
.address_size 64

.visible .entry saxpy(
	.param .f32 saxpy_param_0,
	.param .u64 saxpy_param_1
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<6>;
	.reg .b32 	%r<9>;
	.shared .align 4 .b8 _ZZ5saxpyE1s[1024];

	ld.param.f32 	%f1, [saxpy_param_0];
	mov.u32 	%r1, %tid.x;
	mad.lo.s32 	%r2, %r4, %r5, %r1;   // comment: ld.global ignored
	setp.ge.s32 	%p1, %r2, %r3;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd3, %rd2;
	ld.global.f32 	%f2, [%rd6];
	st.shared.f32 	[%r8], %f2;
	bar.sync 	0;
	fma.rn.f32 	%f5, %f3, %f1, %f4;
	add.cc.s32 	%r9, %r1, %r2;
$L__BB0_2:
	ret;
}
"""


def test_count_ptx_categories():
    c = count_ptx(PTX)
    assert c["instruction"] == {"ld": 2, "mov": 1, "mad": 1, "setp": 1, "bra": 1, "cvta": 1,
                                "st": 1, "bar": 1, "fma": 1, "add.cc": 1, "ret": 1}
    assert c["type"] == {"f32": 4, "u32": 1, "s32": 3, "u64": 1}
    # 3 .reg declarations, 1 .shared declaration + st.shared, %tid.x, ld.param, cvta.to.global + ld.global
    assert c["space"] == {"reg": 3, "shared": 2, "sreg": 1, "param": 1, "global": 2}


def test_ptx_features_normalised_per_category():
    f = ptx_features(PTX)
    for prefix in (schema.PTX_INSTRUCTION_PREFIX, schema.PTX_TYPE_PREFIX, schema.PTX_SPACE_PREFIX):
        block = f[[c for c in f.index if c.startswith(prefix)]]
        assert block.sum() == pytest.approx(1.0)
    assert len([c for c in f.index if c.startswith(schema.PTX_TYPE_PREFIX)]) == len(PTX_DATA_TYPES) == 17
    assert len([c for c in f.index if c.startswith(schema.PTX_SPACE_PREFIX)]) == len(PTX_STATE_SPACES) == 8
    assert f[schema.PTX_INSTRUCTION_PREFIX + "ld"] == pytest.approx(2 / 12)


def test_split_ptx_entries():
    two = PTX + PTX.replace("saxpy", "other")
    parts = split_ptx_entries(two)
    assert list(parts) == ["saxpy", "other"]
    assert count_ptx(parts["other"])["instruction"] == count_ptx(PTX)["instruction"]
    with pytest.raises(ValueError, match="entry"):
        split_ptx_entries("ld.global.f32 %f1, [%rd1];")


def test_ptx_features_refuse_non_ptx():
    with pytest.raises(ValueError, match="no instructions"):
        ptx_features("// nothing here\n.version 9.0\n")
    with pytest.raises(ValueError, match="ptx"):
        count_ptx(None)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_compile_and_featurise_real_kernels(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(
        'extern "C" __global__ void dadd(const double* a, double* b, int n) {\n'
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) b[i] += a[i] * 2.0;\n}\n"
    )
    f = ptx_features(compile_ptx(src, arch="sm_90"))
    assert f[schema.PTX_TYPE_PREFIX + "f64"] > 0
    assert f[schema.PTX_SPACE_PREFIX + "global"] > 0
    for cu in sorted((REPO / "kernels").glob("*.cu")):  # whatever kernels the project ships
        feats = ptx_features(compile_ptx(cu, arch="sm_90"))
        assert np.isfinite(feats.to_numpy()).all()


def test_ncu_command_never_controls_clocks():
    cmd = ncu_command(["python", "run.py"], kernel_regex="fp32")
    assert cmd[:3] == ["ncu", "--clock-control", "none"]
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert all(m in metrics for cands in NCU_METRICS.values() for m in cands)
    with pytest.raises(ValueError, match="program"):
        ncu_command([])


# The layout of `ncu --csv --metrics ...` (Nsight Compute 2023+): one row per kernel
# launch and metric; log lines and program output interleave.
NCU_CSV = """==PROF== Connected to process 4242 (/usr/bin/python3)
==PROF== Profiling "fp32_fma": 0%....50%....100% - 1 pass
program output line
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3","127.0.0.1","fp32_fma","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Command line profiler metrics","dram__cycles_active.avg.pct_of_peak_sustained_elapsed","%","0.52"
"0","4242","python3","127.0.0.1","fp32_fma","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Command line profiler metrics","sm__cycles_active.avg.pct_of_peak_sustained_elapsed","%","98.10"
"0","4242","python3","127.0.0.1","fp32_fma","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Command line profiler metrics","sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed","%","87.00"
"0","4242","python3","127.0.0.1","fp32_fma","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_elapsed","%","45.00"
"1","4242","python3","127.0.0.1","fp32_fma","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Command line profiler metrics","sm__cycles_active.avg.pct_of_peak_sustained_elapsed","%","97.90"
"1","4242","python3","127.0.0.1","fp32_fma","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Command line profiler metrics","sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed","%","89.00"
"2","4242","python3","127.0.0.1","stream_copy","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__cycles_active.avg.pct_of_peak_sustained_elapsed","%","1,012.5"
"2","4242","python3","127.0.0.1","stream_copy","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","91.0"
==PROF== Disconnected from process 4242
"""


def test_parse_ncu_csv():
    t = parse_ncu_csv(NCU_CSV)
    assert list(t.columns) == list(schema.RUNTIME_FEATURES)
    assert list(t.index) == ["fp32_fma", "stream_copy"]
    assert t.loc["fp32_fma", schema.FEAT_SM_ACTIVE] == pytest.approx(0.98)  # mean of 2 launches
    assert t.loc["fp32_fma", schema.FEAT_FP32_ACTIVE] == pytest.approx(0.88)
    assert t.loc["fp32_fma", schema.FEAT_SM_OCCUPANCY] == pytest.approx(0.45)
    # first listed metric wins over the fallback; thousands separators parse
    assert t.loc["stream_copy", schema.FEAT_DRAM_ACTIVE] == pytest.approx(10.125)
    assert np.isnan(t.loc["stream_copy", schema.FEAT_TENSOR_ACTIVE])


def test_parse_ncu_csv_errors():
    with pytest.raises(ValueError, match="no CSV header"):
        parse_ncu_csv("==PROF== nothing profiled\n")


@pytest.mark.shared_data
def test_read_nv_dvfs_benchmark(shared_data):
    t = read_nv_dvfs_benchmark(shared_data / "nv-dvfs-benchmark-rtx8000" / "rtx8000-dvfs-real.csv")
    assert len(t) == 200 and t[schema.KERNEL].nunique() == 20
    assert t[schema.TIME_S].max() < 1.0  # ms converted to s
    for prefix, n in ((schema.PTX_INSTRUCTION_PREFIX, 101), (schema.PTX_TYPE_PREFIX, 17),
                      (schema.PTX_SPACE_PREFIX, 8)):
        block = t[[c for c in t.columns if c.startswith(prefix)]]
        assert block.shape[1] == n
        np.testing.assert_allclose(block.sum(axis=1), 1.0)
    assert set(schema.RUNTIME_FEATURES) - set(t.columns) == {schema.FEAT_INT_ACTIVE}
