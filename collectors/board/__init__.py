"""Collect a profile on a HiSilicon SoC board over SSH: the `msprof.pyc collect` flow of the SoC
Profiling guide (spec/collectors.md §4), done with paramiko.

`collect_board(main, config, output, ...)` reads `[ssh_config]` from board.ini, connects (host key
checked against known_hosts), uploads the folder holding `main`, writes the SoC acl.json there,
runs `main` with a timeout, finds the JOB directories the run produced, brings them back into
`output` (SFTP copy with a file count and size check, or an NFS mount of the board's profiling
folder when asked), and removes from the board everything it created. Importing and exporting
each JOB locally (`collect --all`) is the CLI's pipeline (msprof_kit/cli.py). docs/collectors.md
("SoC boards over SSH") is the user's guide.

Choices where the guide is silent ([INFER] in spec §4.3), one place each:
- the board side lives in one fresh folder, `<remote_dir or home>/msprof_kit_<stamp>_<hex>/`,
  holding the uploaded project and `profiling/` (the acl.json `output`); removing that folder is
  the whole clean-up, so nothing of the user's on the board is ever touched;
- acl.json is written at `acl_json` relative to `main`'s folder ("acl.json" by default; a sample
  that reads "../src/acl.json" passes that and uploads the folder above with `project`);
- `main` runs from its own folder with no arguments, in its own process group, killed (TERM,
  then KILL) when it outlives `timeout`;
- new JOB directories are the `JOB*` folders that appear, between a listing before and one after
  the run, in `profiling/` or (the profiler's fallback when `output` is not writable) next to
  `main`;
- paths: the acl.json `output` on the board takes only letters, digits and `_` between its `/`
  (the SoC guide's rule, as acljson checks it); the other paths that reach a command or the
  profiler (main, the project and output folders, remote_dir, the NFS export) may also hold `.`
  and `-` (SAFE_PATH). Names of files inside the project are not limited: they travel only
  over SFTP. Every command sent to the board is shell-quoted all the same.

The modules: `config` (board.ini, the paths and the plan, all checked before connecting), `ssh`
(the session: connection, remote commands, SFTP), `upload` (project and acl.json up), `fetch` (JOB
folders found, copied back and verified), `cleanup` (the board left as it was) and `collect` (the
flow). This file re-exports what the CLI and tests use.
"""
from __future__ import annotations

from .collect import collect_board
from .config import SAFE_PATH, BoardConfig, Runner, mount_command, read_board_ini

__all__ = ["collect_board", "read_board_ini", "BoardConfig", "Runner", "SAFE_PATH", "mount_command"]
