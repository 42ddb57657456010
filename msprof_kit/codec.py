"""Text columns as codes: how the ingest hands the store's writer a column of repeated texts.

Millions of API or task rows share a few hundred names; the ingest gives such a column as
CodedTexts (codes into a table of texts) and the store's writer (store.TableWriter) and the
STRING_IDS pool (StringPool) number its distinct texts in the order of their first row."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple, Union

import numpy as np
import pandas as pd


@dataclass
class CodedTexts:
    """A column of texts as codes into a table of texts (row i reads texts[codes[i]]; the table
    may hold a text more than once): millions of API rows share a few hundred names."""
    codes: np.ndarray
    texts: np.ndarray

    def first_seen(self) -> Tuple[np.ndarray, np.ndarray]:
        """(codes, labels) as pd.factorize gives them of the texts themselves: the distinct texts
        in the order of their first row, each row's position among them."""
        rows, used = pd.factorize(self.codes, use_na_sentinel=False)
        canon, labels = pd.factorize(np.asarray(self.texts, dtype=object)[used], use_na_sentinel=False)
        return canon[rows], labels


def text_codes(values: Union[np.ndarray, CodedTexts]) -> Tuple[np.ndarray, np.ndarray]:
    """(codes, labels) of a column of texts, given as texts or as CodedTexts: the distinct texts in
    the order of their first row, each row's position among them."""
    if isinstance(values, CodedTexts):
        return values.first_seen()
    return pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
