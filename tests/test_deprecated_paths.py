"""The old ``powermodels.harness.*`` paths (issue 23): one release of DeprecationWarnings, same objects."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from powermodels.harness import MOVED

#: old modules that re-export (not alias): they kept names that moved elsewhere
REEXPORTS = {"powermodels.harness.campaign", "powermodels.harness.workloads",
             "powermodels.harness.workloads.twins", "powermodels.harness.workloads.registry_gpu"}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_gives_the_new_module(old):
    parent = old.rpartition(".")[0]
    code = (f"import warnings\nwith warnings.catch_warnings():\n    warnings.simplefilter('ignore')\n"
            f"    import {parent}\n"  # its own warning (harness.workloads) is not the one tested here
            f"warnings.simplefilter('error', DeprecationWarning)\n"
            f"try:\n    import {old}\nexcept DeprecationWarning as w:\n    print('warned:', w)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith(f"warned: {old} moved to {MOVED[old]}"), out
    _forget(old)
    with pytest.warns(DeprecationWarning):
        module = importlib.import_module(old)
    new = importlib.import_module(MOVED[old])
    if old in REEXPORTS:  # every old name is there; those that did not change are the new objects
        for name in module.__all__:
            assert hasattr(module, name), name
            if name != "run_campaign":  # harness.campaign's keeps cluster= (below)
                assert getattr(module, name) is getattr(new, name, None) or old.endswith(("twins", "registry_gpu"))
    else:
        assert module is new


def _forget(*old):
    """Drop the old modules from ``sys.modules`` so that importing them runs (and warns) again."""
    for name in old:
        sys.modules.pop(name, None)


def test_old_names_that_moved_between_modules_are_kept():
    _forget("powermodels.harness.workloads.registry_gpu", "powermodels.harness.workloads.twins")
    with pytest.warns(DeprecationWarning):
        from powermodels.harness.workloads.registry_gpu import prepare, square_wave_kernel  # noqa: F401
        from powermodels.harness.workloads.twins import simulated_workload, workload_cost
    from powermodels import workloads

    assert workload_cost("fp32") == workloads.workload_cost("fp32")
    assert simulated_workload("sgemm") == workloads.simulated_workload("sgemm")


def test_old_run_campaign_keeps_cluster_with_a_warning(tmp_path):
    _forget("powermodels.harness.campaign")
    with pytest.warns(DeprecationWarning):
        from powermodels.harness.campaign import run_campaign
    from powermodels.measuring.runner import make_runner

    spec = {"kernels": {"fp32": "default"}, "protocol": "naive", "repeats": 1, "device": "simulated"}
    with pytest.raises(ValueError, match="per_gpu needs a cluster"):
        run_campaign(spec, tmp_path / "a", per_gpu=True, progress=False)
    with pytest.warns(DeprecationWarning, match="executor=DaskExecutor"), \
            pytest.raises(ValueError, match="not both"):
        run_campaign(spec, tmp_path / "b", cluster="local", runner=make_runner("simulated"), progress=False)
    assert len(run_campaign(spec, tmp_path / "c", progress=False)) == 1  # no cluster: serial, no warning


def test_run_launches_takes_the_old_kernel_keyword_with_a_warning():
    from powermodels.measuring.protocols.launches import run_launches
    from powermodels.measuring.runner import make_runner

    with make_runner("simulated", device_kwargs={"seed": 0}) as runner:
        with pytest.warns(DeprecationWarning, match=r"run_launches\(kernel=\.\.\.\) is deprecated: use workload="):
            old = run_launches(runner, kernel="fp32", config=None, launches=2)
        new = run_launches(runner, workload="fp32", config=None, launches=2)
        assert old.shape == new.shape == (2, 2)
        with pytest.raises(TypeError, match="both kernel="):
            run_launches(runner, kernel="fp32", workload="fp32", config=None, launches=1)


def test_the_renamed_keywords_example_runs():
    import doctest

    import powermodels.deprecation

    result = doctest.testmod(powermodels.deprecation)
    assert result.attempted > 0 and result.failed == 0


def test_a_script_importing_an_old_path_sees_the_warning_at_its_own_line(tmp_path):
    # Python shows a DeprecationWarning by default only when it is attributed to __main__: the
    # warning must point at the importing line, not past the top of the stack (it said "sys:1")
    script = tmp_path / "old_paths.py"
    script.write_text("import os\nimport powermodels.harness.runner\n", encoding="utf-8")
    err = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stderr
    assert f"{script}:2: DeprecationWarning: powermodels.harness.runner moved to powermodels.measuring.runner" in err


@pytest.mark.parametrize("job", ["calibration", "tables", "selection", "transfer", "diagnostics"])
def test_old_instruction_workflow_paths_warn_and_give_the_new_module(job):
    """``powermodels.workflows.instruction_*`` moved to ``powermodels.instruction_energy``: same module object."""
    import importlib
    import sys

    old, new = f"powermodels.workflows.instruction_{job}", f"powermodels.instruction_energy.{job}"
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


@pytest.mark.parametrize("old", ["powermodels.workflows.instruction_tables", "powermodels.workflows.clock_power",
                                 "powermodels.harness.runner", "powermodels.harness.workloads.registry"])
def test_a_script_importing_an_old_path_sees_the_warning_at_its_import_line(old):
    """Python shows DeprecationWarnings by default only when attributed to ``__main__``: the warning
    must point at the script's ``import`` line, through importlib and the alias helpers."""
    err = subprocess.run([sys.executable, "-c", f"import {old}"], capture_output=True, text=True,
                         check=True).stderr
    assert f"<string>:1: DeprecationWarning: {old} moved to " in err, err


@pytest.mark.parametrize("job", ["natural_recording", "launch_clocks", "counter_windows", "clock_windows",
                                 "ladder_windows", "clock_power"])
def test_old_natural_dvfs_paths_warn_and_give_the_new_module(job):
    """The natural-DVFS chain moved from ``powermodels.workflows.*`` to ``powermodels.natural_dvfs``:
    the old path warns and is the new module itself (same classes, same functions)."""
    old, new = f"powermodels.workflows.{job}", f"powermodels.natural_dvfs.{job}"
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_old_natural_dvfs_names_are_the_new_objects():
    """``from powermodels.workflows.natural_recording import Ladder`` (the old spelling) gives the new class."""
    _forget("powermodels.workflows.natural_recording", "powermodels.workflows.clock_power")
    with pytest.warns(DeprecationWarning):
        from powermodels.workflows.clock_power import power_at_heldout_clocks
        from powermodels.workflows.natural_recording import Ladder, record_natural_dvfs
    from powermodels.natural_dvfs import clock_power, natural_recording

    assert Ladder is natural_recording.Ladder
    assert record_natural_dvfs is natural_recording.record_natural_dvfs
    assert power_at_heldout_clocks is clock_power.power_at_heldout_clocks


def test_the_twins_foster_fit_moved_to_the_thermal_package():
    """``powermodels.twin.fit_thermal`` became ``powermodels.thermal.foster`` (session 28: the twin package had grown
    past 4 000 lines): the old path warns and is the new module itself."""
    old, new = "powermodels.twin.fit_thermal", "powermodels.thermal.foster"
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    err = subprocess.run([sys.executable, "-c", f"import {old}"], capture_output=True, text=True, check=True).stderr
    assert f"<string>:1: DeprecationWarning: {old} moved to " in err, err
