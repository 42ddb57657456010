"""The options of a run, checked (`Options`), and the samples its inputs make (ais_bench's
--input, spec/collectors.md §5)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from msprof_kit.errors import InferOptionError, PathNotFound, UnreadableFile

PURE_INFER_NAME = "pure_infer_data"            # output file stem when no input is given (zero data)
MAX_DEVICE_ID = 255


@dataclass(frozen=True)
class Sample:
    """One inference's input: one file per model input (empty: zero data). `name` is the stem of
    the output files: the first input file's, or pure_infer_data."""

    name: str
    files: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Options:
    """The checked options, paths absolute."""

    model: str
    inputs: Tuple[str, ...]
    output: Optional[str]
    output_dirname: Optional[str]
    loop: int
    warmup_count: int
    devices: Tuple[int, ...]
    batch: Optional[int]
    profiler: bool
    dump: bool
    acl_json_path: Optional[str]
    display_all: bool

    def argv(self) -> List[str]:
        """The options as the command line spells them (what a re-run is given)."""
        out = [f"--model={self.model}"]
        if self.inputs:
            out.append(f"--input={','.join(self.inputs)}")
        if self.output is not None:
            out.append(f"--output={self.output}")
        if self.output_dirname is not None:
            out.append(f"--output-dirname={self.output_dirname}")
        out += [f"--loop={self.loop}", f"--warmup-count={self.warmup_count}",
                f"--device={','.join(str(d) for d in self.devices)}"]
        if self.batch is not None:
            out.append(f"--batch={self.batch}")
        if self.acl_json_path is not None:
            out.append(f"--acl-json-path={self.acl_json_path}")
        if self.profiler:
            out.append("--profiler=1")
        if self.dump:
            out.append("--dump=1")
        if self.display_all:
            out.append("--display-all-summary=1")
        return out


def absolute(path: str) -> str:
    """`path` with ~ expanded, made absolute from the cwd."""
    return os.path.abspath(os.path.expanduser(path))


def parse_devices(devices: Union[int, str, Sequence[int]]) -> Tuple[int, ...]:
    """Device ids from 3, "0,1" or [0, 1]: each 0..255, none repeated."""
    if isinstance(devices, bool):
        raise InferOptionError(f"--device is {devices!r}; expected ids such as 0 or 0,1")
    if isinstance(devices, int):
        items: List[Any] = [devices]
    elif isinstance(devices, str):
        items = [d.strip() for d in devices.split(",")]
    else:
        items = list(devices)
    ids: List[int] = []
    for item in items:
        try:
            value = int(item)
        except (TypeError, ValueError):
            raise InferOptionError(f"--device {devices!r}: {item!r} is not a device id") from None
        if isinstance(item, bool) or not 0 <= value <= MAX_DEVICE_ID:
            raise InferOptionError(f"--device {devices!r}: {item!r} is outside 0..{MAX_DEVICE_ID}")
        ids.append(value)
    if not ids:
        raise InferOptionError("--device is empty; expected ids such as 0 or 0,1")
    if len(set(ids)) != len(ids):
        raise InferOptionError(f"--device {devices!r} repeats an id")
    return tuple(ids)


def parse_inputs(inputs: Union[str, Sequence[str], None]) -> Tuple[str, ...]:
    """Absolute input paths from "a.bin,b.bin" or a list; each must exist."""
    if inputs is None:
        return ()
    items = [str(item).strip() for item in (inputs.split(",") if isinstance(inputs, str) else inputs)]
    if not items or not all(items):
        raise InferOptionError(f"--input {inputs!r} holds an empty path")
    paths: List[str] = []
    for item in items:
        path = absolute(item)
        if "," in path:
            raise InferOptionError("an input path holds a comma, which separates --input paths", path=path)
        if not os.path.exists(path):
            raise PathNotFound("no such input file or folder", path=path)
        paths.append(path)
    return tuple(paths)


def samples_from_inputs(inputs: Sequence[str]) -> List[Sample]:
    """The samples the inputs make (ais_bench's --input): no input gives one zero-data sample;
    files give one sample, one file per model input; folders give one model input each, and the
    i-th file (by name) of every folder makes sample i. Files and folders cannot be mixed."""
    if not inputs:
        return [Sample(PURE_INFER_NAME)]
    dirs = [os.path.isdir(p) for p in inputs]
    if all(not d for d in dirs):
        return [Sample(_stem(inputs[0]), tuple(inputs))]
    if not all(dirs):
        raise InferOptionError("--input mixes files and folders; give files (one per model input) or folders "
                               "(one per model input, one file per sample)")
    columns: List[List[str]] = []
    for folder in inputs:
        try:
            names = sorted(n for n in os.listdir(folder)
                           if not n.startswith(".") and os.path.isfile(os.path.join(folder, n)))
        except OSError as exc:
            raise UnreadableFile(f"cannot list the input folder: {exc.strerror or exc}", path=folder) from exc
        if not names:
            raise InferOptionError("the input folder holds no file", path=folder)
        columns.append([os.path.join(folder, n) for n in names])
    counts = {len(c) for c in columns}
    if len(counts) != 1:
        raise InferOptionError("the input folders hold different numbers of files ("
                               + ", ".join(f"{os.path.basename(f)}: {len(c)}" for f, c in zip(inputs, columns))
                               + "); each sample takes one file from every folder")
    return [Sample(_stem(row[0]), tuple(row)) for row in zip(*columns)]


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def read_input(path: str) -> bytes:
    """A sample file's bytes: the array data of a .npy file, any other file as it is."""
    try:
        if path.endswith(".npy"):
            return bytes(np.load(path, allow_pickle=False).tobytes())
        with open(path, "rb") as f:
            return f.read()
    except (OSError, ValueError) as exc:
        raise UnreadableFile(f"cannot read the input: {exc}", path=path) from exc
