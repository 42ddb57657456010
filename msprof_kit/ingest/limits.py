"""How many rows the ingest's steps take at a time. Read as `limits.NAME` when used, so that a
test can shrink them all at once (tests/test_import_chunks.py)."""

SAMPLE_EVERY = 64  # one key in this many kept in memory to place windows' edges
SPILL_ROWS = 1 << 18  # tensor_info records grouped into ops at a time (with their 224 tensor bytes)
TASK_ROWS = 1 << 18  # device tasks matched and written at a time
