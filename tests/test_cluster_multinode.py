"""slow_ranks.csv beyond one node (msprof_kit/cluster/slow.py): a synthetic 16-rank job on 2 nodes
(mkprof.py --case 910b_hccl_nranks: rank r on node r // 8, ring all-reduce over HCCS inside a node
and RoCE / RDMA between nodes, one slow rank and one slow HCCS link planted, TRUTH.json), from the
raw ranks through rank_tables and join: the planted rank comes first. The last rank of each node (7,
15) waits for a late rank inside its RDMA transit and has almost no Wait at all, so a vote on the
wait alone would name it; the vote on wait + transit names the planted rank. Two jobs: seed 1 (slow
rank 5, link 12-13) and seed 28 (slow rank 7, link 2-3: the planted rank is itself the last of a
node, the position that took the votes on the wait alone)."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from conftest import SHARED

from msprof_kit.cluster.join import ClusterResult, join
from msprof_kit.cluster.rank_tables import rank_tables
from msprof_kit.cluster.ranks import find_ranks
from msprof_kit.cluster.slow import collective_waits, rank_votes, slow_links, slow_ranks, summary
from msprof_kit.errors import Diagnostics

MKPROF = os.path.join(SHARED, "tools", "mkprof.py")
RANKS, N_OPS = 16, 40
LAST_OF_NODE = {7, 15}
PLANTED = {1: (5, "12-13"), 28: (7, "2-3")}  # seed: (slow rank, slow link) of TRUTH.json


@pytest.fixture(scope="module", params=sorted(PLANTED))
def job(request, tmp_path_factory):
    if not os.path.isfile(MKPROF):
        pytest.skip("../shared/tools/mkprof.py is not beside the repo")
    seed = request.param
    out = str(tmp_path_factory.mktemp(f"job{seed}"))
    truth_path = os.path.join(out, "TRUTH.json")
    subprocess.run([sys.executable, MKPROF, out, "--case", "910b_hccl_nranks", "--ranks", str(RANKS), "--seed",
                    str(seed), "--n-ops", str(N_OPS), "--truth", truth_path], check=True, stdout=subprocess.DEVNULL)
    (cluster,) = glob.glob(os.path.join(out, "CLUSTER_*"))
    diag = Diagnostics()
    ranks = find_ranks(cluster, diag)
    result = join([rank_tables(r.path) for r in ranks], {}, diag)
    with open(truth_path) as f:
        truth = json.load(f)
    return {"result": result, "truth": truth, "seed": seed}


def test_two_nodes(job):
    result: ClusterResult = job["result"]
    hosts = result.hosts.set_index("rankId")
    assert sorted(hosts.index) == list(range(RANKS))
    assert hosts["hostName"].nunique() == 2
    assert all(hosts.loc[r, "hostName"] == hosts.loc[r - r % 8, "hostName"] for r in range(RANKS))


def test_planted_slow_rank_and_link_come_first(job):
    truth = job["truth"]
    rank, link = PLANTED[job["seed"]]
    assert truth["slow_rank"] == rank and "-".join(map(str, truth["slow_link"])) == link
    ranks = slow_ranks(job["result"])
    first, second = ranks.iloc[0], ranks.iloc[1]
    assert int(first["rank"]) == truth["slow_rank"]
    assert first["votes"] >= 2 and first["wait_caused_ms"] > 5 * second["wait_caused_ms"]
    assert first["computing_vs_median"] > 1.2  # its compute ran 3x in the slow steps
    assert slow_links(job["result"])["link"].iloc[0] == link
    assert summary(job["result"]) == {"slow_rank": rank, "slow_link": link}


def test_a_vote_on_the_wait_alone_would_name_the_last_rank_of_a_node(job):
    """Where rank 5 is voted, the least Wait belongs to rank 7 or 15, whose waiting went into
    Transit (its ring edge leaves the node: the Notify_Waits closing an RDMA write are transit);
    over all collectives their Wait is a few per cent of their wait + transit."""
    if job["seed"] != 1:
        pytest.skip("the planted rank is itself the last of a node")
    waits = collective_waits(job["result"])
    voted = rank_votes(waits)
    voted = voted[voted["vote"].to_numpy(bool)]
    assert set(voted["rank"]) == {5}
    keys = ["step", "group", "op"]
    least_wait = waits.sort_values(keys + ["wait_ms", "rank"]).drop_duplicates(keys).set_index(keys)["rank"]
    assert set(least_wait.loc[[tuple(k) for k in voted[keys].to_numpy()]]) <= LAST_OF_NODE
    ranks = slow_ranks(job["result"]).set_index("rank")
    assert (ranks.loc[sorted(LAST_OF_NODE), "wait_ratio"] < 0.1).all()
    assert (ranks.drop(sorted(LAST_OF_NODE) + [5])["wait_ratio"] > 0.5).all()
