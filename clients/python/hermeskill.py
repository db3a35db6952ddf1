"""Python client of hermeskilld, the out-of-process kill switch for AI agents.

One file, standard library only, Python >= 3.8: copy it next to your agent or put
this directory on PYTHONPATH.

    import hermeskill

    hk = hermeskill.Client.from_env()   # a no-op client when the agent is not supervised
    hk.ready()
    hk.start_heartbeat()                # daemon thread, every WATCHDOG_USEC/3 (1s when unset)
    for step in range(1, 100):
        hk.checkpoint()                 # raises HermeskillTerminated once hermeskilld said STOP
        hk.tool_call("web_search", {"q": "..."})   # only a hash of the arguments leaves the agent
        hk.usage(tokens=total_tokens, cost_usd=total_cost)          # cumulative values
        hk.progress(step)

Protocol: hermeskilld DESIGN.md section 2 (agent -> supervisor: one datagram of
newline-separated KEY=VALUE lines on an AF_UNIX SOCK_DGRAM socket, a superset of
sd_notify(3), https://www.freedesktop.org/software/systemd/man/sd_notify.html) and
section 2.1 (directives, supervisor -> agent). The address comes from HERMESKILL_SOCKET,
else NOTIFY_SOCKET, so the same client also talks to systemd.

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
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

__all__ = [
    "Client",
    "ConfigError",
    "HermeskillTerminated",
    "MAX_TEXT_BYTES",
    "MAX_WARNINGS",
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
# Errors of send() meaning "not connected to a live supervisor any more": reconnect.
_DISCONNECTED = frozenset(
    (errno.ECONNREFUSED, errno.ECONNRESET, errno.ENOTCONN, errno.EDESTADDRREQ)
)
# Newlines would start a new KEY=VALUE line; systemd drops datagrams with a NUL in them.
_TEXT_TABLE = {ord("\n"): " ", ord("\r"): " ", 0: " "}
_USE_DEFAULT = object()


class ConfigError(ValueError):
    """HERMESKILL_SOCKET / NOTIFY_SOCKET (or an explicit address) is not usable."""


class HermeskillTerminated(BaseException):
    """hermeskilld asked this agent to stop (the cooperative stage of its escalation).

    Raised by ``Client.checkpoint()``. Like KeyboardInterrupt and asyncio.CancelledError it
    derives from BaseException, so an agent's ``except Exception:`` around a failing tool
    call does not swallow the stop. Save what is worth saving and exit: after ``grace``
    seconds hermeskilld escalates to SIGTERM, then SIGKILL.

    Attributes: ``check`` (the symptom check that fired, e.g. "cost"), ``reason`` (its
    message), ``grace`` (seconds until escalation, a float, or None when not given).
    """

    def __init__(self, check: str = "", reason: str = "", grace: Optional[float] = None):
        super().__init__(check, reason, grace)
        self.check = check
        self.reason = reason
        self.grace = grace

    def __str__(self) -> str:
        text = "hermeskilld stopped the agent (%s: %s)" % (self.check or "?", self.reason)
        if self.grace is not None:
            text += "; escalation in %gs" % self.grace
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
    """sha256 (hex) of ``args`` as canonical JSON: sorted keys, no spaces, UTF-8, no escapes.

    The Go client hashes the same bytes, so {"q": "a<b", "n": 1} gives the same digest in
    both. Objects JSON cannot encode are hashed through str(); arguments JSON cannot
    order (mixed key types) or that are circular fall back to repr(). Never raises.
    """
    try:
        canonical = json.dumps(
            args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        )
    except (TypeError, ValueError, RecursionError):
        canonical = repr(args)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


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


def _heartbeat_from_env(env: Mapping[str, str]) -> float:
    """A third of WATCHDOG_USEC, as systemd recommends; 1s when unset or not for us."""
    pid = env.get("WATCHDOG_PID")
    if pid and pid != str(os.getpid()):  # sd_watchdog_enabled(3): the watchdog is another process's
        return _DEFAULT_HEARTBEAT_S
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return _DEFAULT_HEARTBEAT_S
    if usec <= 0:
        return _DEFAULT_HEARTBEAT_S
    return usec / 3e6


def _signal_number(sig: Union[int, str]) -> signal.Signals:
    if isinstance(sig, str):
        return signal.Signals[sig if sig.startswith("SIG") else "SIG" + sig]
    return signal.Signals(sig)


class Client:
    """Talks to hermeskilld (or systemd) over the notify socket; thread-safe.

    ``address``: "/path" or "@abstract"; None reads HERMESKILL_SOCKET, else NOTIFY_SOCKET,
    from ``environ`` (default os.environ). Neither set (or set empty): a no-op client.

    ``interrupt_main``: on STOP also raise KeyboardInterrupt in the main thread (once), so
    a main thread blocked outside checkpoint() wakes up. Note that hermeskilld also sends
    its cooperative signal (SIGINT by default) at the same moment: run it with
    ``--coop-signal none`` when you use this, or the agent may get two KeyboardInterrupts.

    ``on_warning``: called with the text of each WARNING directive, from the client's
    receiver thread; an exception it raises is printed and otherwise ignored.

    ``dump_signal``: the signal on which faulthandler prints every thread's traceback to
    stderr (default SIGUSR2; None disables). It is registered and announced to the
    supervisor as DUMP_SIGNAL only if the application has no handler of its own for it;
    hermeskilld sends it before killing a wedged agent, so the certificate shows where the
    agent was stuck. The registration outlives close(): unregistering would make a late
    SIGUSR2 from the supervisor kill the agent instead of dumping.

    ``heartbeat_interval``: seconds between beats of start_heartbeat(); default a third of
    WATCHDOG_USEC, or 1s.

    Raises ConfigError for a malformed address, OSError if no socket can be created.
    """

    # Seconds between two attempts to connect to a supervisor that is not there.
    _reconnect_interval = 1.0

    def __init__(
        self,
        address: Optional[str] = None,
        *,
        interrupt_main: bool = False,
        on_warning: Optional[Callable[[str], Any]] = None,
        dump_signal: Any = _USE_DEFAULT,
        heartbeat_interval: Optional[float] = None,
        environ: Optional[Mapping[str, str]] = None,
    ) -> None:
        env = os.environ if environ is None else environ
        if address is None:
            address = env.get("HERMESKILL_SOCKET") or env.get("NOTIFY_SOCKET") or None
        if heartbeat_interval is None:
            heartbeat_interval = _heartbeat_from_env(env)
        _check_interval(heartbeat_interval)

        self._address = address
        self._heartbeat_interval = float(heartbeat_interval)
        self._interrupt_main = interrupt_main
        self._on_warning = on_warning
        # RLock: a signal handler of the agent may call the client while the main thread
        # is inside it.
        self._lock = threading.RLock()
        self._closing = threading.Event()  # close() began: threads leave
        self._stop_event = threading.Event()  # a STOP directive arrived
        self._stop_info = None  # type: Optional[Tuple[str, str, Optional[float]]]
        self._warnings = collections.deque(maxlen=MAX_WARNINGS)  # type: collections.deque
        self._closed = False
        self._dropped = 0
        self._sent = 0
        self._sock = None  # type: Optional[socket.socket]
        self._raw_address = b""
        self._connected = False
        self._next_connect = 0.0  # monotonic time of the next allowed connect()
        self._announce = None  # type: Optional[str]
        self._announce_pending = False
        self._heartbeat_thread = None  # type: Optional[threading.Thread]
        self._receiver_thread = None  # type: Optional[threading.Thread]
        self._wake_r = self._wake_w = -1
        if not address:
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
        with self._lock:
            self._try_connect()
        if self._announce:
            self._send([])  # the first datagram says which signal dumps our stacks
        if bound:
            self._receiver_thread = threading.Thread(
                target=self._receive_loop, name="hermeskill-directives", daemon=True
            )
            self._receiver_thread.start()

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
    # dropped or the client is a no-op or closed.

    def ready(self) -> bool:
        """READY=1: startup is done; the heartbeat deadline starts."""
        return self._send(["READY=1"], announce=True)

    def beat(self) -> bool:
        """WATCHDOG=1: one heartbeat."""
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
            return False
        return self._send(lines)

    def tool_call(self, name: str, args: Any = None) -> bool:
        """TOOL=name + TOOL_ARGS_SHA256: one tool call begins. The arguments stay here."""
        if self._sock is None:
            return False  # unsupervised: do not even hash them
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

    # -- directives (supervisor -> agent) ------------------------------------------------

    def checkpoint(self) -> None:
        """Raise HermeskillTerminated if hermeskilld asked the agent to stop; else return."""
        if self._stop_event.is_set():
            check, reason, grace = self._stop_info or ("", "", None)
            raise HermeskillTerminated(check, reason, grace)

    # -- heartbeat -----------------------------------------------------------------------

    def start_heartbeat(self, interval: Optional[float] = None) -> None:
        """Beat from a daemon thread every ``interval`` seconds until close().

        Default interval: the constructor's. Beats once at once. A second call while the
        thread runs does nothing. The thread proves the process is alive, not that it
        makes progress: report that with progress().
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

    def _heartbeat_loop(self, interval: float) -> None:
        next_at = time.monotonic()
        while True:
            self.beat()
            next_at += interval
            delay = next_at - time.monotonic()
            if delay < 0:  # we were not scheduled for a while: do not burst to catch up
                next_at, delay = time.monotonic(), 0.0
            if self._closing.wait(delay):
                return

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Stop the threads (joined) and close the socket. Idempotent; later calls are no-ops.

        It sends nothing: an agent that goes on running after close() stops beating.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
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

    def _send(self, lines: List[str], announce: bool = False) -> bool:
        if self._sock is None:
            return False
        with self._lock:
            if self._closed:
                return False
            for attempt in (1, 2):
                if not self._connected and not self._try_connect():
                    break
                payload = list(lines)
                with_announce = self._announce is not None and (announce or self._announce_pending)
                if with_announce:
                    payload.append(self._announce)
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
                if with_announce:
                    self._announce_pending = False
                return True
            self._dropped += 1
            return False

    def _try_connect(self) -> bool:
        """Connect to the supervisor, at most once per _reconnect_interval. Lock held."""
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
        for _ in range(10000):
            try:
                self._sock.recv(_RECV_BYTES)
            except OSError:
                return

    def _receive_loop(self) -> None:
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
            self._stop_info = (fields.get("CHECK", ""), fields.get("REASON", ""), grace)
        self._stop_event.set()
        if self._interrupt_main:
            _thread.interrupt_main()


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
