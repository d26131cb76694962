"""GPU clocks and throttling around timed work, read through NVML (nvidia-ml-py).

The harness's short timed batches run at whatever clocks the GPU holds at that moment; a sustained
workload may hold lower ones. Every timing therefore records, per contender, the SM and memory clocks
and the throttle reasons seen before and after its batches, and the time NVML counted as power- or
thermal-capped while they ran, so a figure states its regime and a throttled contender is visible.

Without NVML (a CPU machine, a driver without it) every reading is None and timing goes on.
"""

from __future__ import annotations

# NVML's clock event (throttle) reason bits. Idle and the application-clock setting are not slowdowns.
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
SLOWDOWNS = {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in REASONS.items() if mask & bit]


def _event_reasons(nvml):
    """The reasons getter: renamed from 'throttle' to 'event' reasons in newer NVML bindings."""
    return getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons


class ClockProbe:
    """Readings of one GPU, found by PCI bus id (NVML ignores CUDA_VISIBLE_DEVICES)."""

    def __init__(self, pci_bus_id: str | None):
        self.handle = None
        self.nvml = None
        if not pci_bus_id:
            return
        try:
            import pynvml  # NVML bindings, GPU machines only

            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
            self.nvml = pynvml
        except Exception:  # no NVML here: readings are None
            self.handle = None

    @property
    def available(self) -> bool:
        return self.handle is not None

    def read(self) -> dict | None:
        """{sm_mhz, mem_mhz, reasons (bit mask), temp_c, power_w, capped_ns}; None without NVML.
        capped_ns: NVML's cumulative power plus thermal violation time, for differences."""
        if self.handle is None:
            return None
        n, h = self.nvml, self.handle
        try:
            reading = {
                "sm_mhz": n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
                "mem_mhz": n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
                "reasons": int(_event_reasons(n)(h)),
                "temp_c": n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
                "power_w": n.nvmlDeviceGetPowerUsage(h) / 1e3,
            }
        except Exception:
            return None
        capped = 0
        for policy in (n.NVML_PERF_POLICY_POWER, n.NVML_PERF_POLICY_THERMAL):
            try:
                capped += int(n.nvmlDeviceGetViolationStatus(h, policy).violationTime)
            except Exception:
                pass
        reading["capped_ns"] = capped
        return reading


class ClockLog:
    """Readings taken around one contender's batches, reduced to what a results file keeps."""

    def __init__(self):
        self.readings: list[dict] = []
        self.capped_ns = 0

    def around(self, before: dict | None, after: dict | None) -> None:
        for r in (before, after):
            if r is not None:
                self.readings.append(r)
        if before is not None and after is not None:
            self.capped_ns += max(0, after["capped_ns"] - before["capped_ns"])

    def summary(self) -> dict | None:
        if not self.readings:
            return None
        sm = [r["sm_mhz"] for r in self.readings]
        mem = [r["mem_mhz"] for r in self.readings]
        mask = 0
        for r in self.readings:
            mask |= r["reasons"]
        names = reason_names(mask)
        return {
            "sm_mhz_min": min(sm), "sm_mhz_max": max(sm),
            "mem_mhz_min": min(mem), "mem_mhz_max": max(mem),
            "temp_c_max": max(r["temp_c"] for r in self.readings),
            "power_w_max": max(r["power_w"] for r in self.readings),
            "reasons": names,
            "capped_us": self.capped_ns / 1e3,
            "throttled": bool(SLOWDOWNS & set(names)) or self.capped_ns > 0,
        }
