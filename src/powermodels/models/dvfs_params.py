"""The seven DSO parameters of one kernel (Wang et al., §IV-B, eq. 1-3) as one value object.

Power (DSO eq. 1) ``P = P0 + κ·V(f_c) + γ·f_m + c·V(f_c)²·f_c``; time (eq. 2)
``T = t0 + max(α/f_m, β/f_c)``; energy (eq. 3) ``E = P·T``. Clocks in MHz.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import ClassVar

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.models.voltage import relative_voltage

__all__ = ["DVFSParams"]


@dataclass(frozen=True)
class DVFSParams:
    """The seven DSO parameters of one kernel plus the GPU's V(f) shape.

    Attributes
    ----------
    p0_w, kappa_w, gamma_w_per_mhz, c_w_per_mhz : float
        Power parameters of DSO eq. 1 (``kappa_w`` per unit relative voltage).
    t0_s, alpha_s_mhz, beta_s_mhz : float
        Time parameters of DSO eq. 2 (α and β in s·MHz).
    voltage_knee_mhz, voltage_slope_per_ghz : float
        The relative-voltage curve V(f) (a property of the GPU, not the kernel).
    """

    p0_w: float = 0.0
    kappa_w: float = 0.0
    gamma_w_per_mhz: float = 0.0
    c_w_per_mhz: float = 0.0
    t0_s: float = 0.0
    alpha_s_mhz: float = 0.0
    beta_s_mhz: float = 0.0
    voltage_knee_mhz: float = 0.0
    voltage_slope_per_ghz: float = 0.0

    _NAMES: ClassVar[dict[str, str]] = {
        "p0_w": schema.DVFS_P0_W,
        "kappa_w": schema.DVFS_KAPPA_W,
        "gamma_w_per_mhz": schema.DVFS_GAMMA_W_PER_MHZ,
        "c_w_per_mhz": schema.DVFS_C_W_PER_MHZ,
        "t0_s": schema.DVFS_T0_S,
        "alpha_s_mhz": schema.DVFS_ALPHA_S_MHZ,
        "beta_s_mhz": schema.DVFS_BETA_S_MHZ,
    }

    def voltage(self, f_core_mhz) -> np.ndarray:
        """Relative voltage V(f_c)."""
        return relative_voltage(f_core_mhz, self.voltage_knee_mhz, self.voltage_slope_per_ghz)

    def power(self, f_core_mhz, f_mem_mhz) -> np.ndarray:
        """Power in W (DSO eq. 1)."""
        fc = np.asarray(f_core_mhz, dtype=float)
        fm = np.asarray(f_mem_mhz, dtype=float)
        v = self.voltage(fc)
        return self.p0_w + self.kappa_w * v + self.gamma_w_per_mhz * fm + self.c_w_per_mhz * v**2 * fc

    def time(self, f_core_mhz, f_mem_mhz) -> np.ndarray:
        """Time in s (DSO eq. 2)."""
        fc = np.asarray(f_core_mhz, dtype=float)
        fm = np.asarray(f_mem_mhz, dtype=float)
        return self.t0_s + np.maximum(self.alpha_s_mhz / fm, self.beta_s_mhz / fc)

    def energy(self, f_core_mhz, f_mem_mhz) -> np.ndarray:
        """Energy in J (DSO eq. 3)."""
        return self.power(f_core_mhz, f_mem_mhz) * self.time(f_core_mhz, f_mem_mhz)

    def ridge_core_mhz(self, f_mem_mhz: float) -> float:
        """Core clock where the kernel turns memory-bound, ``(β/α)·f_m`` (DSO Theorem 1)."""
        if self.alpha_s_mhz <= 0:
            return np.inf
        return self.beta_s_mhz / self.alpha_s_mhz * float(f_mem_mhz)

    def scaled(self, time_factor: float = 1.0, power_factor: float = 1.0) -> DVFSParams:
        """The same model with time multiplied by ``time_factor`` and power by ``power_factor``."""
        return replace(
            self,
            p0_w=self.p0_w * power_factor,
            kappa_w=self.kappa_w * power_factor,
            gamma_w_per_mhz=self.gamma_w_per_mhz * power_factor,
            c_w_per_mhz=self.c_w_per_mhz * power_factor,
            t0_s=self.t0_s * time_factor,
            alpha_s_mhz=self.alpha_s_mhz * time_factor,
            beta_s_mhz=self.beta_s_mhz * time_factor,
        )

    def clipped(self) -> DVFSParams:
        """The same model with negative parameters set to 0 (physical range of eq. 1-2)."""
        values = {k: max(v, 0.0) for k, v in asdict(self).items() if k in self._NAMES}
        return replace(self, **values)

    def to_shares(self, f_core_mhz: float, f_mem_mhz: float, time_s: float,
                  power_w: float) -> np.ndarray:
        """Each term's share of T and P at a reference clock pair (``schema.DVFS_SHARES`` order).

        ``(P0, κV, γf_m, cV²f_c)/P_ref`` and ``(t0, α/f_m, β/f_c)/T_ref``:
        dimensionless, O(1) and comparable across kernels of any size, so a
        regressor can learn them from size-free features.
        """
        v = float(self.voltage(f_core_mhz))
        return np.array([
            self.p0_w / power_w, self.kappa_w * v / power_w,
            self.gamma_w_per_mhz * f_mem_mhz / power_w, self.c_w_per_mhz * v**2 * f_core_mhz / power_w,
            self.t0_s / time_s, self.alpha_s_mhz / f_mem_mhz / time_s,
            self.beta_s_mhz / f_core_mhz / time_s,
        ])

    @classmethod
    def from_shares(cls, shares, *, f_core_mhz: float, f_mem_mhz: float, time_s: float,
                    power_w: float, voltage_knee_mhz: float,
                    voltage_slope_per_ghz: float) -> DVFSParams:
        """Inverse of :meth:`to_shares`."""
        s = np.asarray(shares, dtype=float).ravel()
        if s.size != 7 or not np.all(np.isfinite(s)):
            raise ValueError(f"shares: expected 7 finite values, got {s.size}")
        for name, val in (("f_core_mhz", f_core_mhz), ("f_mem_mhz", f_mem_mhz),
                          ("time_s", time_s), ("power_w", power_w)):
            if not np.isfinite(val) or val <= 0:
                raise ValueError(f"{name} must be positive, got {val}")
        v = float(relative_voltage(f_core_mhz, voltage_knee_mhz, voltage_slope_per_ghz))
        return cls(
            p0_w=s[0] * power_w, kappa_w=s[1] * power_w / v,
            gamma_w_per_mhz=s[2] * power_w / f_mem_mhz, c_w_per_mhz=s[3] * power_w / (v**2 * f_core_mhz),
            t0_s=s[4] * time_s, alpha_s_mhz=s[5] * time_s * f_mem_mhz,
            beta_s_mhz=s[6] * time_s * f_core_mhz,
            voltage_knee_mhz=float(voltage_knee_mhz), voltage_slope_per_ghz=float(voltage_slope_per_ghz),
        )

    def as_series(self) -> pd.Series:
        """The seven kernel parameters under their schema names."""
        return pd.Series({col: getattr(self, attr) for attr, col in self._NAMES.items()})

    @classmethod
    def from_values(cls, values, *, voltage_knee_mhz: float, voltage_slope_per_ghz: float) -> DVFSParams:
        """Build from a mapping with schema names or a sequence in ``schema.DVFS_PARAMETERS`` order."""
        if isinstance(values, (dict, pd.Series)):
            missing = [c for c in schema.DVFS_PARAMETERS if c not in values]
            if missing:
                raise ValueError(f"DVFS parameters: column {missing[0]!r} is missing")
            seq = [float(values[c]) for c in schema.DVFS_PARAMETERS]
        else:
            seq = [float(v) for v in np.ravel(values)]
            if len(seq) != len(schema.DVFS_PARAMETERS):
                raise ValueError(
                    f"DVFS parameters: expected {len(schema.DVFS_PARAMETERS)} values, got {len(seq)}"
                )
        if not np.all(np.isfinite(seq)):
            raise ValueError("DVFS parameters: values must be finite")
        kw = dict(zip(cls._NAMES, seq, strict=True))
        return cls(**kw, voltage_knee_mhz=float(voltage_knee_mhz),
                   voltage_slope_per_ghz=float(voltage_slope_per_ghz))
