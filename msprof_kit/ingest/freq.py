"""The real AI Core frequency of a device: the change points of `device_N/data/lpmFreqConv.data.N.slice_M`
(formats_more.md §3.2), for the PMU times (`FreqChanges.pmu_hz`) and for AICORE_FREQ (`freq_rows`).

The reference's rules (msparser/freq/freq_parser.py, csrc/domain/services/parser/freq/freq_parser.cpp):

* the list starts with (dev_start.log cntvct, info.json aic_frequency); a point before that counter
  replaces the starting value (the last such point in file order), the others are kept;
* PMU times (mscalculate/stars/ffts_pmu_calculator.py `_get_current_freq`, csrc/.../metric_calculator.cpp
  `GetFreq`): the points sorted by counter, a task converts its cycles with the last point at or
  before its context PMU record's end counter, the nominal frequency before the first point, and the
  nominal frequency for every task of the device when any point is 0 MHz;
* AICORE_FREQ and the timeline (csrc/domain/data_process/system/aicore_freq_processor.cpp): the points in
  local ns; those before the collection start are left out, the last of them giving the frequency at
  the start; a point at the collection start, then the points, then one at the collection end (when
  end_info gives it) with the last point's frequency. The C++ path writes every point twice and the
  start three times (its freq.db table is filled by both its parsers); we keep one of each
  (docs/exports.md).

Points out of time order are sorted first (both paths sort them for the PMU times)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple

import numpy as np
import pandas as pd

from ..errors import Diagnostics, UnreadableFile
from ..layout import ResultDir, data_files
from ..parsers import device as device_parsers
from ..timebase import Clock
from .streams import read_stream

LPM_STEM = "lpmFreqConv.data"


@dataclass
class FreqChanges:
    """One device's AI Core frequency change points: `syscnt` (device counter ticks, sorted) with
    `mhz`, starting at `start_syscnt` (dev_start.log cntvct) with `initial_mhz`."""

    device_id: int
    nominal_mhz: int      # info.json aic_frequency
    start_syscnt: int
    initial_mhz: int      # the frequency at start_syscnt: the nominal one, or the last point before it
    syscnt: np.ndarray    # int64, the points at or after start_syscnt, by time
    mhz: np.ndarray       # int64
    before: int = 0       # points before start_syscnt (only the last one counts)
    _ticks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    _hz: Optional[np.ndarray] = field(default=None, repr=False)

    def has_zero(self) -> bool:
        """Whether some point (the starting one included) is 0 MHz."""
        return self.initial_mhz == 0 or bool((self.mhz == 0).any())

    def pmu_hz(self, end_syscnt: np.ndarray) -> np.ndarray:
        """The AI Core frequency (Hz, float64) of each PMU record ending at `end_syscnt` (device
        ticks): the last point at or before it, the nominal frequency before the first point, and
        the nominal one everywhere when some point is 0 MHz."""
        nominal = float(self.nominal_mhz) * 1e6
        if self._hz is None:  # (once: the starting point, then the points, in Hz; None for nominal throughout)
            self._ticks = np.concatenate([[self.start_syscnt], self.syscnt]).astype(np.int64)
            self._hz = np.full(0, nominal) if self.has_zero() else \
                np.concatenate([[self.initial_mhz], self.mhz]).astype(np.float64) * 1e6
        if not len(self._hz):
            return np.full(len(end_syscnt), nominal)
        at = np.searchsorted(self._ticks, np.asarray(end_syscnt, dtype=np.int64), side="right") - 1
        out: np.ndarray = np.where(at >= 0, self._hz[np.maximum(at, 0)], nominal)
        return out


def nominal_mhz(rd: ResultDir) -> int:
    """info.json's DeviceInfo[0] aic_frequency, whole MHz; 0 when absent or unusable."""
    text = str(rd.device_info().get("aic_frequency", "0") or "0").split(".")[0]
    return int(text) if text.isdigit() else 0


def read_freq(rd: ResultDir, diag: Diagnostics) -> Optional[FreqChanges]:
    """The device's change points, None when it has no lpmFreqConv slice with a record (the
    reference then uses the nominal frequency throughout). Warns, with counts, of records cut
    short (dropped), points out of time order (sorted), points before the device start beyond the
    last one (which sets the starting frequency; the others are dropped) and points of 0 MHz (the PMU times then use the nominal
    frequency)."""
    try:
        paths = data_files(rd, Diagnostics()).get((LPM_STEM, ""))  # (the listing's own warnings are load_device's)
    except UnreadableFile:  # (load_device has said so)
        return None
    if not paths:
        return None
    buf, pieces = read_stream(paths)
    cols, issues = device_parsers.decode_lpm_freq(buf, pieces)
    diag.extend(issues)
    if not len(buf) // device_parsers.records.LPM_FREQ.size:
        return None
    where = f"{rd.data_dir}/{LPM_STEM}.{rd.device_id}.*"
    syscnt, mhz = cols["syscnt"], cols["mhz"]
    late = int(np.count_nonzero(syscnt[1:] < syscnt[:-1]))
    if late:
        diag.warn(f"{where}: {late} AI Core frequency change points come before the point written ahead of them; "
                  f"all are taken in time order (as the reference does)")
    nominal = nominal_mhz(rd)
    start = int(rd.dev_start.get("cntvct", 0))
    early = syscnt < start
    initial = int(mhz[np.flatnonzero(early)[-1]]) if early.any() else nominal  # the last in file order
    if early.sum() > 1:  # (one such point is usual: the frequency in force when the collection began)
        diag.warn(f"{where}: {int(early.sum())} AI Core frequency change points lie before the device start "
                  f"(dev_start.log cntvct {start}); only the last of them counts, giving the frequency at the start "
                  f"({initial} MHz), as the reference does: {int(early.sum()) - 1} dropped")
    order = np.argsort(syscnt[~early], kind="stable")
    out = FreqChanges(rd.device_id, nominal, start, initial, syscnt[~early][order], mhz[~early][order],
                      int(early.sum()))
    zeros = int(np.count_nonzero(mhz == 0))
    if zeros:
        diag.warn(f"{where}: {zeros} AI Core frequency change points give 0 MHz; the PMU times of device "
                  f"{rd.device_id} use the nominal {nominal} MHz throughout (as the reference does), AICORE_FREQ "
                  f"and the timeline show the points as recorded")
    return out


def freq_rows(device_id: int, nominal: int, changes: Optional[FreqChanges], clock: Optional[Clock],
              session: Tuple[int, int], has_end: bool) -> pd.DataFrame:
    """AICORE_FREQ rows (deviceId, timestampNs, freq MHz, dieId -1) of one device, by time: the
    collection start with the frequency in force then (the last point at or before it, else the nominal
    `nominal` MHz), the change points after it, and the collection end (`has_end`: end_info gives
    it) with the last point's frequency."""
    start, end = session
    ts: np.ndarray = np.zeros(0, np.int64)
    mhz: np.ndarray = np.zeros(0, np.int64)
    if changes is not None and clock is not None:
        ts = clock.to_ns(np.concatenate([[changes.start_syscnt], changes.syscnt]))
        mhz = np.concatenate([[changes.initial_mhz], changes.mhz]).astype(np.int64)
    early = ts < start
    upto = np.flatnonzero(ts <= start)  # (the C++ path takes only those before the start: a point at the
    at_start = int(mhz[upto[-1]]) if len(upto) else nominal  # start then follows a nominal one at that time)
    last = int(mhz[-1]) if len(mhz) else nominal
    times = [np.array([start], np.int64), ts[~early]] + ([np.array([end], np.int64)] if has_end else [])
    values = [np.array([at_start], np.int64), mhz[~early]] + ([np.array([last], np.int64)] if has_end else [])
    t, f = np.concatenate(times), np.concatenate(values)
    order = np.lexsort((np.arange(len(t)), t))  # by time; the start point first at its time
    t, f = t[order], f[order]
    keep: np.ndarray = np.ones(len(t), dtype=bool)  # one of each point: a repeat is the same time and value
    keep[1:] = (t[1:] != t[:-1]) | (f[1:] != f[:-1])
    return pd.DataFrame({"deviceId": device_id, "timestampNs": t[keep], "freq": f[keep], "dieId": -1})
