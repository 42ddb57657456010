"""Bringing host counter ticks and device system counter ticks onto one clock.

Everything ends in local (wall-clock) nanoseconds since the Unix epoch, as int64:
  host:   ns = host_mono + (ticks - host_cnt) * 1000 / f_host_MHz   (ticks are ns if f is unknown)
  device: ns = host_mono_N + (syscnt - dev_cnt_N) * 1000 / hwts_MHz
  wall:   + collectionTimeBegin_us * 1000 - clockMonotonicRaw_ns   (start_info)
Sources: host_formats.md §3, device_formats.md §5.2. Integer arithmetic, rounded to the
nearest ns, so times stay exact where the reference's are (multiples of the tick).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

import numpy as np


INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class Clock:
    """A linear map from counter ticks to local ns: ns = base_ns + (ticks - base_ticks) * 1000 / mhz."""

    base_ticks: int
    base_ns: int
    mhz: Optional[Fraction]  # None: the ticks are already ns

    def to_ns(self, ticks: np.ndarray) -> np.ndarray:
        """Local ns (int64) of counter values `ticks` (any integer array)."""
        t = np.asarray(ticks).astype(np.int64)  # a new array: the steps below work in place
        t -= self.base_ticks
        if self.mhz is None:
            t += self.base_ns
            return t
        num, den = self.mhz.numerator, self.mhz.denominator
        scale = 1000 * den
        if scale % num == 0:  # a whole number of ns per tick (50 MHz: 20): no division, nothing to round
            t *= scale // num
            t += self.base_ns
            return t
        reach = max(-int(t.min()), int(t.max())) if len(t) else 0
        if reach <= INT64_MAX // scale:
            t *= scale
            q, r = np.divmod(t, num)
        elif 2 * num <= INT64_MAX // scale:  # t * scale would overflow: t = a*num + b, so t*scale/num = a*scale + b*scale/num
            q, b = np.divmod(t, num)
            q *= scale
            b *= scale
            more, r = np.divmod(b, num)
            q += more
        else:  # (a frequency given to many digits, far from the sync point) to within float64 precision
            q = np.rint(t.astype(np.float64) * (scale / num)).astype(np.int64)
            r = np.zeros_like(q)
        q += (2 * r >= num)
        q += self.base_ns
        return q

    def duration_ns(self, ticks: np.ndarray) -> np.ndarray:
        """ns of tick differences."""
        return Clock(0, 0, self.mhz).to_ns(ticks)


def wall_offset_ns(collection_time_begin_us: int, clock_monotonic_raw_ns: int) -> int:
    """Add to host monotonic-raw ns to get local Unix ns."""
    return collection_time_begin_us * 1000 - clock_monotonic_raw_ns


def host_clock(freq_mhz: Optional[Fraction], host_mono_ns: int, host_cnt: int, cnt_diff: int,
               offset_ns: int) -> Clock:
    """Clock of host timestamps (api_event, compact, additional)."""
    if freq_mhz is None:
        return Clock(0, offset_ns, None)
    mono = host_mono_ns + round(Fraction(cnt_diff * 1000) / freq_mhz)
    return Clock(host_cnt, mono + offset_ns, freq_mhz)


def device_clock(hwts_mhz: Fraction, dev_cnt: int, host_mono_ns: int, offset_ns: int) -> Clock:
    """Clock of device syscnt values."""
    return Clock(dev_cnt, host_mono_ns + offset_ns, hwts_mhz)
