# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0

"""Python client of hermeskilld, the out-of-process kill switch for AI agents.

One file, standard library only, Python >= 3.8: ``pip install ./clients/python``, or copy
it next to your agent, or put its directory on PYTHONPATH.

    import hermeskill

    hk = hermeskill.Client.from_env()   # a no-op client when the agent is not supervised
    hk.ready()
    hk.start_heartbeat()                # daemon thread, every WATCHDOG_USEC/3 (1s when unset)
    for step in range(1, 100):
        hk.checkpoint()                 # raises HermeskillTerminated once hermeskilld said STOP
        with hk.extend(300):            # a model call that may take minutes
            answer = llm(prompt)
        hk.tool_call("web_search", {"q": "..."})   # only a hash of the arguments leaves the agent
        hk.usage(tokens=total_tokens, cost_usd=total_cost)          # cumulative values
        hk.progress(step)

An asyncio agent runs its work inside ``async with hk.supervised_task():``, which beats from
the event loop and cancels the task on STOP (see Client.supervised_task). The module-level
checkpoint() and the exceptions HermeskillTerminated(reason, kill_event_id=...) and
HermeskillError stand in for those of the in-process hermeskill SDK (0.1.0a1).

Protocol: hermeskilld's docs/protocol.md (agent -> supervisor: one datagram of
newline-separated KEY=VALUE lines on an AF_UNIX SOCK_DGRAM socket, a superset of
sd_notify(3), https://www.freedesktop.org/software/systemd/man/sd_notify.html, and the
directives, supervisor -> agent). The address comes from HERMESKILL_SOCKET, else
NOTIFY_SOCKET, so the same client also talks to systemd.

What the heartbeat thread proves: only that a thread lives, which is not that the agent
works. So it vouches for the agent (WATCHDOG=1) only while the work loop passes through the
client: a call of ready, beat, progress, usage, tool_call, error, status, stopping, trigger,
checkpoint or extend (or the end of a wait; creating the client counts too) within the
heartbeat timeout, WATCHDOG_USEC, or three beat intervals when it is unset. Then it falls
silent, and the supervisor kills a wedged main loop at most about two timeouts after its last
call. A call that may block longer than the timeout is declared with extend(seconds): it
sends EXTEND_TIMEOUT_USEC, which hermeskilld bounds by its max_extension, and while the wait
lasts the thread vouches with EXTEND_TIMEOUT_USEC (WATCHDOG=1 to systemd, which cannot extend
a watchdog), never past the declared time.

Guarantees:
- Unsupervised (neither variable set), every method returns at once, checkpoint() never
  raises and no thread is started: agent code runs the same with and without hermeskilld.
- Socket trouble never blocks the agent and never raises into it: a message that cannot be
  sent at once (supervisor queue full, supervisor gone) is dropped and counted in
  ``Client.dropped``; a lost supervisor is reconnected at most once per second.
- Misuse does raise, supervised or not, so it shows up in development: a negative
  progress, a non-finite cost (ValueError) or a non-integer count (TypeError).
"""

from __future__ import annotations

import _thread
import collections
import errno
import faulthandler
import hashlib
import json
import math
import operator
import os
import selectors
import signal
import socket
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple, Type, Union

if TYPE_CHECKING:
    import asyncio
    from types import TracebackType

__version__ = "0.1.0"

__all__ = [
    "Client",
    "ConfigError",
    "Extension",
    "HermeskillError",
    "HermeskillTerminated",
    "MAX_TEXT_BYTES",
    "MAX_WARNINGS",
    "SupervisedTask",
    "checkpoint",
    "default_client",
    "parse_address",
    "tool_args_sha256",
]

#: Text values (STATUS, ERROR, TOOL, ...) are cut to this many UTF-8 bytes.
MAX_TEXT_BYTES = 1024
#: ``Client.warnings`` keeps the most recent warnings only.
MAX_WARNINGS = 64

# sun_path is 108 bytes; keep room for the terminating NUL as Go's syscall package does.
_SUN_PATH_MAX = 107
_RECV_BYTES = 16384
_DEFAULT_HEARTBEAT_S = 1.0
# How long a SIGINT that finds no STOP waits for one that may be arriving with it (seconds).
_SIGINT_STOP_WAIT = 0.2
# Without WATCHDOG_USEC, the heartbeat thread vouches for this many intervals after a call.
_WINDOW_BEATS = 3
# Errors of send() meaning "not connected to a live supervisor any more": reconnect.
_DISCONNECTED = frozenset(
    (errno.ECONNREFUSED, errno.ECONNRESET, errno.ENOTCONN, errno.EDESTADDRREQ)
)
# Newlines would start a new KEY=VALUE line; systemd drops datagrams with a NUL in them.
_TEXT_TABLE = {ord("\n"): " ", ord("\r"): " ", 0: " "}
_USE_DEFAULT = object()


class HermeskillError(Exception):
    """The base of the errors this client raises (ConfigError). Not of HermeskillTerminated."""


class ConfigError(HermeskillError, ValueError):
    """HERMESKILL_SOCKET / NOTIFY_SOCKET (or an explicit address) is not usable."""


# Not a HermeskillError: that is an Exception, as in the hermeskill SDK, so that
# `except Exception:` catches the client's errors; a subclass of it would be an Exception too,
# and the same `except Exception:` around a tool call would swallow the stop.
class HermeskillTerminated(BaseException):
    """hermeskilld asked this agent to stop (the cooperative stage of its escalation).

    Raised by ``Client.checkpoint()``, the module's ``checkpoint()`` and on leaving
    ``Client.supervised_task()``. Like KeyboardInterrupt and asyncio.CancelledError it
    derives from BaseException, so an agent's ``except Exception:`` around a failing tool
    call does not swallow the stop. Save what is worth saving and exit: after ``grace``
    seconds hermeskilld escalates to SIGTERM, then SIGKILL.

    Attributes: ``reason`` (the message of the check that fired, e.g. "spent 5.10 USD,
    limit 5"), ``check`` (its name, e.g. "cost"; "" when not given), ``grace`` (seconds
    until escalation, a float, or None), ``kill_event_id`` (the id of the death certificate
    that records this kill, when hermeskilld knows it and sends it with the STOP directive as
    KILL_EVENT_ID; else None). ``HermeskillTerminated(reason, kill_event_id=...)`` is the
    signature of the hermeskill SDK's exception, so code that raises or catches it runs
    unchanged.
    """

    def __init__(
        self,
        reason: str = "",
        *,
        check: str = "",
        grace: Optional[float] = None,
        kill_event_id: Optional[str] = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.check = check
        self.grace = grace
        self.kill_event_id = kill_event_id

    def __str__(self) -> str:
        text = "hermeskilld stopped the agent"
        if self.check:
            text += " (%s: %s)" % (self.check, self.reason)
        elif self.reason:
            text += ": " + self.reason
        if self.grace is not None:
            text += "; escalation in %gs" % self.grace
        if self.kill_event_id:
            text += "; kill event " + self.kill_event_id
        return text


def parse_address(address: str) -> bytes:
    """Return the sockaddr bytes for ``address``: "/path", or "@name" for an abstract socket.

    Raises ConfigError for anything else (relative paths, "vsock:..." and the like).
    """
    if address.startswith("/"):
        raw = os.fsencode(address)
    elif address.startswith("@") and len(address) > 1:
        raw = b"\0" + address[1:].encode("utf-8")
    else:
        raise ConfigError(
            "hermeskill: socket address %r is neither an absolute path nor @abstract" % address
        )
    if len(raw) > _SUN_PATH_MAX:
        raise ConfigError(
            "hermeskill: socket address %r is %d bytes, over the %d that sun_path holds"
            % (address, len(raw), _SUN_PATH_MAX)
        )
    return raw


def tool_args_sha256(args: Any) -> str:
    """sha256 (hex) of ``args`` as canonical JSON: the value of TOOL_ARGS_SHA256.

    The canonical form is ``json.dumps(args, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` encoded as UTF-8: keys sorted, no whitespace, non-ASCII text as
    it is (never \\u escapes; only '"', backslash and control characters are escaped),
    numbers as Python writes them (1, 1.0, 1e-05). The Go client and hermeskilld's LLM
    gateway hash the same bytes, so {"q": "a<b", "n": 1} gives the same digest in all
    three; Go's float64(1) is written 1 there, so send whole numbers as ints.

    A str is hashed as a JSON string, not parsed: hash ``json.loads(text)`` to hash a JSON
    document by value, as the gateway does with the arguments a model wrote. Lone
    surrogates become U+FFFD, as a JSON decoder reads them. Objects JSON cannot encode are
    hashed through str(); arguments JSON cannot order (mixed key types) or that are
    circular fall back to repr(). Never raises.
    """
    try:
        canonical = json.dumps(
            args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        )
    except (TypeError, ValueError, RecursionError):
        canonical = repr(args)
    try:
        raw = canonical.encode("utf-8")
    except UnicodeEncodeError:  # surrogates: pair them up, the lone ones become U+FFFD
        raw = canonical.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")
    return hashlib.sha256(raw).hexdigest()


def _text(value: Any) -> str:
    """One line of at most MAX_TEXT_BYTES UTF-8 bytes, cut on a character boundary."""
    raw = str(value).translate(_TEXT_TABLE).encode("utf-8", "replace")
    if len(raw) > MAX_TEXT_BYTES:
        return raw[:MAX_TEXT_BYTES].decode("utf-8", "ignore")
    return raw.decode("utf-8")


def _parse_fields(data: bytes) -> Dict[str, str]:
    fields = {}  # type: Dict[str, str]
    for line in data.decode("utf-8", "replace").split("\n"):
        key, sep, value = line.partition("=")
        if sep and key not in fields:  # duplicate keys: the first wins, as in the daemon
            fields[key] = value
    return fields


def _watchdog_from_env(env: Mapping[str, str]) -> Optional[float]:
    """WATCHDOG_USEC in seconds; None when unset, malformed or not for us."""
    pid = env.get("WATCHDOG_PID")
    if pid and pid != str(os.getpid()):  # sd_watchdog_enabled(3): the watchdog is another process's
        return None
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    if usec <= 0:
        return None
    return usec / 1e6


def _usec(seconds: float) -> int:
    """Seconds as whole microseconds, rounded up (a wait is never of 0 µs), at most
    USEC_INFINITY (2**64-1), the largest value the protocol carries."""
    return min(max(1, math.ceil(seconds * 1e6)), 2**64 - 1)


def _signal_number(sig: Union[int, str]) -> signal.Signals:
    if isinstance(sig, str):
        return signal.Signals[sig if sig.startswith("SIG") else "SIG" + sig]
    return signal.Signals(sig)


class Client:
    """Talks to hermeskilld (or systemd) over the notify socket; thread-safe.

    ``address``: "/path" or "@abstract"; None reads HERMESKILL_SOCKET, else NOTIFY_SOCKET,
    from ``environ`` (default os.environ). Neither set (or set empty): a no-op client.

    ``interrupt_main`` (default True): on STOP, raise HermeskillTerminated in the main
    thread, even inside a blocking call (a sleep, a socket read), so the agent's
    ``except hermeskill.HermeskillTerminated:`` saves its work wherever the loop is. For this
    the client takes SIGINT's handler when it is made in the main thread and SIGINT still
    has Python's default handler: a SIGINT without a STOP stays a KeyboardInterrupt; after a
    STOP the client sends SIGINT to the main thread itself (again every 0.1 s until the
    handler ran: a signal that lands just before a blocking call begins would not end it),
    and its handler raises HermeskillTerminated once, then ignores SIGINT (the agent is
    stopping). The client then acknowledges the STOP (STOPPING=1) and hermeskilld withholds
    its own cooperative signal, which could otherwise cut the agent's handler short. An
    asyncio agent inside ``supervised_task()`` gets its task cancelled instead. When the
    client cannot take the handler (the application has its own, or the client was made in
    another thread) it does not acknowledge, and hermeskilld's signal comes as without a
    client; given explicitly, True then also interrupts the main thread with
    ``_thread.interrupt_main()``. False: only checkpoint() and stop_requested tell of a STOP.

    ``on_warning``: called with the text of each WARNING directive, from the client's
    receiver thread; an exception it raises is printed and otherwise ignored.

    ``dump_signal``: the signal on which faulthandler prints every thread's traceback to
    stderr (default SIGUSR2; None disables). It is registered and announced to the
    supervisor as DUMP_SIGNAL only if the application has no handler of its own for it;
    hermeskilld sends it before killing a wedged agent, so the certificate shows where the
    agent was stuck. The registration outlives close(): unregistering would make a late
    SIGUSR2 from the supervisor kill the agent instead of dumping.

    ``heartbeat_interval``: seconds between beats of start_heartbeat(); default a third of
    WATCHDOG_USEC, or 1s. The heartbeat thread vouches for WATCHDOG_USEC after the work
    loop's last call, or for three intervals when it is unset.

    Raises ConfigError for a malformed address, OSError if no socket can be created.
    """

    # Seconds between two attempts to connect to a supervisor that is not there.
    _reconnect_interval = 1.0

    def __init__(
        self,
        address: Optional[str] = None,
        *,
        interrupt_main: Any = _USE_DEFAULT,
        on_warning: Optional[Callable[[str], Any]] = None,
        dump_signal: Any = _USE_DEFAULT,
        heartbeat_interval: Optional[float] = None,
        environ: Optional[Mapping[str, str]] = None,
    ) -> None:
        env = os.environ if environ is None else environ
        address_from_env = address is None
        # systemd (NOTIFY_SOCKET alone) cannot extend a watchdog: waits are covered with
        # WATCHDOG=1 there.
        self._systemd = False
        if address is None:
            address = env.get("HERMESKILL_SOCKET") or None
            if address is None:
                address = env.get("NOTIFY_SOCKET") or None
                self._systemd = address is not None
        self._watchdog = _watchdog_from_env(env)
        if heartbeat_interval is None:
            heartbeat_interval = _DEFAULT_HEARTBEAT_S if self._watchdog is None else self._watchdog / 3
        _check_interval(heartbeat_interval)

        self._address = address
        self._heartbeat_interval = float(heartbeat_interval)
        # What the heartbeat thread knows of the work loop (time.monotonic() seconds): its
        # last call (creating the client counts) and the ends of the open declared waits.
        self._active = time.monotonic()
        self._waits = []  # type: List[float]
        # An explicit interrupt_main=True also interrupts a main thread whose SIGINT
        # handler the client cannot take, with _thread.interrupt_main().
        self._interrupt_explicit = interrupt_main is True
        interrupt_main = True if interrupt_main is _USE_DEFAULT else bool(interrupt_main)
        self._interrupt_main = interrupt_main
        # The main thread's SIGINT handler is ours (see interrupt_main): _raised is set once
        # it raised HermeskillTerminated.
        self._sigint_taken = False
        self._raised = threading.Event()
        self._on_warning = on_warning
        # RLock: a signal handler of the agent may call the client while the main thread
        # is inside it.
        self._lock = threading.RLock()
        self._closing = threading.Event()  # close() began: threads leave
        self._stop_event = threading.Event()  # a STOP directive arrived
        # (check, reason, grace, kill_event_id) of the first STOP directive.
        self._stop_info = None  # type: Optional[Tuple[str, str, Optional[float], Optional[str]]]
        # Called (from the receiver thread) when STOP arrives: supervised_task()'s cancellers.
        self._stop_calls = []  # type: List[Callable[[], None]]
        self._warnings = collections.deque(maxlen=MAX_WARNINGS)  # type: collections.deque[str]
        self._closed = False
        self._dropped = 0
        self._sent = 0
        self._sock = None  # type: Optional[socket.socket]
        self._raw_address = b""
        self._connected = False
        self._next_connect = 0.0  # monotonic time of the next allowed connect()
        self._announce = None  # type: Optional[str]
        self._dump_signum = None  # type: Optional[int]
        self._announce_pending = False
        self._heartbeat_thread = None  # type: Optional[threading.Thread]
        self._receiver_thread = None  # type: Optional[threading.Thread]
        self._wake_r = self._wake_w = -1
        # The first client made from the process's environment is the default client.
        from_process_env = environ is None and address_from_env
        if not address:
            if from_process_env:
                _adopt_default(self)
            return  # unsupervised: a no-op client

        self._raw_address = parse_address(address)
        # Python opens every socket with SOCK_CLOEXEC (PEP 446): tools the agent execs do
        # not inherit it. Non-blocking: a full supervisor queue must drop, never wait.
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            bound = True
            try:
                # Linux autobind: a unique abstract address, so the supervisor can answer us.
                sock.bind("")
            except OSError:
                bound = False  # not Linux: heartbeats still work, directives cannot reach us
            if bound:
                self._wake_r, self._wake_w = os.pipe()  # wakes the receiver on close()
                os.set_blocking(self._wake_w, False)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        if dump_signal is _USE_DEFAULT:
            dump_signal = getattr(signal, "SIGUSR2", None)
        name = _register_dump_signal(dump_signal)
        if name:
            self._announce = "DUMP_SIGNAL=" + name
            self._dump_signum = int(_signal_number(dump_signal))
        with self._lock:
            self._try_connect()
        if self._announce:
            self._send([])  # the first datagram says which signal dumps our stacks
        if bound and interrupt_main:
            self._take_sigint()
        if bound:
            self._receiver_thread = threading.Thread(
                target=self._receive_loop, name="hermeskill-directives", daemon=True
            )
            self._receiver_thread.start()
        if from_process_env:
            _adopt_default(self)

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None, **kwargs: Any) -> "Client":
        """The client for HERMESKILL_SOCKET, else NOTIFY_SOCKET; a no-op one when neither is set.

        ``kwargs`` are the keyword arguments of Client. Raises ConfigError for a malformed
        address.
        """
        return cls(None, environ=environ, **kwargs)

    # -- state ----------------------------------------------------------------------------

    @property
    def supervised(self) -> bool:
        """True when an address was configured (False for the no-op client)."""
        return self._sock is not None

    @property
    def address(self) -> Optional[str]:
        return self._address or None

    @property
    def heartbeat_interval(self) -> float:
        return self._heartbeat_interval

    @property
    def dropped(self) -> int:
        """Messages lost: supervisor queue full, supervisor gone, or another socket error."""
        return self._dropped

    @property
    def sent(self) -> int:
        """Messages handed to the kernel."""
        return self._sent

    @property
    def stop_requested(self) -> bool:
        """True once a STOP directive arrived; checkpoint() then raises."""
        return self._stop_event.is_set()

    @property
    def warnings(self) -> List[str]:
        """The last MAX_WARNINGS warning directives ("check: text"), oldest first."""
        return list(self._warnings)

    # -- messages (agent -> supervisor) --------------------------------------------------
    # Each returns True when its datagram was handed to the kernel, False when it was
    # dropped or the client is a no-op or closed. Each call, like checkpoint() and extend(),
    # counts as activity of the work loop (see start_heartbeat).

    def ready(self) -> bool:
        """READY=1: startup is done; the heartbeat deadline starts."""
        return self._send(["READY=1"], announce=True)

    def beat(self) -> bool:
        """WATCHDOG=1: one heartbeat from the work loop (unlike the heartbeat thread's)."""
        return self._send(["WATCHDOG=1"])

    def progress(self, n: int) -> bool:
        """PROGRESS=n: the monotonic step counter (an increase resets no-progress checks)."""
        n = operator.index(n)
        if n < 0:
            raise ValueError("hermeskill: progress must be >= 0, not %d" % n)
        return self._send(["PROGRESS=%d" % n])

    def usage(self, tokens: Optional[int] = None, cost_usd: Optional[float] = None) -> bool:
        """TOKENS / COST_USD: cumulative totals so far (not increments), in one datagram.

        Only the given fields are sent; with neither, nothing is.
        """
        lines = []
        if tokens is not None:
            tokens = operator.index(tokens)
            if tokens < 0:
                raise ValueError("hermeskill: tokens must be >= 0, not %d" % tokens)
            lines.append("TOKENS=%d" % tokens)
        if cost_usd is not None:
            cost = float(cost_usd)
            if not math.isfinite(cost) or cost < 0:
                raise ValueError("hermeskill: cost_usd must be finite and >= 0, not %r" % cost)
            lines.append("COST_USD=" + repr(cost))
        if not lines:
            self._active = time.monotonic()
            return False
        return self._send(lines)

    def tool_call(self, name: str, args: Any = None) -> bool:
        """TOOL=name + TOOL_ARGS_SHA256: one tool call begins. The arguments stay here."""
        if self._sock is None:
            return False  # unsupervised: do not even hash them
        self._active = time.monotonic()  # hashing large arguments takes a while
        return self._send(["TOOL=" + _text(name), "TOOL_ARGS_SHA256=" + tool_args_sha256(args)])

    def error(self, err: Any) -> bool:
        """ERROR=text: one error happened (an exception gives "Type: message")."""
        if isinstance(err, BaseException):
            detail = str(err)
            err = type(err).__name__ + (": " + detail if detail else "")
        return self._send(["ERROR=" + _text(err)])

    def status(self, text: str) -> bool:
        """STATUS=text: free text shown by `hermeskilld ps` and kept in the certificate."""
        return self._send(["STATUS=" + _text(text)])

    def stopping(self) -> bool:
        """STOPPING=1: the agent is shutting down by itself."""
        return self._send(["STOPPING=1"])

    def trigger(self, reason: str = "") -> bool:
        """WATCHDOG=trigger: ask hermeskilld to kill this agent now (check self_reported)."""
        lines = ["WATCHDOG=trigger"]
        if reason:
            lines.append("STATUS=" + _text(reason))
        return self._send(lines)

    def extend(self, seconds: float) -> "Extension":
        """EXTEND_TIMEOUT_USEC: the work loop is about to wait up to ``seconds`` in a call that
        cannot report meanwhile (a model request of minutes, a long tool).

        Returns an Extension that ends the wait: use it as a context manager, or call it::

            with hk.extend(300):
                answer = llm(prompt)

            end = hk.extend(300)
            try:
                answer = llm(prompt)
            finally:
                end()

        hermeskilld bounds extensions by its max_extension. While the wait lasts and the work
        loop is silent, the heartbeat thread vouches with EXTEND_TIMEOUT_USEC (WATCHDOG=1 to
        systemd), never past the declared time: a call that hangs longer is not vouched for.
        Waits may overlap (one per thread); the longest open one counts. Declaring and ending
        a wait count as activity. Raises ValueError unless ``seconds`` is a finite number
        above 0 (TypeError for a non-number), supervised or not.
        """
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError("hermeskill: extend takes a number of seconds, not %r" % (seconds,))
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError("hermeskill: extend takes a finite number of seconds above 0, not %r" % (seconds,))
        if self._sock is None:
            return Extension(None, 0.0)
        self._active = now = time.monotonic()
        until = now + seconds
        with self._lock:
            self._waits.append(until)
            self._send(["EXTEND_TIMEOUT_USEC=%d" % _usec(seconds)])
        return Extension(self, until)

    def _end_wait(self, until: float) -> None:
        with self._lock:
            try:
                self._waits.remove(until)
            except ValueError:
                pass
        self._active = time.monotonic()

    # -- directives (supervisor -> agent) ------------------------------------------------

    def checkpoint(self) -> None:
        """Raise HermeskillTerminated if hermeskilld asked the agent to stop; else return.

        Call it once per step: it counts as activity of the work loop.
        """
        self._active = time.monotonic()
        if self._stop_event.is_set():
            if threading.current_thread() is threading.main_thread():
                # Raised in the main thread: the SIGINTs the client sends it to raise the stop
                # there (interrupt_main) must not raise it again inside the handler that saves.
                self._raised.set()
            raise self._terminated()

    def _terminated(self) -> HermeskillTerminated:
        check, reason, grace, kill_event_id = self._stop_info or ("", "", None, None)
        return HermeskillTerminated(reason, check=check, grace=grace, kill_event_id=kill_event_id)

    def supervised_task(self, heartbeat: bool = True) -> "SupervisedTask":
        """For asyncio agents: the work inside ``async with hk.supervised_task():`` is
        cancelled when hermeskilld says STOP, and a heartbeat runs on the event loop::

            async def main():
                hk = hermeskill.Client.from_env()
                hk.ready()
                async with hk.supervised_task():   # raises HermeskillTerminated after a STOP
                    async for step in agent_steps():
                        hk.progress(step)

            asyncio.run(main())

        On STOP the task that entered the block is cancelled (``Task.cancel()``, from the
        event loop's thread): asyncio.CancelledError is raised at its current ``await``, so
        ``finally`` blocks, ``async with`` exits and TaskGroups unwind as on any
        cancellation. Leaving the block then raises HermeskillTerminated (``from`` the
        CancelledError), as checkpoint() would; so does leaving it normally after the work
        caught the CancelledError. A cancellation that is not the stop's (a timeout around the
        block) stays a CancelledError. Entering the block after a STOP raises at once.
        Synchronous code between two awaits cannot be cancelled: call checkpoint() in long
        loops, as in threads.

        ``heartbeat``: while the block runs, run_heartbeat() runs as a task of the same
        event loop (unless start_heartbeat()'s thread already beats). Each block belongs to
        the task that enters it; several tasks may each have one. Unsupervised, the block
        does nothing.
        """
        return SupervisedTask(self, heartbeat)

    def _call_on_stop(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once STOP arrives (from the receiver thread), or now if it has."""
        with self._lock:
            if self._stop_info is None:
                self._stop_calls.append(fn)
                return
        fn()

    def _forget_on_stop(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if fn in self._stop_calls:
                self._stop_calls.remove(fn)

    # -- heartbeat -----------------------------------------------------------------------

    def start_heartbeat(self, interval: Optional[float] = None) -> None:
        """Beat from a daemon thread every ``interval`` seconds until close().

        Default interval: the constructor's. Beats once at once. A second call while the
        thread runs does nothing.

        A thread proves only that the process lives, so it vouches for the agent only while
        the work loop passes through the client. Every ``interval`` it sends WATCHDOG=1 if a
        method was called (checkpoint() included) within the heartbeat timeout
        (WATCHDOG_USEC, or three intervals when unset); else, while a wait declared with
        extend() lasts, EXTEND_TIMEOUT_USEC of the timeout or what is left of the wait
        (WATCHDOG=1 to systemd); else nothing, and the supervisor's heartbeat timeout kills
        a wedged main loop. Call the client once per step, and declare long waits.
        """
        if interval is not None:
            _check_interval(interval)
        if self._sock is None:
            return
        with self._lock:
            if self._closed or self._heartbeat_thread is not None:
                return
            self._heartbeat_thread = threading.Thread(
                target=self._heartbeat_loop,
                args=(self._heartbeat_interval if interval is None else float(interval),),
                name="hermeskill-heartbeat",
                daemon=True,
            )
            self._heartbeat_thread.start()

    async def run_heartbeat(self, interval: Optional[float] = None) -> None:
        """start_heartbeat()'s heartbeat as a coroutine, for asyncio agents: beats on the
        running event loop every ``interval`` seconds until close() or until cancelled::

            beat = asyncio.create_task(hk.run_heartbeat())

        supervised_task() runs it for you. It vouches by the same rule as the thread (the
        work loop called the client within the heartbeat timeout, or a declared wait lasts),
        and it also proves that the event loop turns: a coroutine that blocks the loop in
        synchronous code silences it, even inside a declared wait. Unsupervised, it returns
        at once. Raises ValueError for a bad ``interval``.
        """
        import asyncio

        if interval is not None:
            _check_interval(interval)
        if self._sock is None:
            return
        every = self._heartbeat_interval if interval is None else float(interval)
        window = self._window(every)
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while not self._closing.is_set():
            self._vouch(window)
            next_at += every
            delay = next_at - loop.time()
            if delay < 0:  # the loop was busy: do not burst to catch up
                next_at, delay = loop.time(), 0.0
            await asyncio.sleep(delay)

    def _window(self, interval: float) -> float:
        """How long after the work loop's last call the heartbeat vouches for it."""
        return self._watchdog if self._watchdog is not None else _WINDOW_BEATS * interval

    def _leave_dump_signal_to_the_application(self) -> None:
        """Block the dump signal in this thread, one of the client's own.

        The kernel gives a process's signal to any thread that does not block it, and
        hermeskilld freezes the agent for its autopsy just before it sends the signal, which
        leaves every thread with a signal pending: any of them may take it once thawed.
        faulthandler reads the other threads' frames without the GIL and can crash on one
        that runs meanwhile (CPython issue 116008): taken by the heartbeat thread while the
        main thread spins, the dump killed the agent instead of showing where it spun.
        Blocked in the client's threads, the signal goes to one of the application's, which
        does not run while it dumps.
        """
        if self._dump_signum is None or not hasattr(signal, "pthread_sigmask"):
            return
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, {self._dump_signum})
        except (OSError, ValueError):
            pass

    def _heartbeat_loop(self, interval: float) -> None:
        self._leave_dump_signal_to_the_application()
        window = self._window(interval)
        next_at = time.monotonic()
        while True:
            self._vouch(window)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay < 0:  # we were not scheduled for a while: do not burst to catch up
                next_at, delay = time.monotonic(), 0.0
            if self._closing.wait(delay):
                return

    def _vouch(self, window: float) -> None:
        """One tick of the heartbeat thread; it is no activity of the work loop."""
        now = time.monotonic()
        if now - self._active < window:
            self._send(["WATCHDOG=1"], activity=False)
            return
        with self._lock:
            until = max(self._waits, default=0.0)
        if now >= until:
            return  # the work loop is silent and no declared wait covers it
        if self._systemd:
            self._send(["WATCHDOG=1"], activity=False)
        else:
            self._send(["EXTEND_TIMEOUT_USEC=%d" % _usec(min(window, until - now))], activity=False)

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Stop the threads (joined) and close the socket. Idempotent; later calls are no-ops.

        It sends nothing: an agent that goes on running after close() stops beating.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._give_back_sigint()
        if self._sock is None:
            return
        self._closing.set()
        if self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass
        for thread in (self._heartbeat_thread, self._receiver_thread):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=2.0)
        with self._lock:
            self._sock.close()
            for fd in (self._wake_r, self._wake_w):
                if fd >= 0:
                    os.close(fd)
            self._wake_r = self._wake_w = -1

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._sock is None:
            return "<hermeskill.Client unsupervised>"
        return "<hermeskill.Client %s connected=%s sent=%d dropped=%d stop_requested=%s>" % (
            self._address,
            self._connected,
            self._sent,
            self._dropped,
            self.stop_requested,
        )

    # -- internals -----------------------------------------------------------------------

    def _send(self, lines: List[str], announce: bool = False, activity: bool = True) -> bool:
        if activity:
            self._active = time.monotonic()
        if self._sock is None:
            return False
        with self._lock:
            if self._closed:
                return False
            for attempt in (1, 2):
                if not self._connected and not self._try_connect():
                    break
                payload = list(lines)
                announcement = self._announce if announce or self._announce_pending else None
                if announcement is not None:
                    payload.append(announcement)
                try:
                    self._sock.send("\n".join(payload).encode("utf-8"))
                except OSError as e:
                    # BlockingIOError (EAGAIN): the supervisor's queue is full; drop, never wait.
                    if e.errno in _DISCONNECTED:
                        # The supervisor closed its socket (stopped or restarting); the kernel
                        # has disconnected us. A restarted one gets this message at once.
                        self._connected = False
                        if attempt == 1:
                            continue
                    break
                self._sent += 1
                if announcement is not None:
                    self._announce_pending = False
                return True
            self._dropped += 1
            return False

    def _try_connect(self) -> bool:
        """Connect to the supervisor, at most once per _reconnect_interval. Lock held."""
        assert self._sock is not None
        now = time.monotonic()
        if now < self._next_connect:
            return False
        self._next_connect = now + self._reconnect_interval
        try:
            # A connected datagram socket receives only from its peer (unix(7); EPERM for
            # every other sender): that authenticates directives as the supervisor's.
            self._sock.connect(self._raw_address)
        except OSError:
            return False
        # While unconnected, any local process could queue datagrams for us: discard them.
        self._drain()
        self._connected = True
        self._announce_pending = self._announce is not None  # a new supervisor must learn it
        return True

    def _drain(self) -> None:
        assert self._sock is not None
        for _ in range(10000):
            try:
                self._sock.recv(_RECV_BYTES)
            except OSError:
                return

    def _receive_loop(self) -> None:
        assert self._sock is not None
        self._leave_dump_signal_to_the_application()
        sel = selectors.DefaultSelector()
        try:
            sel.register(self._sock, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._closing.is_set():
                sel.select()
                if self._closing.is_set():
                    return
                with self._lock:
                    if self._closed:
                        return
                    try:
                        data = self._sock.recv(_RECV_BYTES)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = None
                    # Connected means the kernel filtered the sender; otherwise discard.
                    trusted = self._connected
                if data is None:
                    self._closing.wait(0.05)  # a pending socket error: do not spin on it
                elif trusted:
                    self._handle_directive(data)
        except Exception:  # a bug here must not pass silently, nor kill the agent
            traceback.print_exc()
        finally:
            sel.close()

    def _handle_directive(self, data: bytes) -> None:
        fields = _parse_fields(data)
        if fields.get("STOP") == "1":
            self._on_stop(fields)
        warning = fields.get("WARNING")
        if warning is not None:
            self._warnings.append(warning)
            if self._on_warning is not None:
                try:
                    self._on_warning(warning)
                except Exception:
                    traceback.print_exc()

    def _on_stop(self, fields: Dict[str, str]) -> None:
        try:
            grace = int(fields.get("GRACE_USEC", "")) / 1e6  # type: Optional[float]
        except ValueError:
            grace = None
        with self._lock:
            if self._stop_info is not None:
                return  # the first STOP wins; interrupt the main thread only once
            self._stop_info = (
                fields.get("CHECK", ""),
                fields.get("REASON", ""),
                grace,
                fields.get("KILL_EVENT_ID") or None,
            )
            calls, self._stop_calls = self._stop_calls, []
        self._stop_event.set()
        for call in calls:
            try:
                call()
            except Exception:
                traceback.print_exc()
        if calls:
            # supervised_task(): the task's cancellation is the agent's stop path.
            self._send(["STOPPING=1"], activity=False)
        elif self._interrupt_main and self._sigint_taken and self._sigint_still_ours():
            self._send(["STOPPING=1"], activity=False)  # armed: SIGINT now raises the stop
            threading.Thread(target=self._interrupt, name="hermeskill-interrupt", daemon=True).start()
        elif self._interrupt_explicit:
            _thread.interrupt_main()

    def _take_sigint(self) -> None:
        """Make SIGINT's handler ours, if it is Python's default and we are in the main thread."""
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
                return  # the application's own handler (or SIG_IGN): leave it be
            signal.signal(signal.SIGINT, self._on_sigint)
        except (ValueError, OSError):
            return
        self._sigint_taken = True

    def _sigint_still_ours(self) -> bool:
        """The application may have set a SIGINT handler of its own since: then it is its."""
        try:
            return signal.getsignal(signal.SIGINT) == self._on_sigint
        except (ValueError, OSError):
            return False

    def _give_back_sigint(self) -> None:
        """Put Python's default SIGINT handler back, if ours is still there (main thread only)."""
        if not self._sigint_taken or threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGINT) == self._on_sigint:
                signal.signal(signal.SIGINT, signal.default_int_handler)
        except (ValueError, OSError):
            pass

    def _on_sigint(self, signum: int, frame: Any) -> None:
        receiver = self._receiver_thread
        if not self._stop_event.is_set() and receiver is not None and receiver.is_alive():
            # hermeskilld sends its cooperative SIGINT after the STOP, when the STOP was not
            # acknowledged in time (a loaded machine): a STOP may be arriving with it. Waiting
            # a moment for it makes that SIGINT the stop it is; a SIGINT of the agent's own
            # (a Ctrl-C) is raised that much later.
            self._stop_event.wait(_SIGINT_STOP_WAIT)
        if not self._stop_event.is_set():
            signal.default_int_handler(signum, frame)  # a SIGINT of its own: KeyboardInterrupt
            return
        if self._raised.is_set():
            return  # the stop is being handled; a repeated SIGINT must not cut it short
        self._raised.set()
        raise self._terminated()

    def _interrupt(self) -> None:
        """Send SIGINT to the main thread until its handler has raised the stop."""
        main = threading.main_thread().ident
        _, _, grace, _ = self._stop_info or ("", "", None, None)
        deadline = time.monotonic() + (grace if grace else 30.0)
        while not self._raised.is_set() and main is not None and time.monotonic() < deadline:
            try:
                signal.pthread_kill(main, signal.SIGINT)
            except (OSError, ValueError):
                return  # the main thread is gone
            if self._raised.wait(0.1):
                return


class Extension:
    """A wait declared with Client.extend(): end it with end(), by calling it, or by leaving
    its ``with`` block. Ending it more than once does nothing; the first end counts as
    activity of the work loop."""

    def __init__(self, client: Optional[Client], until: float) -> None:
        self._client = client
        self._until = until
        self._ended = client is None
        self._lock = threading.Lock()

    def end(self) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        assert self._client is not None
        self._client._end_wait(self._until)

    __call__ = end

    def __enter__(self) -> "Extension":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.end()

    def __repr__(self) -> str:
        return "<hermeskill.Extension %s>" % ("ended" if self._ended else "open")


class SupervisedTask:
    """The block of ``async with hk.supervised_task():`` (see Client.supervised_task).

    One use: enter it once, from the task it is to cancel.
    """

    def __init__(self, client: Client, heartbeat: bool) -> None:
        self._client = client
        self._heartbeat = heartbeat
        self._loop = None  # type: Optional[asyncio.AbstractEventLoop]
        self._task = None  # type: Optional[asyncio.Task[Any]]
        self._beat = None  # type: Optional[asyncio.Task[None]]
        self._used = False
        # Both touched only on the event loop's thread: no lock.
        self._inside = False  # the task is between __aenter__ and __aexit__
        self._cancelled = False  # the stop cancelled the task

    async def __aenter__(self) -> "SupervisedTask":
        import asyncio

        if self._used:
            raise RuntimeError("hermeskill: a supervised_task() block is entered once")
        self._used = True
        client = self._client
        client.checkpoint()  # a STOP that came before: now
        if not client.supervised:
            return self
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        if self._task is None:
            raise RuntimeError("hermeskill: supervised_task() needs a task to cancel")
        self._inside = True
        client._call_on_stop(self._stop)
        if self._heartbeat and client._heartbeat_thread is None:
            self._beat = self._loop.create_task(client.run_heartbeat())
        return self

    def _stop(self) -> None:
        """STOP arrived: cancel the task from its own loop. Runs on the receiver thread."""
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._cancel)
        except RuntimeError:  # the loop is closed: there is no task left to cancel
            pass

    def _cancel(self) -> None:
        # Scheduled on the loop, so it runs while the task waits: if the task is still inside
        # the block, the CancelledError lands inside it; a block already left is not cancelled.
        if self._inside and self._task is not None and not self._task.done():
            self._cancelled = True
            self._task.cancel()

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional["TracebackType"],
    ) -> bool:
        import asyncio

        self._inside = False  # first: a _cancel scheduled from here on finds the block left
        self._client._forget_on_stop(self._stop)
        stop = None  # type: Optional[HermeskillTerminated]
        if self._cancelled:
            assert self._task is not None
            # Python >= 3.11 counts cancellation requests: take ours back; if another is
            # pending (a timeout around the block), its CancelledError goes on.
            uncancel = getattr(self._task, "uncancel", None)
            others = uncancel() if uncancel is not None else 0
            if others == 0 and (exc_type is None or issubclass(exc_type, asyncio.CancelledError)):
                stop = self._client._terminated()
            # else another cancellation, or an error of the work's cleanup: let it through
        if self._beat is not None:
            self._beat.cancel()
            await asyncio.wait([self._beat])
        if stop is not None:
            raise stop from exc
        return False

    def __repr__(self) -> str:
        state = "cancelled" if self._cancelled else "inside" if self._inside else "outside"
        return "<hermeskill.SupervisedTask %s>" % state


# The default client: the first Client made from the process's environment, else one that
# default_client() makes. Guarded by _default_lock.
_default = None  # type: Optional[Client]
_default_lock = threading.Lock()


def _adopt_default(client: Client) -> None:
    global _default
    with _default_lock:
        if _default is None:
            _default = client


def default_client() -> Client:
    """The process's client: the first Client made from the environment (Client.from_env(),
    or Client() without an address or environ), else one made now with Client.from_env().

    A no-op client when the process is not supervised. hermeskilld sends directives only to
    a client it has heard from: a client made here announces DUMP_SIGNAL at once, unless the
    application has a SIGUSR2 handler of its own; then call its ready() (or any method).
    Closing it does not replace it. Raises ConfigError for a malformed address.
    """
    global _default
    with _default_lock:
        client = _default
    if client is None:
        made = Client.from_env()  # adopts itself, unless another thread's client came first
        with _default_lock:
            if _default is None:
                _default = made
            client = _default
        if client is not made:
            made.close()
    return client


def checkpoint() -> None:
    """Raise HermeskillTerminated if hermeskilld asked this agent to stop; else return.

    The default client's checkpoint(): a no-op when the process is not supervised. It is
    the hermeskill SDK's ``checkpoint()``, for agents written against it. Raises ConfigError
    for a malformed address in the environment.
    """
    default_client().checkpoint()


def _check_interval(interval: float) -> None:
    if not (isinstance(interval, (int, float)) and math.isfinite(interval) and interval > 0):
        raise ValueError("hermeskill: heartbeat interval must be a positive number of seconds")


def _register_dump_signal(sig: Any) -> Optional[str]:
    """Make ``sig`` dump every thread's traceback to stderr; return its name, or None.

    faulthandler's handler is C code: it prints even while the main thread holds the GIL
    in ``while True: pass``, where no Python-level handler would ever run.
    """
    if sig is None:
        return None
    try:
        signum = _signal_number(sig)
        if signal.getsignal(signum) is not signal.SIG_DFL:
            return None  # the application handles (or ignores) it: leave it alone
        faulthandler.register(signum, all_threads=True, chain=False)
    except (AttributeError, KeyError, ValueError, OSError, RuntimeError):
        # No faulthandler.register (Windows), no usable sys.stderr, unknown signal.
        return None
    return signum.name
