"""Exporters: everything msprof-kit writes from a collection's store (never from raw files).

Each exporter takes an `ExportContext` (the open store, what to export and where) and returns the
paths it wrote. `context.py` builds that context; `summary.py` writes the CSV/JSON summaries;
`timeline.py` writes the chrome-trace timeline; `readme.py` the README.txt the reference adds.
"""
