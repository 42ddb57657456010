"""How the command line has glibc's allocator treat the large arrays of a big collection (no-ops
off glibc).

An import or export allocates and frees arrays of tens to hundreds of MB phase after phase. By
default glibc maps every block above its mmap threshold on its own and unmaps it when it is freed,
so each phase's arrays are new pages that the kernel must zero again; on a virtual machine whose
host reclaims freed guest pages, touching a new page costs several times more (measured here:
1.3 s to first touch 1 GiB in a new process, 0.16 s to touch it again). `tune_allocator` therefore
serves every block from the heap (in the import one heap for all threads) and leaves freed memory
there for the next phase to reuse.
`give_back` returns the free heap pages to the system between the import's phases, only when they
exceed KEEP_FREE, so a small collection keeps its pages and a large one its peak. Measured on 1M
tasks (docs/benchmarks.md): the three steps 22.1 s -> 15 s.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys
from typing import Optional

# mallopt parameter numbers (glibc malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX, M_ARENA_MAX = -1, -2, -4, -8
TRIM_THRESHOLD = 1 << 30    # free memory at the top of the heap kept before glibc trims it itself
TOP_PAD = 64 << 20          # the heap grows by at least this much at a time
KEEP_FREE = 1 << 30         # give_back leaves free heap memory below this in place


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost")]


def _libc() -> Optional[ctypes.CDLL]:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    if not (hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt")):
        return None
    if hasattr(libc, "mallinfo2"):  # glibc 2.33+
        libc.mallinfo2.restype = _MallInfo2
    return libc


_LIBC = _libc()


def tune_allocator(one_heap: bool = False) -> None:
    """Serve large blocks from the heap and keep freed memory for reuse (call once, from the
    command line, before any thread starts; forked workers inherit it). `one_heap` (the import):
    every thread allocates from the main heap too. The import's threads (the store writer, the
    spilling threads) free table-sized blocks that their own arenas would keep apart from the main
    heap, which `give_back` measures (1M-task import: peak 967 -> 860 MiB); the exports' threads
    format chunks of a fixed size, which their own arenas serve best (1M export summary with one
    heap: peak 972 -> 986-1016 MiB)."""
    if _LIBC is not None:
        if one_heap:
            _LIBC.mallopt(M_ARENA_MAX, 1)
        _LIBC.mallopt(M_MMAP_MAX, 0)
        _LIBC.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        _LIBC.mallopt(M_TOP_PAD, TOP_PAD)


def free_heap() -> Optional[int]:
    """Bytes free inside the main heap (None where glibc cannot tell)."""
    if _LIBC is None or not hasattr(_LIBC, "mallinfo2"):
        return None
    return int(_LIBC.mallinfo2().fordblks)


def give_back(keep: int = KEEP_FREE) -> None:
    """Between phases of a large import, or before forking a worker (which would otherwise count
    the parent's free heap in its own resident size): return free heap pages to the system once
    they exceed `keep` bytes."""
    if _LIBC is None:
        return
    free = free_heap()
    if free is None or free > keep:
        _LIBC.malloc_trim(0)
