"""How many rows the ingest's steps take at a time. Read as `limits.NAME` when used, so that a
test can shrink them all at once (tests/test_import_chunks.py)."""

SAMPLE_EVERY = 64  # one key in this many kept in memory to place windows' edges
SPILL_ROWS = 1 << 18  # tensor_info records grouped into ops at a time (with their 224 tensor bytes)
TASK_ROWS = 1 << 17  # device tasks matched and written at a time
WINDOW_TRACKS = 3 << 16  # host task tracks associated at a time: the APIs' windows (api_windows.WINDOW_ROWS APIs)
# are cut sooner when they would hold more tracks. A compute collection has about 2.8 APIs a task, so
# a window of 512k APIs holds about 180k tracks and this bound does not cut it; a communication one
# has about 1.35 (one level-5500 API a task) and would hold 370k
# the devices' forked workers run this much nicer than the rest of the import: their tasks are read
# only after the host's records, so the host's reading and the tensor texts (awaited first) go first
DEVICE_NICE = 10
