"""The slow ranks and slow links of a cluster, from a ClusterResult: `slow_ranks.csv` and
`slow_links.csv`, slowest first.

Slow ranks. In a collective every rank waits for the last one to arrive, so the rank the others
wait on is the one that spends the least time in it while the others spend long. That time is the
rank's wait plus its transit ("Wait Time(ms)" + "Transit Time(ms)"): the reference's analysis books a
wait as Wait (a Notify_Wait) except where it closes an RDMA write, whose Notify_Waits for the
remote's done / ack count as Transit, so a rank whose ring edge leaves the node waits for a late
rank inside its transit; the sum is the same whichever way the wait was booked. A rank is compared
with its peers in the same collective: the ranks at the same position on the other hosts (the last
rank of each node with the last ranks of the other nodes: at 256 ranks their task lists are longer
and they spend a third less time in every collective), or all ranks when there are fewer than
MIN_PEERS at a position (one or two hosts, or no hosts known). Never with its own history, so a rank
late in every collective is named too. Per collective (p2p send/receive left out, as msprof-analyze's
slow_rank recipe does) the least time of each peer class is a candidate, voted when the others spent
at least MIN_GAP_MS longer and either it spent at most MAX_WAIT_SHARE of its peers' median time or
it stands alone below them (by OUTLIER_MADS robust deviations: a ring's own waiting grows with the
ranks and hides a late arrival of milliseconds from a ratio); the voted candidate with the largest
gap gets the vote, the gap being how long the others waited on it. Ranks are ordered by that time
summed over their votes (`wait_caused_ms`), then by votes. msprof-analyze's recipe counts votes only
(a Dixon / 3-sigma outlier test on each collective's duration) and does not read msprof data
(docs/cluster.md).

Slow links. Each link (src-dst in global ranks, its own rank's local copy src-src left out) per
transport: its bandwidth over all its ops (the matrix's per-op-type totals summed), against the
median bandwidth of all links of that transport (`ratio`); and, sample by sample (the per-op
entries top1 / middle / bottom1..3 of each op type and group), its bandwidth against the median of
the same sample over the links of that transport (`op_ratio`, the median of those quotients), which
compares messages of the same size with each other. Links are ordered by op_ratio, then ratio.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from ..errors import OutputError
from .result import ClusterResult

SLOW_RANKS_CSV = "slow_ranks.csv"
SLOW_LINKS_CSV = "slow_links.csv"
TOTAL = "Total Op Info"
P2P_WORDS = ("send", "receive", "recv")
MIN_GAP_MS = 0.01     # a vote needs the others to have spent at least 10 µs longer in the collective (median)
MAX_WAIT_SHARE = 0.5  # ... and the voted rank at most half of their median time, or
OUTLIER_MADS = 3 * 1.4826  # ... it alone below its peers by 3 sigma (as median absolute deviations) of their times
MIN_PEERS = 3         # ranks at one position on the hosts needed to compare a rank with those peers only
SAMPLES = ("top1", "middle", "bottom1", "bottom2", "bottom3")
RANK_COLUMNS = ["rank", "wait_caused_ms", "votes", "collectives", "voted_ops", "wait_ms", "wait_vs_median",
                "wait_ratio", "computing_us", "computing_vs_median", "communication_not_overlapped_us", "free_us"]
LINK_COLUMNS = ["link", "transport", "bandwidth_gbps", "transport_median_gbps", "ratio", "op_ratio", "op_samples",
                "slowest_op", "slowest_op_gbps", "transit_size_mb", "transit_time_ms"]


def _is_p2p(op: str) -> bool:
    low = op.lower()
    return any(word in low for word in P2P_WORDS)


def collective_waits(result: ClusterResult) -> pd.DataFrame:
    """One row per (group, collective op, rank): wait, transit and elapse time (ms), p2p ops left out."""
    rows = []
    for steps in result.communication.values():
        for step, ops in steps.items():
            for key, ranks in ops.items():
                op, _, group = key.rpartition("@")
                if op == TOTAL or _is_p2p(op) or not isinstance(ranks, dict):
                    continue
                for rank, info in ranks.items():
                    time = info.get("Communication Time Info", {})
                    rows.append((str(step), group, op, int(rank), float(time.get("Wait Time(ms)", 0) or 0),
                                 float(time.get("Transit Time(ms)", 0) or 0),
                                 float(time.get("Elapse Time(ms)", 0) or 0)))
    return pd.DataFrame(rows, columns=["step", "group", "op", "rank", "wait_ms", "transit_ms", "elapse_ms"])


def node_positions(hosts: pd.DataFrame) -> Dict[int, int]:
    """Rank -> its position on its host (0 for the host's lowest rank, 1 for the next ...), from the
    result's `hosts`; empty without them."""
    if hosts.empty or not {"rankId", "hostUid"} <= set(hosts.columns):
        return {}
    frame = pd.DataFrame({"rankId": pd.to_numeric(hosts["rankId"]).astype("int64").to_numpy(),
                          "hostUid": hosts["hostUid"].astype(str).to_numpy()})
    frame = frame.drop_duplicates("rankId").sort_values("rankId", kind="stable")
    position = frame.groupby("hostUid", sort=False).cumcount()
    return dict(zip(frame["rankId"].tolist(), position.astype("int64").tolist()))


def rank_votes(waits: pd.DataFrame, positions: Optional[Dict[int, int]] = None) -> pd.DataFrame:
    """Per collective: the rank the others waited on, if any. Each rank's time in the collective is
    its wait + transit (`held_ms`); it is compared with its peers: the ranks at the same position on
    the other hosts (`positions`, when every position of the collective has at least MIN_PEERS
    ranks), else all ranks of the collective. In each peer class the rank with the least time is a
    candidate: `others_held_ms` the median time of its peers, `gap_ms` the difference (how long they
    waited on it); it is voted when the gap is at least MIN_GAP_MS and either its time is at most
    MAX_WAIT_SHARE of its peers' or it stands alone: the next peer's time is above it by at least
    OUTLIER_MADS median absolute deviations of its peers' times (Dixon's idea, in robust units). Of the voted candidates of a collective the one with the largest gap gets the vote.
    One row per collective: its best candidate (the voted one if any)."""
    keys = ["step", "group", "op"]
    held = waits[keys + ["rank"]].assign(held_ms=waits["wait_ms"].to_numpy(np.float64) +
                                         waits["transit_ms"].to_numpy(np.float64))
    mapped = held["rank"].map(positions or {})
    held["peers"] = mapped.fillna(-1).astype("int64") if positions else 0
    sizes = held.groupby(keys + ["peers"], sort=False)["rank"].transform("size")
    held.loc[sizes.groupby([held[k] for k in keys], sort=False).transform("min").to_numpy() < MIN_PEERS,
             "peers"] = 0
    classes = keys + ["peers"]
    ordered = held.sort_values(classes + ["held_ms", "rank"], kind="stable").reset_index(drop=True)
    position = ordered.groupby(classes, sort=False).cumcount()
    first = ordered[position == 0].set_index(classes)
    others = ordered[position > 0]
    median = others.groupby(classes, sort=False)["held_ms"].median()
    spread = (others["held_ms"] - others.join(median.rename("m"), on=classes)["m"]).abs()
    mad = spread.groupby([others[c] for c in classes], sort=False).median()
    following = ordered[position == 1].set_index(classes)["held_ms"]
    out = first[["rank", "held_ms"]].join(median.rename("others_held_ms"), how="inner")
    out = out.join(mad.rename("others_mad_ms")).join(following.rename("next_held_ms")).reset_index()
    out["gap_ms"] = out["others_held_ms"] - out["held_ms"]
    out["vote"] = (out["gap_ms"] >= MIN_GAP_MS) & (
        (out["held_ms"] <= MAX_WAIT_SHARE * out["others_held_ms"]) |
        (out["next_held_ms"] - out["held_ms"] >= OUTLIER_MADS * out["others_mad_ms"]))
    out = out.sort_values(keys + ["vote", "gap_ms"], ascending=[True, True, True, False, False], kind="stable")
    return out.drop_duplicates(keys).drop(columns="peers").reset_index(drop=True)


def _ratio_to_median(values: pd.Series) -> np.ndarray:
    median = float(values.median()) if len(values) else float("nan")
    data = values.to_numpy(np.float64)
    if not np.isfinite(median) or median == 0:
        return np.full(len(data), np.nan)
    return data / median


def slow_ranks(result: ClusterResult) -> pd.DataFrame:
    """slow_ranks.csv: every rank, slowest first (module docstring), with its evidence: how long the
    others waited on it (ms, their median wait + transit less its own) and in how many collectives, its own wait (ms, and against the median
    rank), its wait ratio (wait / (wait + transit)) and its step-trace times (µs) against the median."""
    waits = collective_waits(result)
    step = result.step_trace
    ranks = sorted(set(waits["rank"].tolist()) |
                   {int(i) for t, i in zip(step.get("Type", []), step.get("Index", [])) if str(t) == "rank"})
    out = pd.DataFrame({"rank": pd.Series(ranks, dtype="int64")})
    votes = (rank_votes(waits, node_positions(result.hosts)) if not waits.empty
             else pd.DataFrame(columns=["rank", "gap_ms", "vote", "op"]))
    voted = votes.loc[votes["vote"].to_numpy(bool)].sort_values("gap_ms", ascending=False, kind="stable")
    per_rank = voted.groupby("rank").agg(wait_caused_ms=("gap_ms", "sum"), votes=("gap_ms", "size"),
                                         voted_ops=("op", lambda ops: ";".join(ops)))
    own = waits.groupby("rank").agg(collectives=("op", "size"), wait_ms=("wait_ms", "sum"),
                                    transit_ms=("transit_ms", "sum"))
    out = out.join(per_rank, on="rank").join(own, on="rank")
    out["wait_caused_ms"] = out["wait_caused_ms"].fillna(0.0)
    out["votes"] = out["votes"].fillna(0).astype("int64")
    out["collectives"] = out["collectives"].fillna(0).astype("int64")
    out["voted_ops"] = out["voted_ops"].fillna("")
    out["wait_vs_median"] = _ratio_to_median(out["wait_ms"])
    whole = (out["wait_ms"] + out["transit_ms"]).to_numpy(np.float64)
    out["wait_ratio"] = np.divide(out["wait_ms"].to_numpy(np.float64), whole, out=np.full(len(out), np.nan),
                                  where=whole > 0)
    rows = step[step["Type"].astype(str) == "rank"]
    trace = pd.DataFrame({"rank": pd.to_numeric(rows["Index"]).astype("int64").to_numpy(),
                          "computing_us": rows["Computing"].to_numpy(np.float64),
                          "communication_not_overlapped_us": rows["Communication(Not Overlapped)"].to_numpy(np.float64),
                          "free_us": rows["Free"].to_numpy(np.float64)}).drop_duplicates("rank")
    out = out.merge(trace, on="rank", how="left")
    out["computing_vs_median"] = _ratio_to_median(out["computing_us"])
    out = out.sort_values(["wait_caused_ms", "votes", "computing_vs_median", "rank"],
                          ascending=[False, False, False, True], kind="stable", na_position="last")
    return out[RANK_COLUMNS].reset_index(drop=True)


def matrix_links(result: ClusterResult) -> pd.DataFrame:
    """One row per entry of cluster_communication_matrix.json between two ranks (local copies and
    Total Op Info left out): group, op type, sample (top1 ... total), src, dst, transport, size (MB),
    time (ms), bandwidth (GB/s, size / time) and the op's name."""
    rows = []
    for steps in result.matrix.values():
        for ops in steps.values():
            for key, links in ops.items():
                base, _, group = key.rpartition("@")
                kind, _, sample = base.rpartition("-")
                if base == TOTAL or not kind or not isinstance(links, dict):
                    continue
                for link, value in links.items():
                    src, _, dst = str(link).partition("-")
                    if src == dst:
                        continue
                    rows.append((group, kind, sample, int(src), int(dst), str(value.get("Transport Type", "")),
                                 float(value.get("Transit Size(MB)", 0) or 0),
                                 float(value.get("Transit Time(ms)", 0) or 0), str(value.get("Op Name", "") or "")))
    frame = pd.DataFrame(rows, columns=["group", "kind", "sample", "src", "dst", "transport", "size_mb", "time_ms",
                                        "op_name"])
    size = frame["size_mb"].to_numpy(np.float64)
    time = frame["time_ms"].to_numpy(np.float64)
    frame["gbps"] = np.divide(size, time, out=np.full(len(frame), np.nan), where=time > 0)
    return frame


def slow_links(result: ClusterResult) -> pd.DataFrame:
    """slow_links.csv: every link per transport, slowest first (module docstring): its bandwidth
    (GB/s), its transport's median over all links, their ratio, the median ratio of its per-op
    samples to the same samples of the other links of its transport, and its slowest sample."""
    entries = matrix_links(result)
    if entries.empty:
        return pd.DataFrame(columns=LINK_COLUMNS)
    keys = ["src", "dst", "transport"]
    totals = entries[entries["sample"] == "total"].groupby(keys).agg(
        transit_size_mb=("size_mb", "sum"), transit_time_ms=("time_ms", "sum")).reset_index()
    size = totals["transit_size_mb"].to_numpy(np.float64)
    time = totals["transit_time_ms"].to_numpy(np.float64)
    totals["bandwidth_gbps"] = np.divide(size, time, out=np.full(len(totals), np.nan), where=time > 0)
    totals["transport_median_gbps"] = totals.groupby("transport")["bandwidth_gbps"].transform("median")
    totals["ratio"] = totals["bandwidth_gbps"] / totals["transport_median_gbps"]
    samples = entries[entries["sample"].isin(SAMPLES)].copy()
    sample_median = samples.groupby(["group", "kind", "sample", "transport"])["gbps"].transform("median")
    samples["quotient"] = samples["gbps"] / sample_median
    per_link = samples.groupby(keys).agg(op_ratio=("quotient", "median"), op_samples=("quotient", "size"))
    slowest = samples.sort_values("gbps", kind="stable").drop_duplicates(keys).set_index(keys)
    per_link["slowest_op"] = slowest["op_name"]
    per_link["slowest_op_gbps"] = slowest["gbps"]
    out = totals.join(per_link, on=keys)
    out["op_samples"] = out["op_samples"].fillna(0).astype("int64")
    out["link"] = out["src"].astype(str) + "-" + out["dst"].astype(str)
    out = out.sort_values(["op_ratio", "ratio", "src", "dst"], kind="stable", na_position="last")
    return out[LINK_COLUMNS].reset_index(drop=True)


def write_slow_outputs(result: ClusterResult, out_dir: str) -> List[str]:
    """Write slow_ranks.csv and slow_links.csv into `out_dir`; returns their paths."""
    frames: Tuple[Tuple[str, pd.DataFrame], ...] = ((SLOW_RANKS_CSV, slow_ranks(result)),
                                                    (SLOW_LINKS_CSV, slow_links(result)))
    paths = []
    try:
        os.makedirs(out_dir, exist_ok=True)
        for name, frame in frames:
            path = os.path.join(out_dir, name)
            frame.to_csv(path + ".partial", index=False, float_format="%.6g")
            os.replace(path + ".partial", path)
            paths.append(path)
    except OSError as e:
        raise OutputError(f"cannot write the slow rank and link files: {e}", path=out_dir) from None
    return paths


def summary(result: ClusterResult) -> Dict[str, object]:
    """The slowest rank and link in one line each, for a run's closing message."""
    ranks = slow_ranks(result)
    links = slow_links(result)
    return {"slow_rank": int(ranks["rank"].iloc[0]) if len(ranks) and ranks["votes"].iloc[0] > 0 else None,
            "slow_link": str(links["link"].iloc[0]) if len(links) else None}
