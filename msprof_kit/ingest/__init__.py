"""From a raw collection to its store: the steps the modern (build.py) and the legacy JOB
(job.py) ingest share. The ingest is the only caller of parsers/; it hands finished tables to
the store's writer (store.TableWriter) and is run by importer.py.

* clocks: the collection's start and end from its control files;
* tasks: STRING_IDS (StringPool) and the globalTaskId numbering of tasks;
* info: KIT_INFO, what each result directory's control files say about its device."""
