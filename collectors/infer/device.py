"""One device's share of a run through pyACL: checked calls, the clean-up stack, the model's inputs
and outputs (real pyACL, or the emulator's, which has none), warm-up and measured loops."""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from msprof_kit.errors import AclError, Diagnostics, InferOptionError, UnknownAclError

from ..acl_codes import code_name
from ..session import ACL_ERRORS
from .files import write_file
from .inputs import Options, Sample, read_input
from .plan import RunPlan
from .stats import DeviceResult

# pyACL constants used by the real-module path (acl_rt.h)
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
NPY_UBYTE = 2  # numpy's type number for uint8, as acl.util.ptr_to_numpy takes it


class Undo:
    """The clean-up calls of what was opened, made last-opened first. Every call is attempted; the
    failures are returned, never dropped."""

    def __init__(self) -> None:
        self.steps: List[Tuple[str, Callable[..., Any], Tuple[Any, ...]]] = []

    def push(self, call: str, fn: Callable[..., Any], *args: Any) -> None:
        """Remember that `fn(*args)` (the pyACL call named `call`) undoes what was just opened."""
        self.steps.append((call, fn, args))

    def mark(self) -> int:
        """The current depth, for unwind(to=...) to come back to."""
        return len(self.steps)

    def unwind(self, to: int = 0) -> List[BaseException]:
        """Make the clean-up calls down to depth `to`, last pushed first; the failures, in order."""
        failures: List[BaseException] = []
        while len(self.steps) > to:
            call, fn, args = self.steps.pop()
            try:
                ret = fn(*args)
                if ret is not None:
                    check(call, ret)
            except Exception as exc:  # collected and reported by the caller
                failures.append(exc)
        return failures


def report_cleanup(failures: List[BaseException], original: Optional[BaseException], diag: Diagnostics) -> None:
    """With an `original` error: each failure becomes a warning and a note on it. Without: the
    first failure is raised after the others became warnings."""
    if original is not None:
        for failure in failures:
            diag.warn(f"clean-up after the error also failed: {failure}")
            add_note = getattr(original, "add_note", None)  # Python 3.11+
            if add_note is not None:
                add_note(f"clean-up also failed: {failure}")
        return
    for extra in failures[1:]:
        diag.warn(f"clean-up also failed: {extra}")
    if failures:
        raise failures[0]


def check(call: str, ret: Any, about: str = "") -> None:
    """Raise the named AclError of a non-zero `ret` (session.ACL_ERRORS gives the class), saying
    `about` what (the device, the model); the meanings there are about acl.prof, so they are not
    repeated for these calls."""
    if isinstance(ret, bool) or not isinstance(ret, int):
        raise AclError(f"{call} returned {ret!r}, not an ACL code", call=call, code=0)
    if ret != 0:
        cls = ACL_ERRORS[ret][0] if ret in ACL_ERRORS else UnknownAclError
        where = f" ({about})" if about else ""
        raise cls(f"{call} returned {code_name(ret)}{where}; the CANN log (~/ascend/log) tells more",
                  call=call, code=ret)


def _null_check(call: str, handle: Any) -> Any:
    if not handle:
        raise AclError(f"{call} returned NULL", call=call, code=0)
    return handle


class _EmulatedIo:
    """The emulator's model has no inputs, outputs or device memory: execute is given no datasets,
    nothing is copied (so no H2D / D2H times) and no output file is written."""

    def __init__(self, acl: Any, model_id: int) -> None:
        self.acl = acl
        self.model_id = model_id

    def batch(self) -> Optional[int]:
        return None

    def prepare(self, samples: Sequence[Sample]) -> None:
        return None

    def load(self, sample: Sample) -> Optional[float]:
        return None

    def execute(self) -> float:
        begin = time.perf_counter()
        check("acl.mdl.execute", self.acl.mdl.execute(self.model_id, None, None))
        return (time.perf_counter() - begin) * 1000.0

    def fetch(self) -> Tuple[Optional[List[bytes]], Optional[float]]:
        return None, None


class _AclIo:
    """Input and output buffers of one loaded model on the current device, through the real pyACL
    (model description, device buffers, datasets, host buffers for the outputs). This path needs
    CANN, which is not available here (spec §6): it is checked only against a recording stand-in."""

    def __init__(self, acl: Any, model_id: int, undo: Undo) -> None:
        self.acl = acl
        self.model_id = model_id
        self.desc = _null_check("acl.mdl.create_desc", acl.mdl.create_desc())
        undo.push("acl.mdl.destroy_desc", acl.mdl.destroy_desc, self.desc)
        check("acl.mdl.get_desc", acl.mdl.get_desc(self.desc, model_id))
        self.input_sizes = [int(acl.mdl.get_input_size_by_index(self.desc, i))
                            for i in range(int(acl.mdl.get_num_inputs(self.desc)))]
        self.output_sizes = [int(acl.mdl.get_output_size_by_index(self.desc, i))
                             for i in range(int(acl.mdl.get_num_outputs(self.desc)))]
        self.inputs, self.input_ptrs = self._dataset(self.input_sizes, undo)
        self.outputs, self.output_ptrs = self._dataset(self.output_sizes, undo)
        self.host_ptrs: List[Any] = []
        for size in self.output_sizes:
            ptr, ret = acl.rt.malloc_host(size)
            check("acl.rt.malloc_host", ret)
            undo.push("acl.rt.free_host", acl.rt.free_host, ptr)
            self.host_ptrs.append(ptr)
        self.data: Dict[Sample, List[bytes]] = {}

    def _dataset(self, sizes: Sequence[int], undo: Undo) -> Tuple[Any, List[Any]]:
        acl = self.acl
        dataset = _null_check("acl.mdl.create_dataset", acl.mdl.create_dataset())
        undo.push("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset, dataset)
        ptrs: List[Any] = []
        for size in sizes:
            ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
            check("acl.rt.malloc", ret)
            undo.push("acl.rt.free", acl.rt.free, ptr)
            buffer = _null_check("acl.create_data_buffer", acl.create_data_buffer(ptr, size))
            undo.push("acl.destroy_data_buffer", acl.destroy_data_buffer, buffer)
            _, ret = acl.mdl.add_dataset_buffer(dataset, buffer)
            check("acl.mdl.add_dataset_buffer", ret)
            ptrs.append(ptr)
        return dataset, ptrs

    def batch(self) -> Optional[int]:
        """Dim 0 of input 0 when the model states it (> 0); None for a dynamic or missing dim."""
        if not self.input_sizes:
            return None
        dims, ret = self.acl.mdl.get_input_dims(self.desc, 0)
        shape = dims.get("dims") if ret == 0 and isinstance(dims, dict) else None
        return int(shape[0]) if shape and int(shape[0]) > 0 else None

    def prepare(self, samples: Sequence[Sample]) -> None:
        """Read every sample and check it against the model's inputs (count and byte sizes)."""
        for sample in samples:
            if not sample.files:
                self.data[sample] = [bytes(size) for size in self.input_sizes]
                continue
            if len(sample.files) != len(self.input_sizes):
                raise InferOptionError(f"the model has {len(self.input_sizes)} input(s) but --input gives "
                                       f"{len(sample.files)} per sample ({', '.join(sample.files)})")
            data = [read_input(p) for p in sample.files]
            for path, blob, size in zip(sample.files, data, self.input_sizes):
                if len(blob) != size:
                    raise InferOptionError(f"the input holds {len(blob)} bytes; the model's input takes {size}",
                                           path=path)
            self.data[sample] = data

    def _host_ptr(self, blob: bytes) -> Any:
        util = self.acl.util
        if hasattr(util, "bytes_to_ptr"):       # CANN 6 and later
            return util.bytes_to_ptr(blob)
        return util.numpy_to_ptr(np.frombuffer(blob, dtype=np.uint8))

    def load(self, sample: Sample) -> Optional[float]:
        """Copy the sample to the device; the time taken (ms)."""
        begin = time.perf_counter()
        for ptr, size, blob in zip(self.input_ptrs, self.input_sizes, self.data[sample]):
            check("acl.rt.memcpy", self.acl.rt.memcpy(ptr, size, self._host_ptr(blob), len(blob),
                                                      ACL_MEMCPY_HOST_TO_DEVICE))
        return (time.perf_counter() - begin) * 1000.0

    def execute(self) -> float:
        begin = time.perf_counter()
        check("acl.mdl.execute", self.acl.mdl.execute(self.model_id, self.inputs, self.outputs))
        return (time.perf_counter() - begin) * 1000.0

    def fetch(self) -> Tuple[Optional[List[bytes]], Optional[float]]:
        """Copy the outputs back to the host; (their bytes, the copy time in ms)."""
        begin = time.perf_counter()
        for host, ptr, size in zip(self.host_ptrs, self.output_ptrs, self.output_sizes):
            check("acl.rt.memcpy", self.acl.rt.memcpy(host, size, ptr, size, ACL_MEMCPY_DEVICE_TO_HOST))
        elapsed = (time.perf_counter() - begin) * 1000.0
        util = self.acl.util
        if hasattr(util, "ptr_to_bytes"):       # CANN 6 and later
            blobs = [bytes(util.ptr_to_bytes(h, s)) for h, s in zip(self.host_ptrs, self.output_sizes)]
        else:
            blobs = [util.ptr_to_numpy(h, (s,), NPY_UBYTE).tobytes() for h, s in zip(self.host_ptrs, self.output_sizes)]
        return blobs, elapsed


def run_device(acl: Any, emulated: bool, device: int, opts: Options, plan: RunPlan, samples: Sequence[Sample],
               out_dir: Optional[str], undo: Undo, diag: Diagnostics) -> DeviceResult:
    """Open the device, load the model, warm up, run every sample `loop` times, save the last
    outputs of each sample, close in reverse order."""
    mark = undo.mark()
    check("acl.rt.set_device", acl.rt.set_device(device), f"device {device}")
    undo.push("acl.rt.reset_device", acl.rt.reset_device, device)
    context, ret = acl.rt.create_context(device)
    check("acl.rt.create_context", ret, f"device {device}")
    undo.push("acl.rt.destroy_context", acl.rt.destroy_context, context)
    model_id, ret = acl.mdl.load_from_file(opts.model)
    check("acl.mdl.load_from_file", ret, f"model {opts.model}")
    undo.push("acl.mdl.unload", acl.mdl.unload, model_id)
    io: Union[_EmulatedIo, _AclIo] = _EmulatedIo(acl, model_id) if emulated else _AclIo(acl, model_id, undo)
    io.prepare(samples)
    batch: Union[int, float] = opts.batch if opts.batch is not None else (io.batch() or 1)
    for _ in range(plan.warmup_count):
        io.load(samples[0])
        io.execute()
        io.fetch()
    result = DeviceResult(device=device, batch=batch, out_dir=out_dir)
    for index, sample in enumerate(samples):
        blobs: Optional[List[bytes]] = None
        for _ in range(opts.loop):
            h2d = io.load(sample)
            if h2d is not None:
                result.h2d_latency_list.append(h2d)
            result.npu_compute_time_list.append(io.execute())
            blobs, d2h = io.fetch()
            if d2h is not None:
                result.d2h_latency_list.append(d2h)
        outfiles: List[str] = []
        if blobs is not None and out_dir is not None:
            for i, blob in enumerate(blobs):
                path = os.path.join(out_dir, f"{sample.name}_{i}.bin")
                write_file(path, blob)
                outfiles.append(path)
        result.filesinfo[index] = {"infiles": list(sample.files), "outfiles": outfiles}
    report_cleanup(undo.unwind(mark), None, diag)
    return result
