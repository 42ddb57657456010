"""slow_ranks.csv and slow_links.csv (msprof_kit/cluster/slow.py) on the golden 910b_hccl_8ranks
text outputs: the planted slow rank 2 and slow link 6->7 (TRUTH.json) come first, with hand-checked
evidence; on modified copies of the same result the ranking follows the evidence."""
from __future__ import annotations

import copy
import json
import os

import pandas as pd
import pytest

from conftest import GOLDEN, needs_shared

from msprof_kit.cluster.result import ClusterResult, load_text_outputs
from msprof_kit.cluster.slow import (LINK_COLUMNS, RANK_COLUMNS, collective_waits, node_positions, rank_votes,
                                     slow_links, slow_ranks, summary, write_slow_outputs)

CASE = os.path.join(GOLDEN, "910b_hccl_8ranks")
TEXT = os.path.join(CASE, "msprof_analyze", "text_all")
WORLD = "7415574198778220483"


@pytest.fixture(scope="module")
def golden() -> ClusterResult:
    if not os.path.isdir(CASE):
        pytest.skip("../shared/golden is not beside the repo")
    return load_text_outputs(TEXT)


def truth() -> dict:
    with open(os.path.join(CASE, "TRUTH.json")) as f:
        return json.load(f)


def ops_of(result: ClusterResult) -> dict:
    return next(iter(result.communication.values()))["step"]


@needs_shared
def test_golden_slow_rank_and_link_come_first(golden, tmp_path):
    paths = write_slow_outputs(golden, str(tmp_path))
    assert [os.path.basename(p) for p in paths] == ["slow_ranks.csv", "slow_links.csv"]
    ranks = pd.read_csv(paths[0])
    links = pd.read_csv(paths[1], dtype={"link": str})
    assert list(ranks.columns) == RANK_COLUMNS and list(links.columns) == LINK_COLUMNS
    assert int(ranks["rank"].iloc[0]) == truth()["slow_rank"] == 2
    assert links["link"].iloc[0] == "-".join(str(r) for r in truth()["slow_link"]) == "6-7"
    assert sorted(ranks["rank"]) == list(range(8))
    assert summary(golden) == {"slow_rank": 2, "slow_link": "6-7"}


@needs_shared
def test_slow_rank_evidence_by_hand(golden):
    ranks = slow_ranks(golden).set_index("rank")
    two = ranks.loc[2]
    # the others waited on rank 2 in all-reduces 1, 3 and 6 (eager steps 2, 4; graph iteration 2): the
    # median wait + transit of the others (ranks 0, 0, 5: 2.76352 + 0.19894, 3.51384 + 0.19820,
    # 2.85914 + 0.20296 ms) against its own (0.32890 + 0.20456, 0.30918 + 0.20814, 0.33700 + 0.19290 ms)
    assert two["votes"] == 3
    assert two["wait_caused_ms"] == pytest.approx((2.96246 - 0.53346) + (3.71204 - 0.51732) + (3.06210 - 0.52990))
    assert two["voted_ops"] == "hcom_allReduce__483_3_1;hcom_allReduce__483_6_1;hcom_allReduce__483_1_1"
    assert two["computing_us"] == pytest.approx(10044.02, abs=0.01)
    assert two["computing_vs_median"] > 4  # its compute ran 3x, the rest of its time waiting less
    # rank 6 waits least in 6 of the 10 all-reduces (its slow link to 7 keeps rank 7 late in every ring
    # step), but its transit is longer by as much (0.74 against 0.20 ms a collective): the time it
    # spends in them is the others', and it gets no vote; a vote on the wait alone would go to it
    waits = collective_waits(golden)
    least_wait = waits.sort_values("wait_ms").drop_duplicates(["step", "group", "op"])
    assert (least_wait.loc[least_wait["op"].str.startswith("hcom_allReduce"), "rank"] == 6).sum() == 6
    assert ranks.loc[6, "votes"] == 0 and ranks.loc[6, "wait_caused_ms"] == 0


@needs_shared
def test_p2p_ops_do_not_vote(golden):
    waits = collective_waits(golden)
    assert not waits["op"].str.contains("send|receive").any()
    assert len(waits) == 12 * 8


@needs_shared
def test_ranking_follows_the_waits(golden):
    """Rank 5 made to arrive last in every all-reduce (its wait cut to a hundredth) and rank 2 on time
    (its wait set to rank 0's): now rank 5 is first and rank 2 has no vote."""
    changed = copy.deepcopy(golden)
    ops = ops_of(changed)
    for index in range(10):
        info = ops[f"hcom_allReduce__483_{index}_1@{WORLD}"]["5"]["Communication Time Info"]
        info["Wait Time(ms)"] /= 100
    for index in (1, 3, 6):  # and rank 2 no longer late
        wait = ops[f"hcom_allReduce__483_{index}_1@{WORLD}"]["0"]["Communication Time Info"]["Wait Time(ms)"]
        ops[f"hcom_allReduce__483_{index}_1@{WORLD}"]["2"]["Communication Time Info"]["Wait Time(ms)"] = wait
    ranks = slow_ranks(changed)
    assert int(ranks["rank"].iloc[0]) == 5
    assert ranks.set_index("rank").loc[2, "votes"] == 0


@needs_shared
def test_small_waits_often_do_not_beat_long_waits(golden):
    """Rank 3 made the last to arrive in the seven all-reduces where rank 2 is not (by 20 µs more than
    the earliest): seven votes of 0.2-0.6 ms still come after rank 2's three of 2.4-3.2 ms."""
    changed = copy.deepcopy(golden)
    ops = ops_of(changed)
    for key, per_rank in ops.items():
        if "allReduce" in key and not any(f"__483_{i}_1@" in key for i in (1, 3, 6)):
            waits = sorted(v["Communication Time Info"]["Wait Time(ms)"] for v in per_rank.values())
            per_rank["3"]["Communication Time Info"]["Wait Time(ms)"] = max(waits[0] - 0.02, 0.0)
    ranks = slow_ranks(changed)
    assert ranks.set_index("rank").loc[3, "votes"] == 7
    assert int(ranks["rank"].iloc[0]) == 2


@needs_shared
def test_ranking_follows_the_bandwidth(golden):
    """Link 3-4 made 3x slower over HCCS in every all-reduce sample and total, link 6-7 repaired to
    its neighbours' bandwidth: 3-4 comes first."""
    changed = copy.deepcopy(golden)
    ops = ops_of_matrix(changed)
    for key, links in ops.items():
        if key.startswith("allreduce-"):
            links["3-4"]["Transit Time(ms)"] *= 3
            links["6-7"]["Transit Time(ms)"] = links["5-6"]["Transit Time(ms)"]
    links = slow_links(changed)
    assert links["link"].iloc[0] == "3-4" and links["transport"].iloc[0] == "HCCS"
    assert links["ratio"].iloc[0] == pytest.approx(1 / 3, rel=0.05)
    assert links.set_index(["link", "transport"]).loc[("6-7", "HCCS"), "ratio"] == pytest.approx(1.0, abs=0.02)


def ops_of_matrix(result: ClusterResult) -> dict:
    return next(iter(result.matrix.values()))["step"]


@needs_shared
def test_slow_link_evidence_by_hand(golden):
    links = slow_links(golden).set_index(["link", "transport"])
    slow = links.loc[("6-7", "HCCS")]
    # all-reduce total on 6-7: 45.8752 MB in 4.7449 ms; the HCCS links' median (8 links) 34.374 GB/s
    assert slow["bandwidth_gbps"] == pytest.approx(45.8752 / 4.7449)
    hccs = links.xs("HCCS", level="transport")["bandwidth_gbps"]
    assert slow["transport_median_gbps"] == pytest.approx(hccs.median())
    assert slow["ratio"] == pytest.approx(0.2813, abs=1e-4)
    assert slow["op_samples"] == 5 and slow["op_ratio"] < 0.35
    assert slow["slowest_op"] == "hcom_allReduce__483_7_1"
    assert ("1-1", "LOCAL") not in links.index  # a rank's local copy is no link


def test_votes_need_a_clear_gap():
    waits = pd.DataFrame({"step": "step", "group": "g", "op": ["a"] * 4 + ["b"] * 4, "rank": [0, 1, 2, 3] * 2,
                          "wait_ms": [1.0, 1.1, 0.1, 1.2, 0.5, 0.52, 0.49, 0.51], "transit_ms": 0.0, "elapse_ms": 2.0})
    votes = rank_votes(waits).set_index("op")
    assert votes.loc["a", "rank"] == 2 and bool(votes.loc["a", "vote"])
    assert votes.loc["a", "gap_ms"] == pytest.approx(1.1 - 0.1)
    assert votes.loc["b", "rank"] == 2 and not bool(votes.loc["b", "vote"])  # 0.49 vs 0.51: no one is late


def test_peers_at_the_same_node_position():
    """Three hosts of four ranks: position 3 (the rank whose ring edge leaves the host) always spends a
    tenth of the others' time, rank 5 (position 1) 0.8 ms against its peers' 1.0 ms in collective a.
    Against all ranks the least time is a position-3 rank's (and it would be voted, at a tenth of the
    median); against its position peers rank 5 stands alone and is voted, with the gap to its peers."""
    hosts = pd.DataFrame({"rankId": range(12), "hostUid": ["h0"] * 4 + ["h1"] * 4 + ["h2"] * 4})
    positions = node_positions(hosts)
    assert positions == {r: r % 4 for r in range(12)}
    rows = []
    for op in ("a", "b"):
        for rank in range(12):
            held = 0.1 + 0.001 * rank if rank % 4 == 3 else 1.0 + 0.001 * rank
            if op == "a" and rank == 5:
                held = 0.8
            rows.append(("step", "g", op, rank, held, 0.0, 1.2))
    waits = pd.DataFrame(rows, columns=["step", "group", "op", "rank", "wait_ms", "transit_ms", "elapse_ms"])
    alone = rank_votes(waits).set_index("op")
    assert alone.loc["a", "rank"] == 3 and bool(alone.loc["a", "vote"])
    peers = rank_votes(waits, positions).set_index("op")
    assert peers.loc["a", "rank"] == 5 and bool(peers.loc["a", "vote"])
    assert peers.loc["a", "gap_ms"] == pytest.approx((1.001 + 1.009) / 2 - 0.8)  # ranks 1 and 9
    assert not peers.loc["b", "vote"]  # nobody stands out among its peers
    # two hosts: two ranks a position, too few peers; every rank is compared with all the others
    assert rank_votes(waits, {r: r % 6 for r in range(12)}).set_index("op").loc["a", "rank"] == 3
