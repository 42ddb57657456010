"""From a raw collection to its store: the modern ingest (build.py), the legacy JOB one (job.py)
and the steps they share. The ingest is the only caller of parsers/; it hands finished tables to
the store's writer (store.TableWriter) and is run by importer.py.

* clocks: the collection's start and end from its control files;
* tasks: STRING_IDS (StringPool) and the globalTaskId numbering of tasks;
* info: KIT_INFO, what each result directory's control files say about its device;
* streams: reading a data kind's slice files (whole, a chunk of records at a time, or as lines)
  for parsers/ to decode;
* job, job_links: the legacy JOB pipeline (build_job), and its naming of tasks by task id alone."""
