"""The contract between the ingest and the store's writer: a TableSink receives each finished
store table (store.TableWriter.put is one)."""
from __future__ import annotations

from typing import Dict, Optional, Protocol, Union

import numpy as np
import pandas as pd

from ..store import CodedTexts

# A table's rows: a DataFrame, or for a columnar table a dict of column arrays (texts may come
# coded). The same type as store.Table, so that TableWriter.put is a TableSink.
TableRows = Union[pd.DataFrame, Dict[str, Union[np.ndarray, CodedTexts]]]


class TableSink(Protocol):
    """Takes a store table by name. A table may come in parts, rows in order: each part but the
    last with `last=False`; `None` rows with `last=True` close a table given in parts."""

    def __call__(self, __table: str, __rows: Optional[TableRows], last: bool = True) -> None:
        ...
