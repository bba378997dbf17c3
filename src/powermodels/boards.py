"""Board-aware results: one configuration measured on several GPUs of the same model.

Two identical boards do not read the same energy. On the 2 × H200 run of
2026-11-24 (``datasets/h200x2/``) the same SGEMM configurations at the same
1,980 MHz took the same time (±0.1 %) but 2.5–3.9 % more energy on one board
than on the other. A campaign spread over several GPUs mixes the boards'
scales in one run table; these functions say by how much and remove it.

* :func:`per_board` — each configuration's median energy on each board, with
  the median's 1-σ uncertainty (the repeats' scatter, or the protocol's own
  row uncertainty where larger);
* :func:`board_spread` — for configurations measured on more than one board,
  the board-to-board spread and its uncertainty, with a
  :class:`BoardSpreadWarning` when the spread exceeds ``k`` times the
  uncertainty (the protocol cannot explain it);
* :func:`fit_board_normalisation` — a gain (and optionally a power offset)
  per board mapping it onto a reference board, fitted on a common probe
  (configurations every board ran), as Wattchmen §6 maps one system's
  per-instruction energies onto another's with a linear relation fitted on a
  subset; :class:`BoardNormalisation` is recorded in campaign metadata
  (:meth:`BoardNormalisation.as_dict`) and applied to run tables;
* :func:`leave_one_config_out` — the residual of the normalisation on
  configurations *not* used to fit it;
* :func:`within_board_temperature_slope` and :func:`temperature_adjusted` —
  how much of the spread the boards' temperature difference explains.

The boards are told apart by ``device_uuid``; a configuration is the row's
kernel, config, protocol and requested clocks. Nothing here touches a GPU.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import schema

__all__ = [
    "MODELS",
    "BoardNormalisation",
    "BoardSpreadWarning",
    "board_spread",
    "configuration_columns",
    "fit_board_normalisation",
    "leave_one_config_out",
    "per_board",
    "temperature_adjusted",
    "within_board_temperature_slope",
]

# the standard error of a median of n normal samples is ~sqrt(pi/2) x that of their mean
_MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)
#: Normalisation models: a gain per board, or a gain and a power offset.
MODELS = ("scale", "affine")


class BoardSpreadWarning(UserWarning):
    """Configurations differ between boards by more than the measurement can explain."""


def configuration_columns(runs: pd.DataFrame) -> list[str]:
    """The columns naming a configuration: kernel, config, and protocol/requested clocks where present."""
    missing = [c for c in (schema.KERNEL, schema.CONFIG, schema.DEVICE_UUID, schema.ENERGY_J) if c not in runs]
    if missing:
        raise ValueError(f"boards: the run table lacks {missing}")
    optional = (schema.PROTOCOL, schema.SM_CLOCK_REQUESTED_MHZ, schema.MEM_CLOCK_REQUESTED_MHZ,
                schema.POWER_LIMIT_W)
    return [schema.KERNEL, schema.CONFIG, *(c for c in optional if c in runs)]


def per_board(runs: pd.DataFrame, energy: str = schema.ENERGY_J) -> pd.DataFrame:
    """Median energy, power, time and temperature of every configuration on every board.

    Parameters
    ----------
    runs : DataFrame
        A run table with ``device_uuid``.
    energy : str, default "energy_j"
        The energy column to summarise (e.g. ``normalised_energy_j``).

    Returns
    -------
    DataFrame
        One row per (configuration, board): the configuration columns,
        ``device_uuid``, ``n_samples`` (repeats), ``energy_j`` (median),
        ``energy_uncertainty_j`` (1-σ of the median: √(π/2)·s/√n from the
        repeats' standard deviation s, or the rows' own uncertainty/√n where
        larger; NaN for a single run without one), and the medians of
        ``power_w``, ``time_s`` and ``temperature_c`` where present.
    """
    keys = configuration_columns(runs)
    if energy not in runs:
        raise ValueError(f"boards: the run table lacks {energy!r}")
    groups = runs.groupby([*keys, schema.DEVICE_UUID], dropna=False, sort=True)
    out = groups[energy].agg(["size", "median", "std"]).rename(
        columns={"size": schema.N_SAMPLES, "median": schema.ENERGY_J})
    n = out[schema.N_SAMPLES].to_numpy(float)
    scatter = _MEDIAN_EFFICIENCY * out.pop("std").to_numpy(float) / np.sqrt(n)
    if schema.ENERGY_UNCERTAINTY_J in runs and energy == schema.ENERGY_J:
        own = groups[schema.ENERGY_UNCERTAINTY_J].median().to_numpy(float) / np.sqrt(n)
        scatter = np.fmax(scatter, own)
    out[schema.ENERGY_UNCERTAINTY_J] = scatter
    for column in (schema.POWER_W, schema.TIME_S, schema.TEMPERATURE_C):
        if column in runs:
            out[column] = groups[column].median()
    return out.reset_index()


def board_spread(runs: pd.DataFrame, *, k: float = 2.0, energy: str = schema.ENERGY_J,
                 warn: bool = True) -> pd.DataFrame:
    """The board-to-board spread of every configuration measured on more than one board.

    Parameters
    ----------
    runs : DataFrame
        A run table with ``device_uuid``.
    k : float, default=2
        A spread larger than ``k`` times its 1-σ uncertainty is significant.
    energy : str, default "energy_j"
        The energy column (``normalised_energy_j`` shows what a normalisation left).
    warn : bool, default=True
        Emit one :class:`BoardSpreadWarning` naming the significant configurations.

    Returns
    -------
    DataFrame
        One row per configuration on ≥ 2 boards: ``n_boards``, ``energy_j``
        (mean of the boards' medians), ``board_spread_pct`` ((max − min) / mean),
        ``board_spread_uncertainty_pct`` (from the two extreme boards'
        median uncertainties), ``board_spread_significant`` and
        ``board_temperature_spread_c`` (temperature of the highest-energy
        board minus that of the lowest). Empty when no configuration ran on
        two boards.
    """
    if not (isinstance(k, (int, float)) and k > 0):
        raise ValueError(f"board_spread: k must be > 0, got {k!r}")
    table = per_board(runs, energy)
    keys = configuration_columns(runs)
    rows = []
    for key, group in table.groupby(keys, dropna=False, sort=True):
        if len(group) < 2:
            continue
        hi, lo = group.loc[group[schema.ENERGY_J].idxmax()], group.loc[group[schema.ENERGY_J].idxmin()]
        mean = float(group[schema.ENERGY_J].mean())
        spread = 100.0 * (hi[schema.ENERGY_J] - lo[schema.ENERGY_J]) / mean
        sigma = 100.0 * math.hypot(hi[schema.ENERGY_UNCERTAINTY_J], lo[schema.ENERGY_UNCERTAINTY_J]) / mean
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        row.update({schema.N_BOARDS: len(group), schema.ENERGY_J: mean, schema.BOARD_SPREAD_PCT: spread,
                    schema.BOARD_SPREAD_UNCERTAINTY_PCT: sigma,
                    schema.BOARD_SPREAD_SIGNIFICANT: bool(spread > k * sigma)})
        if schema.TEMPERATURE_C in group:
            row[schema.BOARD_TEMPERATURE_SPREAD_C] = float(hi[schema.TEMPERATURE_C] - lo[schema.TEMPERATURE_C])
        rows.append(row)
    columns = [*keys, schema.N_BOARDS, schema.ENERGY_J, schema.BOARD_SPREAD_PCT,
               schema.BOARD_SPREAD_UNCERTAINTY_PCT, schema.BOARD_SPREAD_SIGNIFICANT]
    out = pd.DataFrame(rows, columns=[*columns, *([schema.BOARD_TEMPERATURE_SPREAD_C]
                                                  if schema.TEMPERATURE_C in table else [])])
    significant = out[out[schema.BOARD_SPREAD_SIGNIFICANT]] if len(out) else out
    if warn and len(significant):
        worst = significant.loc[significant[schema.BOARD_SPREAD_PCT].idxmax()]
        warnings.warn(
            f"{len(significant)} of {len(out)} configurations measured on several boards differ by more than "
            f"{k:g}σ of their measurement: up to {worst[schema.BOARD_SPREAD_PCT]:.2f} % "
            f"(σ {worst[schema.BOARD_SPREAD_UNCERTAINTY_PCT]:.2f} %, {worst[schema.CONFIG]}); the boards' "
            "energies are on different scales (powermodels.boards.fit_board_normalisation)",
            BoardSpreadWarning, stacklevel=2)
    return out


@dataclass(frozen=True)
class BoardNormalisation:
    """A per-board map onto a reference board: ``P_board = gain · P_reference + offset_w``.

    Energy on the reference board's scale is ``(E − offset_w · time_s) / gain``
    (the boards run a configuration in the same time at the same clock). The
    ``scale`` model has ``offset_w = 0``: a gain error of the board's sensor,
    or any difference proportional to the energy; ``affine`` adds a constant
    power, as a difference in static (leakage) power would be.

    Attributes
    ----------
    model : {"scale", "affine"}
    reference : str
        UUID of the reference board (gain 1, offset 0).
    gain, offset_w : dict of str to float
        Per board UUID.
    probe : tuple of str
        The configurations (``config`` values) the factors were fitted on.
    probe_boards : dict of str to int
        Probe configurations each board shared with the reference.
    """

    model: str
    reference: str
    gain: dict
    offset_w: dict
    probe: tuple = ()
    probe_boards: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """JSON-ready, for a campaign's metadata."""
        return {"model": self.model, "reference": self.reference,
                "gain": {k: float(v) for k, v in self.gain.items()},
                "offset_w": {k: float(v) for k, v in self.offset_w.items()},
                "probe": list(self.probe), "probe_boards": dict(self.probe_boards)}

    @classmethod
    def from_dict(cls, data: dict) -> BoardNormalisation:
        """The inverse of :meth:`as_dict`."""
        model = data.get("model")
        if model not in MODELS:
            raise ValueError(f"board normalisation: model must be one of {MODELS}, got {model!r}")
        return cls(model, str(data["reference"]), dict(data["gain"]), dict(data["offset_w"]),
                   tuple(data.get("probe", ())), dict(data.get("probe_boards", {})))

    def apply(self, runs: pd.DataFrame) -> pd.DataFrame:
        """``runs`` with ``normalised_energy_j`` and ``reference_board`` added (a copy).

        Raises
        ------
        ValueError
            A board the normalisation has no factor for (named).
        """
        unknown = sorted(set(runs[schema.DEVICE_UUID]) - set(self.gain))
        if unknown:
            raise ValueError(f"board normalisation: no factor for board(s) {unknown}; fitted for "
                             f"{sorted(self.gain)} (run the probe on every board)")
        gain = runs[schema.DEVICE_UUID].map(self.gain).astype(float)
        offset = runs[schema.DEVICE_UUID].map(self.offset_w).astype(float)
        out = runs.copy()
        time = out[schema.TIME_S] if self.model == "affine" else 0.0
        out[schema.NORMALISED_ENERGY_J] = (out[schema.ENERGY_J] - offset * time) / gain
        out[schema.REFERENCE_BOARD] = self.reference
        return out


def fit_board_normalisation(runs: pd.DataFrame, probe: Iterable[str] | None = None, *,
                            model: str = "scale", reference: str | None = None) -> BoardNormalisation:
    """Fit a gain (``scale``) or gain and power offset (``affine``) per board on a common probe.

    Parameters
    ----------
    runs : DataFrame
        A run table with ``device_uuid``.
    probe : iterable of str, optional
        The ``config`` values of the probe (a short workload every board
        ran); default every configuration measured on more than one board.
    model : {"scale", "affine"}, default "scale"
        ``scale``: the gain is the geometric mean over the probe of the
        ratio of board medians. ``affine``: least squares of the board's
        median power on the reference's (needs ≥ 2 probe configurations of
        different power), as Wattchmen §6's linear map between systems.
    reference : str, optional
        The reference board's UUID; default the board sharing the most probe
        configurations (ties: the first UUID in sort order).

    Raises
    ------
    ValueError
        Unknown model or reference, an empty probe, or a board sharing too
        few probe configurations with the reference (named).
    """
    if model not in MODELS:
        raise ValueError(f"fit_board_normalisation: model must be one of {MODELS}, got {model!r}")
    table = per_board(runs)
    if probe is not None:
        wanted = [str(p) for p in ([probe] if isinstance(probe, str) else probe)]
        absent = sorted(set(wanted) - set(table[schema.CONFIG]))
        if absent:
            raise ValueError(f"fit_board_normalisation: probe configuration(s) {absent} are not in the runs")
        table = table[table[schema.CONFIG].isin(wanted)]
    keys = configuration_columns(runs)
    # one string per configuration (the requested clocks may be NaN, which never equals itself)
    table = table.assign(_key=["|".join(map(str, row)) for row in table[keys].itertuples(index=False)])
    boards = sorted(table[schema.DEVICE_UUID].unique())
    if not boards:
        raise ValueError("fit_board_normalisation: the probe is empty")
    counts = table.groupby(schema.DEVICE_UUID)["_key"].nunique()
    if reference is None:
        reference = max(boards, key=lambda b: counts[b])  # the first in sort order among equals
    elif reference not in boards:
        raise ValueError(f"fit_board_normalisation: reference board {reference!r} has no probe runs; "
                         f"boards: {boards}")
    ref = table[table[schema.DEVICE_UUID] == reference].set_index("_key")
    gain, offset, shared = {reference: 1.0}, {reference: 0.0}, {reference: len(ref)}
    for board in boards:
        if board == reference:
            continue
        mine = table[table[schema.DEVICE_UUID] == board].set_index("_key")
        common = mine.index.intersection(ref.index)
        need = 2 if model == "affine" else 1
        if len(common) < need:
            raise ValueError(f"fit_board_normalisation: board {board!r} shares {len(common)} probe "
                             f"configuration(s) with the reference {reference!r}; {model} needs {need}")
        shared[board] = len(common)
        if model == "scale":
            ratio = mine.loc[common, schema.ENERGY_J] / ref.loc[common, schema.ENERGY_J]
            gain[board], offset[board] = float(np.exp(np.log(ratio).mean())), 0.0
        else:
            x, y = ref.loc[common, schema.POWER_W].to_numpy(float), mine.loc[common, schema.POWER_W].to_numpy(float)
            if np.ptp(x) <= 0:
                raise ValueError(f"fit_board_normalisation: the probe's configurations draw the same power on "
                                 f"{reference!r}; affine needs different powers (or use model='scale')")
            slope, intercept = np.polyfit(x, y, 1)
            gain[board], offset[board] = float(slope), float(intercept)
    return BoardNormalisation(model, reference, gain, offset,
                              tuple(sorted(table[schema.CONFIG].unique())), shared)


def leave_one_config_out(runs: pd.DataFrame, *, model: str = "scale",
                         reference: str | None = None) -> pd.DataFrame:
    """The normalisation's residual on each configuration when that configuration is not in its probe.

    For every configuration measured on the reference and another board, the
    factors are fitted on all other multi-board configurations, applied to the
    held-out one, and its normalised median compared with the reference
    board's median.

    Returns
    -------
    DataFrame
        One row per (held-out configuration, board ≠ reference):
        ``held_out_config``, ``device_uuid``, ``reference_board``,
        ``board_spread_pct`` (board median / reference median − 1 before,
        %), ``residual_pct`` (after, %), ``board_spread_uncertainty_pct``
        (1-σ of that comparison from the two medians, %), ``gain``,
        ``offset_w``.
    """
    table = per_board(runs)
    keys = configuration_columns(runs)
    multi = table.groupby(keys, dropna=False)[schema.DEVICE_UUID].transform("nunique") > 1
    configs = sorted(table.loc[multi, schema.CONFIG].unique())
    if len(configs) < 2:
        raise ValueError(f"leave_one_config_out: needs ≥ 2 configurations measured on several boards, "
                         f"found {len(configs)}")
    if reference is None:
        reference = fit_board_normalisation(runs, configs, model="scale").reference
    rows = []
    for held in configs:
        fit = fit_board_normalisation(runs, [c for c in configs if c != held], model=model, reference=reference)
        rows_held = runs[runs[schema.CONFIG] == held]
        normalised = per_board(fit.apply(rows_held), energy=schema.NORMALISED_ENERGY_J).set_index(schema.DEVICE_UUID)
        raw = per_board(rows_held).set_index(schema.DEVICE_UUID)
        if reference not in raw.index:
            continue
        ref = raw.loc[reference]
        for board in raw.index.drop(reference):
            sigma = math.hypot(raw.loc[board, schema.ENERGY_UNCERTAINTY_J], ref[schema.ENERGY_UNCERTAINTY_J])
            rows.append({schema.HELD_OUT_CONFIG: held, schema.DEVICE_UUID: board, schema.REFERENCE_BOARD: reference,
                         schema.BOARD_SPREAD_PCT: 100 * (raw.loc[board, schema.ENERGY_J] / ref[schema.ENERGY_J] - 1),
                         schema.RESIDUAL_PCT: 100 * (normalised.loc[board, schema.ENERGY_J] / ref[schema.ENERGY_J] - 1),
                         schema.BOARD_SPREAD_UNCERTAINTY_PCT: 100 * sigma / ref[schema.ENERGY_J],
                         schema.GAIN: fit.gain[board], schema.OFFSET_W: fit.offset_w[board]})
    return pd.DataFrame(rows)


def within_board_temperature_slope(runs: pd.DataFrame) -> float:
    """Relative change of energy per °C across repeats of one configuration on one board (1/°C).

    The pooled within-group least-squares slope of ``log(energy)`` on
    temperature, each (configuration, board) group centred on its own means,
    so board-to-board differences do not enter. Caution: across repeats the
    temperature follows the GPU's recent load as the power does, so this
    slope also carries run-to-run differences that are not caused by the
    temperature (on the H200 data it is ~1.6–1.8 %/°C, six times the
    0.18–0.32 %/°C the H100 raw recording shows at a steady load).
    """
    keys = [*configuration_columns(runs), schema.DEVICE_UUID]
    if schema.TEMPERATURE_C not in runs:
        raise ValueError("within_board_temperature_slope: the run table lacks 'temperature_c'")
    data = runs[[*keys, schema.ENERGY_J, schema.TEMPERATURE_C]].dropna(
        subset=[schema.ENERGY_J, schema.TEMPERATURE_C])
    groups = data.groupby(keys, dropna=False)
    y = np.log(data[schema.ENERGY_J]) - groups[schema.ENERGY_J].transform(lambda e: np.log(e).mean())
    t = data[schema.TEMPERATURE_C] - groups[schema.TEMPERATURE_C].transform("mean")
    denominator = float((t * t).sum())
    if denominator <= 0:
        raise ValueError("within_board_temperature_slope: no temperature varies within a configuration and board")
    return float((y * t).sum()) / denominator


def temperature_adjusted(runs: pd.DataFrame, relative_alpha_per_c: float | None = None,
                         reference_c: float | None = None) -> pd.DataFrame:
    """``runs`` with ``energy_at_ref_j``: each row's energy moved to one temperature (thesis eq. 4.7; a copy).

    Through :func:`powermodels.thermal.normalise.normalise`, row by row, with
    α = ``relative_alpha_per_c`` × the row's power (source ``given``), or the
    package's assumption (:func:`~powermodels.thermal.normalise.assumed_alpha`,
    0.25 ± 0.12 %/°C) when None. Then ``board_spread(..., energy="energy_at_ref_j")``
    shows the spread the boards' temperature difference does not explain.

    Parameters
    ----------
    relative_alpha_per_c : float, optional
        α as a share of the power per °C (0.0025 = 0.25 %/°C): learn it per
        board (:mod:`powermodels.thermal`), never a constant for all GPUs.
    reference_c : float, optional
        Default the median temperature of the runs.
    """
    from .thermal.normalise import AlphaEstimate, assumed_alpha, normalise

    if relative_alpha_per_c is not None and not math.isfinite(relative_alpha_per_c):
        raise ValueError(f"temperature_adjusted: relative_alpha_per_c must be finite, got {relative_alpha_per_c!r}")
    missing = [c for c in (schema.POWER_W, schema.TIME_S, schema.TEMPERATURE_C) if c not in runs]
    if missing:
        raise ValueError(f"temperature_adjusted: the run table lacks {missing}")
    t_ref = float(np.nanmedian(runs[schema.TEMPERATURE_C])) if reference_c is None else reference_c
    fields = []
    for energy, power, time, temperature in runs[[schema.ENERGY_J, schema.POWER_W, schema.TIME_S,
                                                  schema.TEMPERATURE_C]].itertuples(index=False):
        alpha = (assumed_alpha(power) if relative_alpha_per_c is None else
                 AlphaEstimate(relative_alpha_per_c * power, 0.0, "given", power_w=power))
        fields.append(normalise(energy_j=energy, power_w=power, time_s=time, temperature_c=temperature,
                                alpha=alpha, reference_temperature_c=t_ref))
    return pd.concat([runs.reset_index(drop=True), pd.DataFrame(fields)], axis=1)
