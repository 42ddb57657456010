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


@pytest.mark.parametrize("columns", [
    [[0, 1, 1, 0, 1], [7, 7, 8, 7, 7]],
    [[-5, 3, -5, 3], [2 ** 20, 0, 2 ** 20, 1], [1, 1, 1, 1]],
    [[2 ** 40, 0, 2 ** 40], [2 ** 30, 2 ** 30, 0]],  # 71 bits: no packed key
    [[], []],
])
def test_packed_keys_are_equal_where_the_rows_are(columns):
    keys = [np.array(c, dtype=np.int64) for c in columns]
    packed = arrays.packed_key(keys)
    rows = list(zip(*columns))
    if sum((max(c) - min(c)).bit_length() for c in columns if c) > 63:
        assert packed is None
        return
    assert len(packed) == len(rows) and (packed >= 0).all()
    for i in range(len(rows)):
        for j in range(len(rows)):
            assert (packed[i] == packed[j]) == (rows[i] == rows[j])
    # the groups agree with group_ids'
    groups = arrays.group_ids(keys) if rows else np.zeros(0, np.int64)
    assert len(set(zip(groups.tolist(), packed.tolist()))) == len(set(rows))


@pytest.mark.parametrize("values", [[], [7], [3, 3, 3], [1, 2, 2, 5, 9, 9], [5, 1, 5, 2, 1, 9, 2 ** 40, 2 ** 40, -4]])
def test_first_seen_marks_what_pandas_does_not_call_duplicated(values):
    import pandas as pd
    v = np.array(values, dtype=np.int64)
    assert arrays.first_seen(v).tolist() == (~pd.Series(v).duplicated()).tolist()


def test_searches_in_blocks_give_the_whole_search(monkeypatch):
    """in_sorted and SortedKeys.find search SEARCH_BLOCK values at a time."""
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 300, 200)
    wanted = rng.integers(-5, 310, 1000)
    whole = (arrays.in_sorted(wanted, np.sort(keys)), arrays.SortedKeys(keys).find(wanted))
    monkeypatch.setattr(arrays, "SEARCH_BLOCK", 7)
    assert arrays.in_sorted(wanted, np.sort(keys)).tolist() == whole[0].tolist()
    assert arrays.SortedKeys(keys).find(wanted).tolist() == whole[1].tolist()
    assert whole[0].any() and not whole[0].all()


@pytest.mark.parametrize("columns", [
    [[], []],
    [[3], [1]],
    [[0, 1, 1, 0, 1, 0], [7, 7, 8, 7, 8, 9]],
    [[2 ** 40, 0, 2 ** 40, 5, 0], [2 ** 30, 2 ** 30, 2 ** 30, 0, 2 ** 30]],  # 71 bits: dense groups instead
    [[9, 8, 7, 6, 5, 9, 8], [-1, -1, -1, -1, -1, -1, -1]],
])
def test_groups_numbered_by_first_row_equal_pandas_ngroup(columns):
    import pandas as pd
    keys = [np.array(c, dtype=np.int64) for c in columns]
    frame = pd.DataFrame({f"k{i}": k for i, k in enumerate(keys)})
    expect = frame.groupby(list(frame.columns), sort=False).ngroup().tolist() if len(frame) else []
    assert arrays.numbered_by_first_row(keys).tolist() == expect
    codes = arrays.key_codes(keys)
    rows = list(zip(*columns))
    assert len(set(zip(codes.tolist(), rows))) == len(set(rows)) == len(set(codes.tolist()))


def test_groups_numbered_by_first_row_on_many_random_rows():
    import pandas as pd
    rng = np.random.default_rng(11)
    keys = [rng.integers(0, 3, 5000), rng.integers(0, 40, 5000), np.where(rng.random(5000) < .8, 2 ** 32 - 1, 0)]
    frame = pd.DataFrame({f"k{i}": k for i, k in enumerate(keys)})
    expect = frame.groupby(list(frame.columns), sort=False).ngroup().to_numpy()
    assert (arrays.numbered_by_first_row(keys) == expect).all()


@pytest.mark.parametrize("window", [1, 3, 50, 1000])
def test_numbering_by_windows_numbers_as_one_pass_does(window):
    """Keys numbered a window of rows at a time get numbered_by_first_row's numbers."""
    rng = np.random.default_rng(window)
    keys = rng.integers(-50, 400, 3000) * 7919
    want = arrays.numbered_by_first_row([keys])
    numbering = arrays.Numbering()
    got = np.concatenate([numbering.number(keys[lo:lo + window]) for lo in range(0, len(keys), window)])
    assert np.array_equal(got, want)
    assert numbering.count == len(np.unique(keys))
    assert len(numbering.levels) <= 2 * int(np.log2(numbering.count)) + 2
    assert np.array_equal(numbering.find(np.array([keys[5], 1])), [want[5], -1])
