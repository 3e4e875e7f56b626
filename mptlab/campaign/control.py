"""A guest kept up with a run's topology, driven over a control channel.

``ControlledGuest(run, run_dir, kernel).start()`` writes the run's
``spec.json`` into ``run_dir``, boots a guest (``boot.boot``, confined and
pinned as every run's, under the run's clock, without a time limit) whose
entry is the control server (``mptlab.guest.control``): it sets the run up
as the agent does and serves requests over two pipes that UML binds to the
guest's second console (``boot.CHANNEL_TTY``).  ``request(op, ...)`` sends
one request and returns its final reply, passing the output a command
streams to ``on_output`` meanwhile; ``stop()`` ends the server, waits for
the guest to power off and reaps it (``boot`` kills what is left of UML's
process group): nothing outlives it but the run dir.  ``mptlab shell`` and
``mptlab.Network`` (docs/python-api.md) are built on it.

Under virtual time the guest is held between requests: its server polls
instead of idling, so that guest time stands still, and the UML process is
stopped (SIGSTOP; SIGCONT before the next request), so that the wait costs
no host CPU.  Guest time passes only while a request runs (``sleep 5`` in a
node lets 5 s pass, e.g. for a transfer started in the background).  Left
to idle, an inf-cpu guest burned a host CPU while it waited and its clock
moved by fits (docs/experiments.md, "Poking a running topology").
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import rundir
from ..guest.modules import ENV as MODULES_ENV
from ..rundir import RunDir, RunSpec, clock_of
from ..spec.seeds import derive_seed
from .boot import CHANNEL_TTY, GUEST_RUN_DIR, BootResult, Interrupted, boot, check_confinement
from .content import content_dir
from .kernel import KernelBuild

GUEST_SERVER = "mptlab.guest.control"  # the module the guest runs (python -m)
# Wall time from the boot to the server's hello: the boot, the modules and
# the network (blest-3g-wlan: 4-6 s here); generous, for a loaded host.
HELLO_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 30.0  # from the stop request to the guest's power-off


class GuestError(RuntimeError):
    """The guest did not come up, or went away."""


OutputFn = Callable[[str, str], None]  # (stream "out" | "err", text)


class ControlledGuest:
    def __init__(self, run: RunSpec, run_dir: Path, kernel: KernelBuild):
        self.run = run
        self.run_dir = Path(run_dir).resolve()
        self.kernel = kernel
        self.clock = clock_of(run.config)
        self.info: dict[str, Any] = {}
        self.result: BootResult | None = None
        self.boot_error: BaseException | None = None
        self.cancel = threading.Event()
        self.messages: queue.Queue[dict | None] = queue.Queue()
        self.ids = iter(range(1, 1 << 62))
        self.lock = threading.Lock()  # one request at a time
        self.current: int | None = None
        self._thread: threading.Thread | None = None
        self._reader: threading.Thread | None = None
        self._to_guest: tuple[int, int] | None = None
        self._from_guest: tuple[int, int] | None = None
        self._guest_ends_closed = False
        self._fd_lock = threading.Lock()
        # virtual time: held between requests (see the module's doc)
        self.hold = self.clock == "virtual"
        self._uml_pid: int | None = None
        self._frozen = False

    # ------------------------------------------------------------ start
    def start(self) -> dict:
        """Boot the guest and wait for its hello (``GuestError`` if it failed:
        the console log's and the server's words); the hello's data."""
        check_confinement()
        run_dir = RunDir(self.run_dir)
        run_dir.create()
        run_dir.write_spec(self.run)
        entry = run_dir.write_entry(
            f"{rundir.CONTENT_ENV}={shlex.quote(str(content_dir()))}\n"
            f"export {rundir.CONTENT_ENV}\n"
            f"exec {sys.executable} -m {GUEST_SERVER} {GUEST_RUN_DIR} {CHANNEL_TTY}"
            + (" --hold\n" if self.hold else "\n")
        )
        self._to_guest = os.pipe()
        self._from_guest = os.pipe()
        channel = (self._to_guest[0], self._from_guest[1])
        self._thread = threading.Thread(
            target=self._boot, args=(entry, channel), name="guest", daemon=True
        )
        self._thread.start()
        self._reader = threading.Thread(target=self._read, name="guest-reader", daemon=True)
        self._reader.start()
        try:
            first = self._next(HELLO_TIMEOUT_S, waiting_for="the guest's hello")
        except BaseException:
            self.stop()
            raise
        # UML holds the guest's ends now: without our copies, its exit is EOF here
        self._close_guest_ends()
        if "hello" not in first:
            self.stop()
            raise GuestError(
                f"the guest could not set the topology up: {first.get('fatal', first)} "
                f"(logs: {self.run_dir})"
            )
        self.info = first["hello"]
        self._freeze()
        return self.info

    def _started(self, pid: int) -> None:
        self._uml_pid = pid

    def _freeze(self) -> None:
        """Stop the held guest's UML kernel process (virtual time only)."""
        if self.hold and self._uml_pid is not None and not self._frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._uml_pid, signal.SIGSTOP)
                self._frozen = True

    def _thaw(self) -> None:
        if self._frozen and self._uml_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._uml_pid, signal.SIGCONT)
        self._frozen = False

    def _boot(self, entry: Path, channel: tuple[int, int]) -> None:
        try:
            self.result = boot(
                self.kernel,
                self.run_dir,
                entry,
                timeout=None,
                mem_mb=self.run.config["kernel"].get("memory", 1 << 30) >> 20,
                env={MODULES_ENV: str(self.kernel.modules_dir)},
                clock=self.clock,
                cancel=self.cancel,
                rng_seed=derive_seed(self.run.seed, "guest kernel randomness"),
                channel=channel,
                on_start=self._started,
            )
        except Interrupted:
            pass
        except BaseException as exc:  # noqa: BLE001 - raised to the caller by _next
            self.boot_error = exc
        finally:
            self._close_guest_ends()
            self.messages.put(None)

    def _close_guest_ends(self) -> None:
        with self._fd_lock:
            if self._guest_ends_closed or self._to_guest is None or self._from_guest is None:
                return
            self._guest_ends_closed = True
            for fd in (self._to_guest[0], self._from_guest[1]):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _read(self) -> None:
        """Lines from the guest, as messages, until the channel closes."""
        assert self._from_guest is not None
        buf = b""
        fd = self._from_guest[0]
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self.messages.put(None)
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                line = line.strip(b"\r ")
                if not line:
                    continue
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue  # not ours (nothing else writes there; be lenient)
                if isinstance(msg, dict):
                    self.messages.put(msg)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _gone(self) -> GuestError:
        if self.boot_error is not None:
            return GuestError(f"the guest could not be started: {self.boot_error}")
        res = self.result
        what = f"{res.status}: {res.reason}" if res is not None else "no status"
        return GuestError(f"the guest went away ({what}); logs in {self.run_dir}")

    def _next(self, timeout: float | None, waiting_for: str) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise GuestError(
                    f"no answer from the guest after {timeout:g} s ({waiting_for}); "
                    f"logs in {self.run_dir}"
                )
            try:
                msg = self.messages.get(timeout=min(1.0, left) if left is not None else 1.0)
            except queue.Empty:
                if not self.alive() and self.messages.empty():
                    raise self._gone() from None
                continue
            if msg is None:
                raise self._gone()
            return msg

    # ------------------------------------------------------------ requests
    def send(self, msg: dict) -> None:
        if self._to_guest is None:
            raise GuestError("the guest is not started")
        data = (json.dumps(msg) + "\n").encode()
        try:
            while data:
                data = data[os.write(self._to_guest[1], data) :]
        except OSError as exc:  # EPIPE: the guest is gone
            raise self._gone() from exc

    def request(
        self,
        op: str,
        on_output: OutputFn | None = None,
        wait: float | None = None,
        **fields: Any,
    ) -> dict:
        """Send one request and wait for its final reply (its ``rc`` or
        ``error``); output on the way goes to ``on_output``.  Ctrl-C
        (KeyboardInterrupt) meanwhile sends SIGINT to the command, a second
        one SIGKILL; the reply then says ``"interrupted": true``.
        ``wait``: wall seconds to wait for the reply (None: no limit)."""
        with self.lock:
            rid = next(self.ids)
            self._thaw()
            self.send({"id": rid, "op": op, **fields})
            self.current = rid
            interrupts = 0
            try:
                while True:
                    try:
                        msg = self._next(wait, waiting_for=f"request {op}")
                        if msg.get("id") != rid:
                            continue  # a late word for an earlier request
                        if "rc" in msg or "error" in msg:
                            if interrupts:
                                msg["interrupted"] = True
                            return msg
                        for stream in ("out", "err"):
                            if stream in msg and on_output is not None:
                                on_output(stream, msg[stream])
                    except KeyboardInterrupt:
                        # the command goes on in the guest until told: tell it, then
                        # wait for its end (its last output, its status)
                        interrupts += 1
                        sig = signal.SIGINT if interrupts == 1 else signal.SIGKILL
                        self.send({"op": "signal", "target": rid, "signal": int(sig)})
            finally:
                self.current = None
                self._freeze()

    # ------------------------------------------------------------ stop
    def stop(self, timeout: float = STOP_TIMEOUT_S) -> BootResult | None:
        """End the server, let the guest power off, reap it; the boot's result.
        Safe to call twice, and after the guest went away by itself."""
        thread = self._thread
        self._thaw()
        if thread is not None and thread.is_alive() and self.info:
            with contextlib.suppress(GuestError, OSError):
                # without the lock: a request that hangs must not keep the guest up
                self.send({"id": 0, "op": "stop"})
            thread.join(timeout)
        if thread is not None and thread.is_alive():
            self.cancel.set()  # boot() kills the guest within a second
            thread.join(STOP_TIMEOUT_S)
        # UML is gone: with the guest's ends closed the reader sees the end
        self._close_guest_ends()
        if self._reader is not None:
            self._reader.join(5)
        with self._fd_lock:
            for fd in (
                self._to_guest[1] if self._to_guest else None,
                self._from_guest[0] if self._from_guest else None,
            ):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._to_guest = self._from_guest = None
        return self.result
