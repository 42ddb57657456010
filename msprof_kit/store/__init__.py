"""The store room: one sqlite database per collection, and the unified DB made from it.

Its public face, the names the other rooms use (`from . import store; store.open_store(...)`):

* `paths`: where a collection's store lives (`store_path`, `stand_in`, `output_root`), whether the
  one there can be read (`store_problem`), and the leftovers of killed writers;
* `columns`: column-wise tables in KIT_COLUMNS, encoded (`CodedTexts`, `text_codes`) and read back
  (`StoredColumns`, `read_columns`, `iter_columns`);
* `writer`: `TableWriter`, which writes a database table by table and puts it in place atomically;
* `read`: opening a store, the warnings its import reported, its identity, its iterations, integer
  columns a block of rows at a time (`int_blocks`, `real_values`) and texts of string ids (`texts_of`);
* `unified`: the unified DB `msprof_{ts}.db` (`export_db`, `current_db`);
* `pages` (tables written as sqlite b-tree pages) and `before_start` (the host APIs before the
  collection start that the reference's exports drop) serve the writer and the exporters.

The store knows no parser: the ingest hands it tables of numpy columns."""
from __future__ import annotations

from .columns import CodedTexts, StoredColumns, Table, iter_columns, read_columns, text_codes
from .paths import (APPLICATION_ID, NO_STORE, STORE_DIR, STORE_ENV, STORE_NAME, STORE_VERSION, cache_root,
                    db_path, elsewhere_note, output_root, own_store_path, partial_path, remove_leftovers,
                    stand_in, store_path, store_problem)
from .read import (IterationSpans, fetch_ints, import_warnings, int_blocks, int_columns, iteration_spans, iterations,
                   open_store, real_values, repeat_warnings, store_identity, string_table, texts_of)
from .unified import DB_APPLICATION_ID, current_db, export_db
from .writer import TableWriter, put_info, write_failure

__all__ = [
    "APPLICATION_ID", "NO_STORE", "STORE_DIR", "STORE_ENV", "STORE_NAME", "STORE_VERSION", "cache_root",
    "db_path", "elsewhere_note", "output_root", "own_store_path", "partial_path", "remove_leftovers",
    "stand_in", "store_path", "store_problem",
    "CodedTexts", "StoredColumns", "Table", "iter_columns", "read_columns", "text_codes",
    "TableWriter", "put_info", "write_failure",
    "IterationSpans", "fetch_ints", "import_warnings", "int_blocks", "int_columns", "iteration_spans", "iterations",
    "open_store",
    "real_values", "repeat_warnings", "store_identity", "string_table", "texts_of",
    "DB_APPLICATION_ID", "current_db", "export_db",
]
