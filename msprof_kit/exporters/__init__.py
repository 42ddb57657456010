"""Exporters: everything msprof-kit writes from a collection's store (never from raw files).

Each exporter takes an `ExportContext` (the open store, what to export and where) and lists the
paths it wrote in it; `run.py` holds the registry (`EXPORTERS`: `export <what>` -> its exporter)
and runs them. `context.py` builds that context; `summary/` writes the CSV/JSON summaries (one
module per report); `timeline/` writes the chrome-trace timeline (one module per layer);
`step_trace.py` the step-trace CSV; `soc.py` a legacy JOB collection's files; `readme.py` the
README.txt the reference adds.
"""
