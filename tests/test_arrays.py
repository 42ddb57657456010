"""msprof_kit.arrays: the sorting set operations give what numpy's give."""
from __future__ import annotations

import numpy as np
import pytest

from msprof_kit import arrays


@pytest.mark.parametrize("values, table", [([], [1, 2]), ([1, 2], []), ([5, 3, 5, -1, 2 ** 40], [2 ** 40, 5, 7]),
                                           (list(range(-50, 50)) * 3, [0, -50, 49, 99, 3])])
def test_sorting_set_operations_equal_numpys(values, table):
    v, t = np.array(values, dtype=np.int64), np.array(table, dtype=np.int64)
    assert arrays.distinct(v).tolist() == np.unique(v).tolist()
    assert arrays.isin(v, t).tolist() == np.isin(v, t).tolist()


@pytest.mark.parametrize("keys", [[], [4, 4, 1, 9, 4], [1, 2, 2, 3], [2 ** 40, -3, 7]])
def test_sorted_keys_find_the_first_equal_key(keys):
    wanted = [4, 9, 2, -3, 2 ** 40, 0]
    expect = [keys.index(w) if w in keys else -1 for w in wanted]
    assert arrays.SortedKeys(np.array(keys, dtype=np.int64)).find(np.array(wanted)).tolist() == expect
