"""From a raw collection to its store. The ingest is the only caller of parsers/; it hands each
finished table to the store's writer through a TableSink (sink.py) and is run by importer.py:
`assemble.build` for PROF collections, `job.build_job` for legacy JOB ones.

Shared by both pipelines:
* clocks: the collection's start and end, and the host's and devices' clocks, from its control files;
* tasks: STRING_IDS (StringPool) and the globalTaskId numbering of tasks (global_ids, GlobalIds);
* info: KIT_INFO, what each result directory's control files say about its device;
* sink: the TableSink contract with the store's writer;
* streams: reading a data kind's slice files (whole, a chunk of records at a time, or as lines)
  for parsers/ to decode.

The PROF pipeline (assemble.py runs it):
* host: APIs into CANN_API and KIT_API, by windows of begins (api_windows), and HostData;
  names: the host's dictionaries; association: the call tree and the tasks and ops under it;
  tensors: tensor_info records grouped into ops;
* device: device tasks (start and end records paired a window at a time, pairing) and PMU records;
* matching: device tasks matched with host tracks, and COMPUTE_TASK_INFO;
* pmu: KIT_TASK_PMU metrics; overlap: OVERLAP_ANALYSIS;
* columns: codes and column helpers the steps share; limits: how many rows a step takes at a time.

The legacy JOB pipeline: job (build_job) and job_links (naming tasks by task id alone)."""
