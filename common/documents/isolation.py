"""Running document code in a disposable child process, with a deadline and a memory cap.

pdfium and Pillow decode untrusted bytes in C: a hang cannot be interrupted in-thread and a
crash would take the caller with it. So each call runs in a fresh fork of the current process.
Measured on 2 cores (BENCHMARKS.md, "Rasterisation"): a fork round trip costs about 5 ms and
a page through render_page 17-45 ms more than in-process for PDFs, against about 80 ms only to
spawn an interpreter that imports pypdfium2 and Pillow. A long-lived render process would be
cheaper still, but a fork per page keeps every page, and every tenant, from seeing what an
earlier hostile file left behind. The child runs the function, reports through a pipe and
calls os._exit, so nothing of the parent (threads, locks they held, atexit hooks) is used
further. It also freezes the garbage collector's view of what it inherited: a finalizer of the
parent's garbage could wait forever on a lock that another thread of the parent held at the
fork. A child that runs out of time writes its stack to stderr before it is killed. Page pixels
come back through shared memory: pickled down the pipe they cost more than the render. Where
fork is missing the function runs in-process, without protection.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import logging
import mmap
import os
import pickle
import resource
import select
import signal
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PIL import Image

from .errors import DocumentRejected

# Address space a child may add to what it inherits: decoding a page may take several copies of
# its pixels (4 bytes each), plus the libraries' working memory.
CHILD_MEMORY_BYTES_PER_PIXEL = 16
CHILD_MEMORY_BASE_BYTES = 1 << 30
# Time a child that ran out of time gets to write its stack (SIGUSR1) before SIGKILL.
STACK_DUMP_GRACE_S = 0.5

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RawPixels:
    """An image a child left in the shared buffer, as Image.frombytes reads it."""

    mode: str
    size: tuple[int, int]
    rawmode: str
    stride: int

    def to_image(self, shared: mmap.mmap) -> Image.Image:
        """A PIL image copied out of the shared buffer."""
        with memoryview(shared)[: self.stride * self.size[1]] as pixels:
            return Image.frombytes(self.mode, self.size, pixels, "raw", self.rawmode, self.stride)


def run_isolated(
    fn: Callable[..., Any],
    /,
    *args: Any,
    timeout_s: float,
    max_pixels: int,
    what: str,
    shared_bytes: int = 0,
    **kwargs: Any,
) -> Any:
    """fn(*args, **kwargs) run in a forked child; its DocumentRejected is re-raised here.

    With shared_bytes, fn also gets shared=<a buffer of that size> (None when not isolated) and
    may return RawPixels in it; a PIL image it returns is passed back through it too.
    """
    if shared_bytes:
        kwargs["shared"] = None
    if not hasattr(os, "fork"):
        return fn(*args, **kwargs)
    shared = mmap.mmap(-1, shared_bytes) if shared_bytes else None
    if shared is not None:
        kwargs["shared"] = shared
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(write_fd, shared, fn, args, kwargs, max_pixels=max_pixels, what=what)
    os.close(write_fd)
    reaped = False
    try:
        payload = _read_until(read_fd, time.monotonic() + timeout_s)
        if payload is None:
            _dump_stack(pid, what)
            raise DocumentRejected("render_timeout", f"{what.capitalize()} took longer than {timeout_s:g} s.")
        status = _reap(pid)
        reaped = True
        value = _outcome(payload, status, what)
        return value.to_image(shared) if isinstance(value, RawPixels) else value
    finally:
        os.close(read_fd)
        if not reaped:
            _kill(pid)
        if shared is not None:
            shared.close()


def _child(write_fd: int, shared: mmap.mmap | None, fn, args, kwargs, *, max_pixels: int, what: str) -> None:
    gc.freeze()
    code = 1
    try:
        try:
            _prepare_child(write_fd, max_pixels=max_pixels)
            result: tuple = ("ok", _into_shared(fn(*args, **kwargs), shared))
        except DocumentRejected as error:
            result = ("rejected", error.code, error.message)
        except MemoryError:
            result = ("rejected", "render_crashed", f"{what.capitalize()} ran out of memory.")
        except BaseException as error:  # noqa: BLE001 - reported to the parent, never raised here
            result = ("rejected", "render_crashed", f"{what.capitalize()} failed: {type(error).__name__}: {error}")
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        code = 0
    finally:
        os._exit(code)


def _prepare_child(write_fd: int, *, max_pixels: int) -> None:
    # Pipes of renders started meanwhile by other threads would not see EOF while we hold them.
    os.closerange(3, write_fd)
    os.closerange(write_fd + 1, os.sysconf("SC_OPEN_MAX"))
    # The parent's log handlers write to descriptors just closed: a line logged here (Pillow's debug lines) would
    # print a "Logging error" to stderr instead.
    logging.disable(logging.CRITICAL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # fd 2, not sys.stderr: Celery replaces sys.stderr with a logger that has no file descriptor.
    with contextlib.suppress(OSError, ValueError):
        faulthandler.register(signal.SIGUSR1, file=2, all_threads=False)
    _cap_memory(CHILD_MEMORY_BASE_BYTES + CHILD_MEMORY_BYTES_PER_PIXEL * max_pixels)
    # This process is disposable, so Pillow's process-wide bomb limit can give way to the
    # explicit per-page check that the document code makes.
    Image.MAX_IMAGE_PIXELS = None
    warnings.simplefilter("ignore", Image.DecompressionBombWarning)


def _into_shared(result: Any, shared: mmap.mmap | None) -> Any:
    if not isinstance(result, Image.Image) or shared is None:
        return result
    data = result.tobytes()
    if len(data) > len(shared) or result.mode not in ("RGB", "L"):
        return result
    shared[: len(data)] = data
    return RawPixels(result.mode, result.size, result.mode, len(data) // result.height)


def _cap_memory(extra_bytes: int) -> None:
    try:
        with open("/proc/self/statm") as statm:
            inherited = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return  # no /proc: go without the cap rather than without rendering
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = inherited + extra_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft == resource.RLIM_INFINITY or limit < soft:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _read_until(fd: int, deadline: float) -> bytes | None:
    """All bytes from fd until EOF, or None if the deadline passes first."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    chunks = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        if not poller.poll(remaining * 1000):
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _reap(pid: int) -> int | None:
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None  # SIGCHLD is ignored in this process: the child was reaped for us


def _dump_stack(pid: int, what: str) -> None:
    log.warning("%s: child %d ran out of time; its stack follows on stderr", what.capitalize(), pid)
    try:
        os.kill(pid, signal.SIGUSR1)
    except ProcessLookupError:
        return
    time.sleep(STACK_DUMP_GRACE_S)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _reap(pid)


def _outcome(payload: bytes, status: int | None, what: str) -> Any:
    if status is not None and os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        raise DocumentRejected("render_crashed", f"{what.capitalize()} crashed ({name}).")
    # Without the collector: a hundred pages' lines come back as over 100,000 small lists and dicts, and the
    # collections their making set off in a busy worker took ten times the unpickling itself.
    collecting = gc.isenabled()
    gc.disable()
    try:
        result = pickle.loads(payload)
    except Exception:
        raise DocumentRejected("render_crashed", f"{what.capitalize()} ended without a result.") from None
    finally:
        if collecting:
            gc.enable()
    if result[0] == "ok":
        return result[1]
    raise DocumentRejected(result[1], result[2])
