"""`python -m synth OUT_DIR [N] [options]` (with tests/ on sys.path): write a collection and
time it (synth.collection.main)."""
from synth.collection import main

main()
