"""What reading a bag returns: joint states and wrenches as time series, and a report of what was repaired."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class ReadReport:
    """What reading a topic found and repaired.

    messages: messages on the topic; kept: samples returned.
    dropped_nan: samples dropped because a position (or a present velocity/effort channel) was NaN.
    reordered: messages whose stamp was earlier than the previous message's (samples were sorted).
    duplicates: samples dropped because their stamp equalled an earlier sample's (first one kept).
    stamp_fallbacks: messages with a zero header stamp, timed by the bag's receive time instead.
    missing_interfaces: "velocity:joint" / "effort:joint" channels that are NaN or absent throughout.
    """

    messages: int = 0
    kept: int = 0
    dropped_nan: int = 0
    reordered: int = 0
    duplicates: int = 0
    stamp_fallbacks: int = 0
    missing_interfaces: tuple[str, ...] = ()

    @property
    def repaired(self) -> bool:
        """True when samples were dropped or sorted (what a reader warns about)."""
        return bool(self.dropped_nan or self.reordered or self.duplicates)

    def summary(self) -> str:
        parts = [f"{self.kept}/{self.messages} samples kept"]
        for name in ("dropped_nan", "reordered", "duplicates", "stamp_fallbacks"):
            if getattr(self, name):
                parts.append(f"{name}={getattr(self, name)}")
        if self.missing_interfaces:
            parts.append("missing: " + ", ".join(self.missing_interfaces))
        return "; ".join(parts)


@dataclass
class JointStateSeries:
    """Joint states sampled at times ``t``, columns ordered like ``names``.

    t: (N,) seconds since ``t0_ns`` (strictly increasing).
    q: (N, n) positions; v: (N, n) velocities or None; tau: (N, n) efforts or None.
    A velocity/effort column of a joint without that interface is NaN throughout.
    t0_ns: absolute time (ns since the epoch) of ``t == 0``, the first sample's stamp.
    """

    t: np.ndarray
    names: list[str]
    q: np.ndarray
    v: np.ndarray | None
    tau: np.ndarray | None
    t0_ns: int = 0
    report: ReadReport = field(default_factory=ReadReport)


@dataclass
class WrenchSeries:
    """Wrenches ``w`` (N, 6) = [fx, fy, fz, tx, ty, tz] at times ``t`` (N,) s since ``t0_ns``,
    expressed in ``frame_id``."""

    t: np.ndarray
    frame_id: str
    w: np.ndarray
    t0_ns: int = 0
    report: ReadReport = field(default_factory=ReadReport)
