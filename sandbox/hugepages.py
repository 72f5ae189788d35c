"""Backing the zygote's heap with transparent huge pages, to make every fork and exit cheaper.

A fork copies one page-table entry per 4 KB page the parent has written (~15K for the
preloaded numpy/scipy/sympy heap) and the child's exit drops them all again; a 2 MB huge
page is one entry. MADV_COLLAPSE (Linux 6.1+) turns the already-populated heap into huge
pages at once, whatever the system's THP mode (`madvise` here). A child writing to a
shared huge page gets the 2 MB mapping split and copies only the 4 KB it touched, so the
copy-on-write cost per call does not grow. Where the kernel refuses, nothing changes.
The zygote's own writes split huge pages again over time; it calls this again every
RECOLLAPSE_EVERY forks.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

MADV_COLLAPSE = 25
HUGE = 2 << 20


def collapse_heap() -> int:
    """Collapse every 2 MB-aligned stretch of private anonymous writable memory; returns the MB collapsed."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    done = 0
    with open("/proc/self/maps") as f:
        regions = [line.split() for line in f]
    for fields in regions:
        if fields[1] != "rw-p" or (len(fields) > 5 and fields[5] != "[heap]"):
            continue  # file-backed mappings are not copied at fork anyway
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        start, end = -(-lo // HUGE) * HUGE, hi // HUGE * HUGE
        if end > start and libc.madvise(start, end - start, MADV_COLLAPSE) == 0:
            done += end - start
    log.debug("heap collapsed into huge pages: %d MB", done >> 20)
    return done >> 20
