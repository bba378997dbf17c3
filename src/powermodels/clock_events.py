"""NVML's clock-event (throttle) reason bits, as a recording's ``throttle_reasons`` column holds them.

``nvmlDeviceGetCurrentClocksEventReasons`` returns a bit field; these are the bits the
project reads (idle 0x1, an application-clock setting 0x2 and the display clock 0x100 are not
slowdowns and are left out). One home for them, so that the simulated GPU (which sets
:data:`SW_POWER_CAP`), the measurement checks and the recording analyses agree
(NVML API reference, "Clocks Event Reasons").
"""

from __future__ import annotations

__all__ = ["HW_POWER_BRAKE", "HW_THERMAL", "OTHER_SLOWDOWN", "POWER_CAP", "SW_POWER_CAP", "SW_THERMAL", "THERMAL"]

#: SwPowerCap: the power-cap controller holds the clocks down (the one bit the simulated GPU sets)
SW_POWER_CAP = 0x4
#: SwThermalSlowdown
SW_THERMAL = 0x20
#: HwThermalSlowdown
HW_THERMAL = 0x40
#: HwPowerBrakeSlowdown (an external power-brake signal)
HW_POWER_BRAKE = 0x80
#: either power limit: the software cap or the hardware brake
POWER_CAP = SW_POWER_CAP | HW_POWER_BRAKE
#: either thermal slowdown
THERMAL = SW_THERMAL | HW_THERMAL
#: HwSlowdown, SyncBoost
OTHER_SLOWDOWN = 0x8 | 0x10
