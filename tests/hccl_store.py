"""Test helper only: put a golden msprof.db's COMMUNICATION_OP and COMMUNICATION_TASK_INFO into an
imported store (its STRING_IDS ids and globalTaskIds remapped to the store's), for exercising the
communication summaries before (or without) the HCCL ingest."""
from __future__ import annotations

import sqlite3
from typing import Dict, Tuple

STRING_COLUMNS = {"COMMUNICATION_OP": ("opName", "groupName", "opType"),
                  "COMMUNICATION_TASK_INFO": ("name", "taskType", "groupName")}


def add_golden_communication(store_path: str, golden_db: str) -> None:
    """Copy the golden COMMUNICATION_* rows into the store at `store_path` (replacing any)."""
    gold = sqlite3.connect(golden_db)
    conn = sqlite3.connect(store_path)
    try:
        gold_strings = dict(gold.execute("SELECT id, value FROM STRING_IDS"))
        ours = {v: i for i, v in conn.execute("SELECT id, value FROM STRING_IDS")}
        next_id = max(ours.values(), default=-1) + 1

        def string_id(gid: int) -> int:
            nonlocal next_id
            value = gold_strings[gid]
            if value not in ours:
                conn.execute("INSERT INTO STRING_IDS (id, value) VALUES (?, ?)", (next_id, value))
                ours[value] = next_id
                next_id += 1
            return ours[value]

        key = "SELECT globalTaskId, startNs, streamId, taskId FROM TASK"
        by_key: Dict[Tuple[int, int, int], int] = {(s, st, t): g for g, s, st, t in conn.execute(key)}
        task_of = {g: by_key[(s, st, t)] for g, s, st, t in gold.execute(key) if (s, st, t) in by_key}
        for table, strings in STRING_COLUMNS.items():
            schema = gold.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
            conn.execute(f"DROP TABLE IF EXISTS {table}")
            conn.execute(schema)
            cur = gold.execute(f"SELECT * FROM {table}")
            names = [d[0] for d in cur.description]
            rows = []
            for row in cur.fetchall():
                values = list(row)
                for name in strings:
                    values[names.index(name)] = string_id(values[names.index(name)])
                if "globalTaskId" in names:
                    at = names.index("globalTaskId")
                    if values[at] not in task_of:
                        continue
                    values[at] = task_of[values[at]]
                rows.append(values)
            conn.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(names))})", rows)
        conn.commit()
    finally:
        gold.close()
        conn.close()
