"""SASS tools and the microbenchmark registry: ncu CSV parsing (captured H200 sample),
cuobjdump parsing, and (with nvcc + cuobjdump) each microbenchmark's target opcodes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from powermodels.microbench import sass
from powermodels.microbench.catalog import MICROBENCHMARKS, microbenchmark

SAMPLE = Path(__file__).parent / "data" / "ncu_sample.csv"

SASS_TEXT = """
	code for sm_90
		Function : mb_demo
	.headerflags	@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                     /* 0x00000a00ff017b82 */
                                                                              /* 0x000fe20000000800 */
        /*0010*/                   FADD R5, R4.reuse, 0.25 ;                  /* 0x3e80000004057421 */
        /*0020*/              @!P0 BRA 0x2a70 ;                               /* 0x0000002800548947 */
        /*0030*/               @P1 LDG.E.128.SYS R4, desc[UR4][R2.64] ;       /* 0x0000000402047981 */
        /*0040*/                   FADD R6, R4, 0.5 ;                         /* 0x3f00000004067421 */
        /*0050*/                   EXIT ;                                     /* 0x000000000000794d */
		Function : mb_other
        /*0000*/                   NANOSLEEP 0x3e8 ;                          /* 0x0000 */
"""


def test_parse_sass_counts_opcodes_with_modifiers():
    functions = sass.parse_sass(SASS_TEXT)
    assert set(functions) == {"mb_demo", "mb_other"}
    counts = sass.count_static_opcodes(SASS_TEXT, "mb_demo")
    assert counts == {"LDC": 1, "FADD": 2, "BRA": 1, "LDG.E.128.SYS": 1, "EXIT": 1}
    assert sass.count_static_opcodes(SASS_TEXT)["NANOSLEEP"] == 1
    with pytest.raises(ValueError, match="mb_missing"):
        sass.count_static_opcodes(SASS_TEXT, "mb_missing")


def test_parse_captured_ncu_csv():
    launches = sass.parse_ncu_csv(SAMPLE.read_text())
    assert [x["kernel"] for x in launches] == ["pm_marker", "mb_fadd", "pm_marker",
                                               "pm_marker", "mb_fadd", "pm_marker"]
    assert [x["id"] for x in launches] == list(range(6))
    fadd8, fadd16 = launches[1], launches[4]
    # "9,115,392 (FADD: 8,701,440; ...)": thousands separators, instances add up
    assert fadd8["opcodes"]["FADD"] == 8_701_440
    assert sum(fadd8["opcodes"].values()) == 9_115_392
    assert fadd16["opcodes"]["FADD"] == 2 * fadd8["opcodes"]["FADD"] - 50_688
    assert fadd8["metrics"]["gpu__time_duration.sum"] == pytest.approx(0.011136)
    assert fadd8["metrics"]["l1tex__t_sector_hit_rate.pct"] == pytest.approx(44.771635)
    assert launches[2]["block"] == "(2, 1, 1)"
    # without the opcode metric the launches still parse
    assert sass.parse_ncu_csv(SAMPLE.read_text(), None)[1]["opcodes"] == {}


def test_ncu_parse_errors():
    with pytest.raises(ValueError, match="add to"):
        sass.parse_ncu_instances("10 (FADD: 3; FMUL: 3)")
    with pytest.raises(ValueError, match="cannot parse"):
        sass.parse_ncu_instances("garbage (x)")
    assert sass.parse_ncu_instances("7") == {}
    with pytest.raises(ValueError, match="Kernel Name"):
        sass.parse_ncu_csv('"ID","Other"\n"0","x"\n')
    assert sass.parse_ncu_csv("==PROF== nothing profiled\n") == []


def test_registry_is_consistent():
    assert len(MICROBENCHMARKS) >= 30
    components = {m.component for m in MICROBENCHMARKS.values()}
    assert {"FP32", "FP64", "FP16", "SFU", "INT", "CONV", "CONTROL", "WARP", "MEM-shared",
            "MEM-global", "TENSOR", "STATIC"} <= components
    levels = {m.level for m in MICROBENCHMARKS.values() if m.component == "MEM-global"}
    assert levels == {"L1", "L2", "DRAM"}
    for m in MICROBENCHMARKS.values():
        assert m.path.is_file()
        assert (m.mask + 1) & m.mask == 0  # power of two minus one
        assert m.grid(132) == 132 * m.blocks_per_sm
        assert m.targets
    with pytest.raises(ValueError, match="unknown microbenchmark"):
        microbenchmark("nope")
    with pytest.raises(ValueError, match="sm_count"):
        microbenchmark("fadd").grid(0)


_HAVE_TOOLS = sass.find_tool("nvcc") is not None and sass.find_tool("cuobjdump") is not None \
    and sass.find_tool("nvdisasm") is not None


@pytest.fixture(scope="module")
def compiled_sass(tmp_path_factory):
    """name of source → SASS text, compiled in parallel once for the module."""
    out = tmp_path_factory.mktemp("cubins")
    sources = sorted({m.source for m in MICROBENCHMARKS.values()})

    def build(source):
        path = MICROBENCHMARKS[next(n for n, m in MICROBENCHMARKS.items()
                                    if m.source == source)].path
        return source, sass.disassemble(sass.compile_cubin(path, out / f"{source}.cubin"))

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(build, sources))


@pytest.mark.skipif(not _HAVE_TOOLS, reason="needs nvcc, cuobjdump and nvdisasm")
@pytest.mark.parametrize("name", list(MICROBENCHMARKS))
def test_microbenchmark_sass_contains_its_targets(name, compiled_sass):
    m = MICROBENCHMARKS[name]
    ops = sass.count_static_opcodes(compiled_sass[m.source], m.kernel)
    missing = [t for t in m.targets if t not in ops]
    assert not missing, f"{name}: {missing} not in SASS of {m.kernel}: {ops.most_common(8)}"
    # the first target dominates the kernel's static code (loop body unrolled)
    assert ops[m.targets[0]] >= 8 or name in ("bra", "nanosleep")
