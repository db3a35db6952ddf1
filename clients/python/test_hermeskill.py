# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0

"""Tests of hermeskill.py against a fake supervisor: a real AF_UNIX SOCK_DGRAM socket.

Run from the repository root: python3 -m unittest discover -s clients/python -v
"""

from __future__ import annotations

import contextlib
import faulthandler
import hashlib
import io
import json
import os
import queue
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
from typing import Optional

import hermeskill

HERE = os.path.dirname(os.path.abspath(__file__))


def wait_until(predicate, timeout=10.0, what="condition"):
    """Poll ``predicate`` with short sleeps until it is true; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.005)


class FakeSupervisor:
    """The supervisor's end: a datagram socket bound at a path in a short private dir."""

    def __init__(self, directory=None, name="s.sock"):
        self.dir = directory or tempfile.mkdtemp(prefix="hk")
        self.path = os.path.join(self.dir, name)
        assert len(self.path) < 100, self.path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.peer = None  # the address of the last sender: where directives go
        self._queue = None  # type: Optional[queue.Queue]
        self._reader = None  # type: Optional[threading.Thread]
        self._closed = threading.Event()
        self.log = []  # every datagram received, in order

    def start_reader(self):
        """Drain the socket from a thread, as hermeskilld does, so a busy agent loses nothing.

        The kernel queues only net.unix.max_dgram_qlen (10) datagrams; past that the client
        drops messages by design.
        """
        self._queue = queue.Queue()
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    def _read_loop(self):
        self.sock.settimeout(0.05)
        while not self._closed.is_set():
            try:
                self._queue.put(self.sock.recvfrom(65536))
            except socket.timeout:
                continue
            except OSError:
                return

    def recv(self, timeout=10.0):
        """The next datagram, decoded; fails the test after ``timeout``."""
        if self._queue is not None:
            try:
                data, self.peer = self._queue.get(timeout=timeout)
            except queue.Empty:
                raise socket.timeout("no datagram in %.1fs" % timeout) from None
        else:
            self.sock.settimeout(timeout)
            data, self.peer = self.sock.recvfrom(65536)
        self.log.append(data.decode("utf-8"))
        return self.log[-1]

    def recv_until(self, predicate, timeout=10.0):
        """Datagrams received until one satisfies ``predicate`` (included)."""
        deadline = time.monotonic() + timeout
        seen = []
        while True:
            seen.append(self.recv(max(0.01, deadline - time.monotonic())))
            if predicate(seen[-1]):
                return seen

    def pending(self):
        """Every datagram already queued, without waiting."""
        out = []
        if self._queue is not None:
            while not self._queue.empty():
                out.append(self._queue.get()[0].decode("utf-8"))
        else:
            self.sock.setblocking(False)
            try:
                while True:
                    out.append(self.sock.recv(65536).decode("utf-8"))
            except BlockingIOError:
                pass
        self.log.extend(out)
        return out

    def collect(self):
        """Stop the reader; return every datagram this supervisor ever received."""
        self._closed.set()
        if self._reader is not None:
            self._reader.join()
        self.pending()
        self._queue = None
        self.pending()
        return list(self.log)

    def assert_silent(self, testcase, within=0.15):
        self.sock.settimeout(within)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return
        testcase.fail("unexpected datagram %r" % data)

    def send(self, text, to=None):
        self.sock.sendto(text.encode("utf-8"), to or self.peer)

    def close(self, remove_dir=True):
        try:
            self._closed.set()
            if self._reader is not None:
                self._reader.join()
            self.sock.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        finally:
            if remove_dir:
                shutil.rmtree(self.dir, ignore_errors=True)


class SupervisedTestCase(unittest.TestCase):
    def setUp(self):
        self.sup = FakeSupervisor()
        self.addCleanup(self.sup.close)

    def client(self, **kwargs):
        kwargs.setdefault("dump_signal", None)
        # The tests of the main thread's interruption ask for it; elsewhere a STOP would
        # raise HermeskillTerminated into the test's own main thread.
        kwargs.setdefault("interrupt_main", False)
        kwargs.setdefault("environ", {})
        hk = hermeskill.Client(kwargs.pop("address", self.sup.path), **kwargs)
        self.addCleanup(hk.close)
        return hk

    def connected_client(self, **kwargs):
        """A client the supervisor has heard from, so it can send directives back."""
        hk = self.client(**kwargs)
        self.assertTrue(hk.status("hello"))
        self.assertEqual(self.sup.recv(), "STATUS=hello")
        return hk

    def barrier(self, hk, text="barrier: sync"):
        """Send a warning and wait for it: directives sent before it were handled."""
        self.sup.send("WARNING=" + text)
        wait_until(lambda: text in hk.warnings, what="warning " + text)


# Arguments, their canonical JSON and its sha256. pkg/client/argshash_test.go holds the same
# hashes for the same arguments as Go values and as the JSON a model wrote;
# clients/testdata/canonical-args.json has more, as JSON texts, for every client.
SHARED_HASHES = [
    ({"q": "a<b", "n": 1}, '{"n":1,"q":"a<b"}',  # no HTML escaping of "<" (Go's \u003c)
     "6802a7c2b17e87b4a48247e8a05a547826899abba22624e4123454068da8f6eb"),
    ({"city": "Zürich", "q": "東京 café 😀", "sep": "\u2028"},
     '{"city":"Zürich","q":"東京 café 😀","sep":"\u2028"}',  # UTF-8 as it is, no \u escapes
     "c97cb19630ee6d7f6e09e87a9697336b6db877794915e562547770f4e43130ff"),
    ("SELECT * FROM users", '"SELECT * FROM users"',
     "a0e1e8e603cc0f07843bfd4ce0f218626ce3ad45b764f44db419b1c390e1eece"),
    ("naïve résumé — 東京", '"naïve résumé — 東京"',
     "81af71ed60efb1ec771e47673552799c29fcfa0c899c66051bd71fe9f7e93476"),
    ('{"q":1}', '"{\\"q\\":1}"',  # a string is hashed as a string, never parsed
     "cf83cef24c44460dd65f58ac435b11ca1d752ccd2aa2e4da82698923408f01c6"),
    ("tab\tnl\nnul\x00del\x7f", '"tab\\tnl\\nnul\\u0000del\x7f"',
     "e657e99fddbd08831d6ff78450dbec66961df7179abf69b9f56e982f16854d3e"),
    ({"half": 0.5, "small": 1e-7, "big": 1e21, "n": -3}, '{"big":1e+21,"half":0.5,"n":-3,"small":1e-07}',
     "7b7253cc734685bcf9f0e7c88df27d717ba158e03744289eb1c7b445669a11fa"),
    ("\ud800", '"\ufffd"',  # a lone surrogate is U+FFFD, as a JSON decoder reads "\ud800"
     "568601070314e0f4489c9944b3c151d5251d379330008293bb7e1a826a22a845"),
]


class ToolArgsHashTest(unittest.TestCase):
    def test_shared_vectors(self):
        """The vectors of clients/testdata, read by the Go and Node clients' tests too."""
        with open(os.path.join(HERE, "..", "testdata", "canonical-args.json"), encoding="utf-8") as f:
            vectors = json.load(f)["vectors"]
        self.assertTrue(vectors)
        for v in vectors:
            with self.subTest(v["name"]):
                self.assertEqual(hashlib.sha256(v["canonical"].encode("utf-8")).hexdigest(), v["sha256"])
                for text in v["json"]:
                    self.assertEqual(hermeskill.tool_args_sha256(json.loads(text)), v["sha256"], text)

    def test_same_hashes_as_the_go_client(self):
        for args, canonical, want in SHARED_HASHES:
            with self.subTest(args=args):
                self.assertEqual(hashlib.sha256(canonical.encode("utf-8")).hexdigest(), want)
                self.assertEqual(hermeskill.tool_args_sha256(args), want)

    def test_a_json_document_is_hashed_by_value_once_decoded(self):
        wire = '{"sep":"\\u2028","q":"\\u6771\\u4eac caf\\u00e9 \\ud83d\\ude00","city":"Z\\u00fcrich"}'
        self.assertEqual(hermeskill.tool_args_sha256(json.loads(wire)), SHARED_HASHES[1][2])
        self.assertNotEqual(hermeskill.tool_args_sha256(wire), SHARED_HASHES[1][2])

    def test_surrogate_pairs_are_joined(self):
        self.assertEqual(hermeskill.tool_args_sha256("\ud83d\ude00"), hermeskill.tool_args_sha256("😀"))

    def test_key_order_does_not_matter_values_do(self):
        a = hermeskill.tool_args_sha256({"a": [1, {"y": 2, "x": "é"}], "b": None})
        b = hermeskill.tool_args_sha256({"b": None, "a": [1, {"x": "é", "y": 2}]})
        self.assertEqual(a, b)
        self.assertNotEqual(a, hermeskill.tool_args_sha256({"a": [1, {"x": "e", "y": 2}], "b": None}))

    def test_awkward_arguments_never_raise(self):
        circular = []
        circular.append(circular)
        for args in (object, {1: "x", "y": 2}, circular, b"bytes", "\ud800", float("nan")):
            self.assertEqual(len(hermeskill.tool_args_sha256(args)), 64)


class AddressTest(unittest.TestCase):
    def test_path_and_abstract(self):
        self.assertEqual(hermeskill.parse_address("/run/hk/a.sock"), b"/run/hk/a.sock")
        self.assertEqual(hermeskill.parse_address("@hk-agent"), b"\0hk-agent")

    def test_bad_addresses_raise_config_error(self):
        for bad in ("relative/a.sock", "a.sock", "@", "vsock:2:1234", "unix:/x", "/" + "x" * 110):
            with self.subTest(address=bad):
                with self.assertRaises(hermeskill.ConfigError) as cm:
                    hermeskill.Client(bad, environ={})
                self.assertIsInstance(cm.exception, ValueError)

    def test_from_env_bad_address(self):
        with self.assertRaises(hermeskill.ConfigError):
            hermeskill.Client.from_env({"HERMESKILL_SOCKET": "hk.sock"})

    def test_hermeskill_socket_wins_over_notify_socket(self):
        sup = FakeSupervisor()
        self.addCleanup(sup.close)
        env = {"HERMESKILL_SOCKET": sup.path, "NOTIFY_SOCKET": "/nonexistent/notify"}
        with hermeskill.Client.from_env(env, dump_signal=None) as hk:
            self.assertEqual(hk.address, sup.path)
            self.assertTrue(hk.beat())
        self.assertEqual(sup.recv(), "WATCHDOG=1")

    def test_notify_socket_fallback_and_abstract(self):
        name = "@hk-test-%d" % os.getpid()
        sup = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(sup.close)
        sup.bind(hermeskill.parse_address(name))
        with hermeskill.Client.from_env({"NOTIFY_SOCKET": name}, dump_signal=None) as hk:
            self.assertTrue(hk.supervised)
            self.assertTrue(hk.ready())
        sup.settimeout(3)
        self.assertEqual(sup.recv(100), b"READY=1")

    def test_heartbeat_interval(self):
        pid = str(os.getpid())
        cases = [
            ({}, 1.0),
            ({"WATCHDOG_USEC": "300000"}, 0.1),
            ({"WATCHDOG_USEC": "300000", "WATCHDOG_PID": pid}, 0.1),
            ({"WATCHDOG_USEC": "300000", "WATCHDOG_PID": "1"}, 1.0),  # another process's watchdog
            ({"WATCHDOG_USEC": "junk"}, 1.0),
        ]
        for env, want in cases:
            with self.subTest(env=env):
                self.assertAlmostEqual(hermeskill.Client.from_env(env).heartbeat_interval, want)
        self.assertEqual(hermeskill.Client.from_env({}, heartbeat_interval=0.25).heartbeat_interval, 0.25)
        with self.assertRaises(ValueError):
            hermeskill.Client.from_env({}, heartbeat_interval=0)


class NoopClientTest(unittest.TestCase):
    def test_unsupervised_client_does_nothing(self):
        threads = threading.active_count()
        for env in ({}, {"HERMESKILL_SOCKET": "", "NOTIFY_SOCKET": ""}):
            hk = hermeskill.Client.from_env(env, interrupt_main=True)
            self.assertFalse(hk.supervised)
            self.assertIsNone(hk.address)
            start = time.monotonic()
            results = [
                hk.ready(), hk.beat(), hk.progress(3), hk.usage(tokens=1, cost_usd=0.5),
                hk.tool_call("web_search", {"q": "x"}), hk.error("timeout"), hk.status("s"),
                hk.stopping(), hk.trigger("looping"),
            ]
            hk.start_heartbeat(0.01)
            hk.checkpoint()
            with hk.extend(60) as wait:
                pass
            wait()
            self.assertEqual(results, [False] * len(results))
            self.assertFalse(hk.stop_requested)
            self.assertEqual((hk.sent, hk.dropped, hk.warnings), (0, 0, []))
            self.assertEqual(threading.active_count(), threads)
            with hk:
                pass
            hk.close()
            self.assertLess(time.monotonic() - start, 1.0)

    def test_misuse_raises_supervised_or_not(self):
        sup = FakeSupervisor()
        self.addCleanup(sup.close)
        for hk in (hermeskill.Client.from_env({}), hermeskill.Client(sup.path, dump_signal=None, environ={})):
            with hk:
                with self.assertRaises(ValueError):
                    hk.progress(-1)
                with self.assertRaises(TypeError):
                    hk.progress(1.5)
                with self.assertRaises(ValueError):
                    hk.usage(cost_usd=float("inf"))
                with self.assertRaises(ValueError):
                    hk.usage(tokens=-3)
                with self.assertRaises(ValueError):
                    hk.start_heartbeat(-1)
                for bad in (0, -1, float("nan"), float("inf")):
                    with self.assertRaises(ValueError):
                        hk.extend(bad)
                for bad in ("5", None, True):
                    with self.assertRaises(TypeError):
                        hk.extend(bad)


class DatagramTest(SupervisedTestCase):
    def test_every_method_sends_its_exact_datagram(self):
        hk = self.client()
        cases = [
            (hk.ready, "READY=1"),
            (hk.beat, "WATCHDOG=1"),
            (lambda: hk.progress(7), "PROGRESS=7"),
            (lambda: hk.usage(tokens=1200, cost_usd=0.25), "TOKENS=1200\nCOST_USD=0.25"),
            (lambda: hk.usage(tokens=5), "TOKENS=5"),
            (lambda: hk.usage(cost_usd=0.1 + 0.2), "COST_USD=0.30000000000000004"),
            (lambda: hk.usage(cost_usd=2), "COST_USD=2.0"),
            (
                lambda: hk.tool_call("web_search", {"q": "a<b", "n": 1}),
                "TOOL=web_search\nTOOL_ARGS_SHA256="
                "6802a7c2b17e87b4a48247e8a05a547826899abba22624e4123454068da8f6eb",
            ),
            (lambda: hk.error("timeout"), "ERROR=timeout"),
            (lambda: hk.error(TimeoutError("upstream slow")), "ERROR=TimeoutError: upstream slow"),
            (lambda: hk.error(KeyError()), "ERROR=KeyError"),
            (lambda: hk.status("step 3"), "STATUS=step 3"),
            (hk.stopping, "STOPPING=1"),
            (lambda: hk.trigger("I am looping"), "WATCHDOG=trigger\nSTATUS=I am looping"),
            (hk.trigger, "WATCHDOG=trigger"),
        ]
        for send, want in cases:
            with self.subTest(want=want):
                self.assertTrue(send())
                self.assertEqual(self.sup.recv(), want)
        self.assertFalse(hk.usage())  # nothing to say: nothing sent
        self.sup.assert_silent(self)
        self.assertEqual((hk.sent, hk.dropped), (len(cases), 0))

    def test_sender_is_bound_so_directives_can_come_back(self):
        hk = self.connected_client()
        self.assertIsInstance(self.sup.peer, bytes)
        self.assertTrue(self.sup.peer.startswith(b"\0"), self.sup.peer)  # Linux autobind
        self.assertIn("connected=True", repr(hk))

    def test_text_is_one_capped_line(self):
        hk = self.client()
        hk.status("a\nb\rc\0d")
        self.assertEqual(self.sup.recv(), "STATUS=a b c d")
        hk.error("x" * 5000)
        self.assertEqual(self.sup.recv(), "ERROR=" + "x" * hermeskill.MAX_TEXT_BYTES)
        hk.status("€" * 400)  # 3 bytes each: cut on a character boundary
        self.assertEqual(self.sup.recv(), "STATUS=" + "€" * (hermeskill.MAX_TEXT_BYTES // 3))
        hk.tool_call("evil\nSTOP=1", None)
        self.assertEqual(self.sup.recv().split("\n")[0], "TOOL=evil STOP=1")
        hk.status("\ud800 lone surrogate")
        self.assertEqual(self.sup.recv(), "STATUS=? lone surrogate")

    def test_dump_signal_announced_first_and_with_ready(self):
        hk = self.client(dump_signal=signal.SIGUSR2)
        self.assertEqual(self.sup.recv(), "DUMP_SIGNAL=SIGUSR2")
        hk.beat()
        self.assertEqual(self.sup.recv(), "WATCHDOG=1")
        hk.ready()
        self.assertEqual(self.sup.recv(), "READY=1\nDUMP_SIGNAL=SIGUSR2")

    def test_dump_signal_not_taken_from_the_application(self):
        previous = signal.signal(signal.SIGUSR2, lambda *_: None)

        def restore():
            signal.signal(signal.SIGUSR2, previous)
            faulthandler.unregister(signal.SIGUSR2)  # forget an earlier test's registration

        self.addCleanup(restore)
        hk = self.client(dump_signal=signal.SIGUSR2)
        hk.ready()
        self.assertEqual(self.sup.recv(), "READY=1")


class DirectiveTest(SupervisedTestCase):
    def test_stop_makes_checkpoint_raise(self):
        hk = self.connected_client()
        hk.checkpoint()
        self.sup.send("STOP=1\nCHECK=cost\nREASON=spent 5.10 USD, limit 5\nGRACE_USEC=10000000\n"
                      "KILL_EVENT_ID=agent-7_c0ffee\nCHECK=later")
        wait_until(lambda: hk.stop_requested, what="stop_requested")
        for _ in range(2):  # it keeps raising
            with self.assertRaises(hermeskill.HermeskillTerminated) as cm:
                hk.checkpoint()
            stop = cm.exception
            self.assertEqual((stop.check, stop.reason, stop.grace, stop.kill_event_id),
                             ("cost", "spent 5.10 USD, limit 5", 10.0, "agent-7_c0ffee"))
        self.assertEqual(stop.args, ("spent 5.10 USD, limit 5",))
        self.assertIn("cost: spent 5.10 USD", str(stop))
        self.assertIn("kill event agent-7_c0ffee", str(stop))
        # An agent's `except Exception:` around a tool call must not swallow the stop.
        self.assertFalse(issubclass(hermeskill.HermeskillTerminated, Exception))
        # The first STOP wins.
        self.sup.send("STOP=1\nCHECK=manual\nREASON=operator")
        self.barrier(hk)
        with self.assertRaises(hermeskill.HermeskillTerminated) as cm:
            hk.checkpoint()
        self.assertEqual(cm.exception.check, "cost")

    def test_stop_without_grace(self):
        hk = self.connected_client()
        self.sup.send("STOP=1\nCHECK=manual")
        wait_until(lambda: hk.stop_requested)
        with self.assertRaises(hermeskill.HermeskillTerminated) as cm:
            hk.checkpoint()
        stop = cm.exception
        self.assertEqual((stop.check, stop.reason, stop.grace, stop.kill_event_id), ("manual", "", None, None))

    def test_stop_raises_in_the_blocked_main_thread_and_is_acknowledged(self):
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        hk = self.connected_client(interrupt_main=True)
        self.assertIsNot(signal.getsignal(signal.SIGINT), signal.default_int_handler, "the client took SIGINT")
        self.sup.start_reader()
        stop = None
        try:
            self.sup.send("STOP=1\nCHECK=progress_timeout\nREASON=no progress for 5m\nGRACE_USEC=3000000")
            time.sleep(10)  # a blocking call: the stop must end it
        except hermeskill.HermeskillTerminated as e:
            stop = e
        self.assertIsNotNone(stop, "no HermeskillTerminated in the main thread")
        self.assertEqual((stop.check, stop.reason), ("progress_timeout", "no progress for 5m"))
        self.sup.recv_until(lambda d: d == "STOPPING=1", timeout=5)
        # Raised once: a later SIGINT (a late cooperative signal) and a second STOP do not
        # interrupt the handler that saves the work.
        signal.raise_signal(signal.SIGINT)
        self.sup.send("STOP=1\nCHECK=manual")
        self.barrier(hk)
        for _ in range(5):
            time.sleep(0.005)
        hk.close()
        self.assertIs(signal.getsignal(signal.SIGINT), signal.default_int_handler, "close() gave SIGINT back")

    def test_sigint_without_stop_is_keyboard_interrupt(self):
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        self.connected_client(interrupt_main=True)
        with self.assertRaises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)

    def test_stop_raised_by_checkpoint_is_not_raised_again_while_saving(self):
        # The STOP reaches a main thread between two checkpoint() calls: checkpoint() raises
        # it first, and the SIGINT the client sent the main thread to raise it there (held
        # back here, as a busy thread may not run its handler before its next checkpoint)
        # must not raise it again inside the except block that saves the work.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        hk = self.connected_client(interrupt_main=True)
        self.sup.start_reader()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        self.addCleanup(signal.pthread_sigmask, signal.SIG_UNBLOCK, {signal.SIGINT})
        self.sup.send("STOP=1\nCHECK=manual")
        wait_until(lambda: hk.stop_requested)
        self.sup.recv_until(lambda d: d == "STOPPING=1", timeout=5)
        wait_until(lambda: signal.SIGINT in signal.sigpending(), what="the client's SIGINT to the main thread")
        saved = False
        try:
            hk.checkpoint()
        except hermeskill.HermeskillTerminated:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # its handler runs now
            time.sleep(0.3)  # saving
            saved = True
        self.assertTrue(saved, "the save was cut short")

    def test_sigint_just_before_its_stop_is_the_stop(self):
        # hermeskilld's cooperative SIGINT can reach the agent before the STOP it follows is
        # read (an acknowledgement that came too late on a loaded machine): the handler waits
        # a moment for the STOP, and the agent gets HermeskillTerminated, not KeyboardInterrupt.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        self.connected_client(interrupt_main=True)
        self.sup.start_reader()
        threading.Timer(0.05, self.sup.send, ["STOP=1\nCHECK=manual\nREASON=late"]).start()
        with self.assertRaises(hermeskill.HermeskillTerminated) as cm:
            signal.raise_signal(signal.SIGINT)
        self.assertEqual(cm.exception.check, "manual")

    def test_application_handler_is_left_and_stop_not_acknowledged(self):
        got = []
        previous = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        hk = self.connected_client(interrupt_main=True)
        self.sup.start_reader()
        self.sup.send("STOP=1\nCHECK=manual")
        wait_until(lambda: hk.stop_requested)
        # interrupt_main=True given explicitly: the application's handler is called instead.
        wait_until(lambda: got, what="the application's SIGINT handler")
        self.barrier(hk)
        self.assertNotIn("STOPPING=1", self.sup.collect(), "no acknowledgement: hermeskilld's signal must come")

    def test_handler_set_after_the_client_is_the_applications(self):
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        hk = self.connected_client(interrupt_main=True)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the application's choice, made later
        self.sup.start_reader()
        self.sup.send("STOP=1\nCHECK=manual")
        wait_until(lambda: hk.stop_requested)
        self.barrier(hk)
        self.assertNotIn("STOPPING=1", self.sup.collect(), "the client no longer holds SIGINT: no acknowledgement")

    def test_no_interruption_when_not_asked(self):
        hk = self.connected_client(interrupt_main=False)
        self.sup.start_reader()
        self.sup.send("STOP=1\nCHECK=manual")
        wait_until(lambda: hk.stop_requested)
        self.barrier(hk)
        self.assertNotIn("STOPPING=1", self.sup.collect())

    def test_warnings_are_kept_and_passed_to_callback(self):
        got = []
        hk = self.connected_client(on_warning=got.append)
        self.sup.send("WARNING=memory: rss 1.2GiB over warn 1GiB")
        wait_until(lambda: got)
        self.assertEqual(got, ["memory: rss 1.2GiB over warn 1GiB"])
        self.assertEqual(hk.warnings, got)
        self.assertFalse(hk.stop_requested)

    def test_warnings_are_bounded(self):
        hk = self.connected_client()
        for i in range(hermeskill.MAX_WARNINGS + 10):
            self.sup.send("WARNING=tokens: %d" % i)
        last = "tokens: %d" % (hermeskill.MAX_WARNINGS + 9)
        wait_until(lambda: last in hk.warnings)
        self.assertEqual(len(hk.warnings), hermeskill.MAX_WARNINGS)
        self.assertEqual(hk.warnings[0], "tokens: 10")

    def test_failing_callback_does_not_stop_the_receiver(self):
        def explode(text):
            raise RuntimeError("callback bug")

        hk = self.connected_client(on_warning=explode)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            self.sup.send("WARNING=cost: 4.10 USD")
            self.sup.send("STOP=1\nCHECK=cost")
            wait_until(lambda: hk.stop_requested)
        self.assertIn("callback bug", stderr.getvalue())
        self.assertEqual(hk.warnings, ["cost: 4.10 USD"])

    def test_directive_from_another_socket_is_refused(self):
        hk = self.connected_client()
        forger = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(forger.close)
        forger.bind(os.path.join(self.sup.dir, "forger.sock"))
        # The client is connected to the supervisor: the kernel refuses everyone else.
        with self.assertRaises(PermissionError):
            forger.sendto(b"STOP=1\nCHECK=manual\nREASON=forged", self.sup.peer)
        self.barrier(hk)
        self.assertFalse(hk.stop_requested)
        hk.checkpoint()

    def test_close_stops_receiver_promptly(self):
        hk = self.connected_client()
        receiver = hk._receiver_thread
        self.assertTrue(receiver.is_alive())
        start = time.monotonic()
        hk.close()
        self.assertLess(time.monotonic() - start, 1.0)
        self.assertFalse(receiver.is_alive())
        hk.close()  # idempotent
        self.assertFalse(hk.beat())
        self.assertFalse(hk.status("after close"))
        hk.checkpoint()
        self.sup.assert_silent(self, within=0.05)


class FastReconnectClient(hermeskill.Client):
    _reconnect_interval = 0.3


class SocketTroubleTest(SupervisedTestCase):
    def test_full_queue_drops_instead_of_blocking(self):
        hk = self.client()  # the supervisor never reads
        start = time.monotonic()
        results = [hk.beat() for _ in range(300)]
        self.assertLess(time.monotonic() - start, 2.0)
        delivered = len(self.sup.pending())
        self.assertGreater(hk.dropped, 0)
        self.assertEqual(results.count(True), delivered)
        self.assertEqual(hk.dropped + delivered, 300)
        self.assertTrue(hk.beat(), "queue drained, sending works again")

    def test_supervisor_absent_at_start(self):
        path = os.path.join(self.sup.dir, "absent.sock")
        hk = self.client(address=path)
        self.assertFalse(hk.beat())
        self.assertFalse(hk.ready())
        self.assertEqual(hk.dropped, 2)

    def test_reconnect_is_rate_limited(self):
        path = os.path.join(self.sup.dir, "later.sock")
        start = time.monotonic()
        hk = FastReconnectClient(path, dump_signal=None, environ={})  # connect fails: no socket
        self.addCleanup(hk.close)
        later = FakeSupervisor(self.sup.dir, "later.sock")
        self.addCleanup(later.close, remove_dir=False)
        delivered = hk.beat()
        if time.monotonic() - start < FastReconnectClient._reconnect_interval:
            # (skipped when a loaded machine has already taken longer than the interval)
            self.assertFalse(delivered, "must not reconnect before the interval")
        while not delivered:
            time.sleep(0.01)
            delivered = hk.beat()
        self.assertGreaterEqual(time.monotonic() - start, FastReconnectClient._reconnect_interval)
        self.assertEqual(later.pending(), ["WATCHDOG=1"])

    def test_supervisor_restart(self):
        hk = FastReconnectClient(self.sup.path, dump_signal=signal.SIGUSR2, environ={})
        self.addCleanup(hk.close)
        self.assertEqual(self.sup.recv(), "DUMP_SIGNAL=SIGUSR2")
        old_peer = self.sup.peer
        self.sup.close(remove_dir=False)  # the supervisor dies
        self.assertFalse(hk.beat())
        self.assertGreaterEqual(hk.dropped, 1)
        # While disconnected the kernel lets anyone send to the client: such datagrams are
        # discarded, never taken for directives.
        forger = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(forger.close)
        with contextlib.suppress(OSError):
            forger.sendto(b"STOP=1\nCHECK=manual\nREASON=forged", old_peer)
        self.sup = FakeSupervisor(self.sup.dir)  # restarted at the same path
        self.addCleanup(self.sup.close)
        wait_until(hk.beat, what="reconnection")
        # The new supervisor learns the dump signal from the first datagram it gets.
        self.assertEqual(self.sup.recv(), "WATCHDOG=1\nDUMP_SIGNAL=SIGUSR2")
        self.barrier(hk)
        self.assertFalse(hk.stop_requested)


class HeartbeatTest(SupervisedTestCase):
    def test_beats_at_interval_and_stops_on_close(self):
        # A heartbeat timeout of a minute: the client's creation vouches for the whole test.
        hk = self.client(heartbeat_interval=0.05, environ={"WATCHDOG_USEC": "60000000"})
        hk.start_heartbeat()
        thread = hk._heartbeat_thread
        hk.start_heartbeat()  # a second call does not start a second thread
        self.assertIs(hk._heartbeat_thread, thread)
        stamps = []
        for _ in range(8):
            self.assertEqual(self.sup.recv(), "WATCHDOG=1")
            stamps.append(time.monotonic())
        gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
        median = gaps[len(gaps) // 2]
        self.assertGreater(median, 0.025)
        self.assertLess(median, 0.15)
        start = time.monotonic()
        hk.close()
        self.assertLess(time.monotonic() - start, 1.0)
        self.assertFalse(thread.is_alive())
        self.sup.pending()
        self.sup.assert_silent(self, within=0.15)

    def test_interval_argument_and_watchdog_usec(self):
        hk = self.client(environ={"WATCHDOG_USEC": "3000000"})
        self.assertAlmostEqual(hk.heartbeat_interval, 1.0)
        hk.start_heartbeat(interval=0.02)  # overrides the 1s from WATCHDOG_USEC
        self.sup.recv()
        start = time.monotonic()
        for _ in range(5):
            self.assertEqual(self.sup.recv(), "WATCHDOG=1")
        self.assertLess(time.monotonic() - start, 0.9)


class ExtendTest(SupervisedTestCase):
    def test_declaring_a_wait_sends_extend_timeout_usec(self):
        hk = self.client()
        with hk.extend(90) as wait:
            self.assertEqual(self.sup.recv(), "EXTEND_TIMEOUT_USEC=90000000")
            self.assertIn("open", repr(wait))
        self.assertIn("ended", repr(wait))
        wait()  # ending again does nothing
        end = hk.extend(1e-9)
        self.assertEqual(self.sup.recv(), "EXTEND_TIMEOUT_USEC=1", "rounded up, never 0")
        end()
        end.end()
        hk.extend(1e300)()
        self.assertEqual(self.sup.recv(), "EXTEND_TIMEOUT_USEC=18446744073709551615", "at most USEC_INFINITY")
        self.sup.assert_silent(self)

    def test_heartbeat_rule(self):
        # One tick of the heartbeat thread, with a heartbeat timeout of 10s.
        hk = self.client(environ={"WATCHDOG_USEC": "10000000"})
        tick = lambda: hk._vouch(10.0)  # noqa: E731
        tick()
        self.assertEqual(self.sup.recv(), "WATCHDOG=1", "creating the client counts as activity")
        hk._active -= 10.0
        tick()
        self.sup.assert_silent(self)  # silent for a timeout: nothing
        for call in (hk.checkpoint, lambda: hk.usage(), hk.beat, lambda: hk.status("s")):
            hk._active -= 10.0
            call()
            self.sup.pending()
            tick()
            self.assertEqual(self.sup.recv(), "WATCHDOG=1", call)
        end = hk.extend(3600)
        self.sup.recv()
        hk._active -= 10.0  # silent inside a wait of an hour: an extension of the timeout
        tick()
        self.assertEqual(self.sup.recv(), "EXTEND_TIMEOUT_USEC=10000000")
        hk._waits[:] = [time.monotonic() + 2.0]  # two seconds left: no more than that
        tick()
        usec = int(self.sup.recv().split("=")[1])
        self.assertLessEqual(usec, 2000000)
        self.assertGreater(usec, 1500000)
        hk._waits[:] = [time.monotonic() - 0.001]  # over
        tick()
        self.sup.assert_silent(self)
        end()  # ending counts as activity
        tick()
        self.assertEqual(self.sup.recv(), "WATCHDOG=1")

    def test_overlapping_waits(self):
        hk = self.client(environ={"WATCHDOG_USEC": "1000000"})
        short, long_ = hk.extend(60), hk.extend(3600)
        self.sup.pending()
        hk._active -= 10.0
        long_()
        hk._active -= 10.0
        hk._vouch(1.0)
        self.assertEqual(self.sup.recv(), "EXTEND_TIMEOUT_USEC=1000000", "the short wait is still open")
        short()
        hk._active -= 10.0
        hk._vouch(1.0)
        self.sup.assert_silent(self)

    def test_systemd_gets_watchdog_during_a_wait(self):
        hk = self.client(address=None, environ={"NOTIFY_SOCKET": self.sup.path})
        hk.extend(3600)
        self.assertEqual(self.sup.recv(), "EXTEND_TIMEOUT_USEC=3600000000")
        hk._active -= 10.0
        hk._vouch(1.0)
        self.assertEqual(self.sup.recv(), "WATCHDOG=1", "systemd cannot extend a watchdog")


# Real agents: a Python process on the client, wedged or working after the documented
# hk.ready(); hk.start_heartbeat(), with a heartbeat timeout of 300 ms (a beat every 100 ms).
AGENT_TIMEOUT = 0.3
AGENT_INTERVAL = AGENT_TIMEOUT / 3

AGENTS = {
    "spin": """
hk.status("wedged")
while True:
    pass
""",
    "progress": """
end = time.monotonic() + 2.0
step = 0
while time.monotonic() < end:
    step += 1
    hk.checkpoint()
    hk.progress(step)
    time.sleep(0.02)  # the step's work
hk.status("done")
""",
    "extend": """
with hk.extend(1.0):
    while True:  # a call that never returns
        pass
""",
    "extend-end": """
with hk.extend(3600):
    time.sleep(0.2)  # the long call, over early
while True:
    pass
""",
}

# SO_TIMESTAMPNS: the kernel stamps each datagram as it is queued (35 on most Linux ports).
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


class StampedSupervisor(FakeSupervisor):
    """A fake supervisor that records when the kernel queued each datagram, so a busy test
    process reading late does not move them in time."""

    def __init__(self):
        super().__init__()
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.stamped = queue.Queue()  # type: queue.Queue
        self._stamper = threading.Thread(target=self._stamp_loop, daemon=True)
        self._stamper.start()

    def _stamp_loop(self):
        self.sock.settimeout(0.05)
        while not self._closed.is_set():
            try:
                data, anc, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(16))
            except socket.timeout:
                continue
            except OSError:
                return
            at = time.time()
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
                    sec, nsec = struct.unpack("qq", raw[:16])
                    at = sec + nsec / 1e9
            self.stamped.put((at, data.decode("utf-8")))

    def next(self, timeout=10.0):
        try:
            return self.stamped.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no datagram in %gs" % timeout) from None

    def declared(self, text):
        """Skip the heartbeat thread's first beats; return the datagram ``text``."""
        while True:
            at, got = self.next()
            if got == text:
                return at
            assert got == "WATCHDOG=1", got

    def until_quiet(self, quiet=4 * AGENT_TIMEOUT, limit=10.0):
        got, deadline = [], time.monotonic() + limit
        while True:
            try:
                got.append(self.stamped.get(timeout=quiet))
            except queue.Empty:
                return got
            if time.monotonic() > deadline:
                raise AssertionError("still talking after %gs: %r" % (limit, got[-3:]))

    def close(self, remove_dir=True):
        self._closed.set()
        self._stamper.join()
        super().close(remove_dir)


def vouched_until(stamped):
    """When a supervisor with the agents' timeout stops trusting the agent, given what it
    received: WATCHDOG=1 sets the deadline to its arrival + the timeout (ending any
    extension), EXTEND_TIMEOUT_USEC=N moves it to at least its arrival + N."""
    until = 0.0
    for at, text in stamped:
        for line in text.split("\n"):
            key, _, value = line.partition("=")
            if key in ("READY", "WATCHDOG"):
                until = at + AGENT_TIMEOUT
            elif key == "EXTEND_TIMEOUT_USEC":
                until = max(until, at + int(value) / 1e6)
    return until


class RealAgentTest(unittest.TestCase):
    """The documented pattern against real wedged and working agents, on a real socket."""

    def start(self, mode, address_var="HERMESKILL_SOCKET"):
        self.sup = StampedSupervisor()
        self.addCleanup(self.sup.close)
        env = {k: v for k, v in os.environ.items()
               if k not in ("HERMESKILL_SOCKET", "NOTIFY_SOCKET", "WATCHDOG_PID")}
        env.update(PYTHONPATH=HERE, WATCHDOG_USEC=str(int(AGENT_TIMEOUT * 1e6)))
        env[address_var] = self.sup.path
        src = "import time\nimport hermeskill\n\nhk = hermeskill.Client.from_env(dump_signal=None)\n"
        src += "hk.ready()\nhk.start_heartbeat()\n" + AGENTS[mode]
        proc = subprocess.Popen([sys.executable, "-c", src], env=env, stdin=subprocess.DEVNULL)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        at, text = self.sup.next()
        self.assertEqual(text, "READY=1")
        return proc, at

    def test_spinning_main_thread_is_not_vouched_for(self):
        proc, ready = self.start("spin")
        got = self.sup.until_quiet()
        texts = [t for _, t in got]
        wedged = [at for at, t in got if t == "STATUS=wedged"]  # its last call to the client
        beats = [at for at, t in got if t == "WATCHDOG=1"]
        self.assertEqual((len(wedged), len(beats) + 1), (1, len(got)), texts)
        self.assertGreaterEqual(len(beats), 1, "vouched for at first")
        self.assertLessEqual(len(beats), round(AGENT_TIMEOUT / AGENT_INTERVAL) + 2, texts)
        self.assertLess(beats[-1] - wedged[0], AGENT_TIMEOUT + AGENT_INTERVAL, "the last beat")
        self.assertLess(vouched_until([(ready, "READY=1")] + got) - wedged[0], 2 * AGENT_TIMEOUT + AGENT_INTERVAL)
        self.assertIsNone(proc.poll(), "still spinning: only a supervisor would end it")

    def test_working_main_thread_is_vouched_for(self):
        proc, ready = self.start("progress")
        proc.wait(timeout=20)
        got = self.sup.until_quiet(quiet=0.2)
        self.assertIn("STATUS=done", [t for _, t in got])
        beats = [at for at, t in got if t == "WATCHDOG=1"]
        self.assertGreaterEqual(len(beats), 2.0 / AGENT_INTERVAL / 2, "beats all along")
        self.assertGreater(beats[-1] - ready, 2.0 - 2 * AGENT_INTERVAL, "vouched for until the end")
        self.assertGreater(vouched_until(got) - ready, 2.0)

    def test_wait_is_vouched_for_the_declared_time_and_no_longer(self):
        proc, _ = self.start("extend")
        declared = self.sup.declared("EXTEND_TIMEOUT_USEC=1000000")
        got = self.sup.until_quiet()
        ticks = 0
        for _, text in got:
            if text == "WATCHDOG=1":
                self.assertEqual(ticks, 0, "WATCHDOG=1 only while the extend() call is recent")
                continue
            key, _, value = text.partition("=")
            self.assertEqual(key, "EXTEND_TIMEOUT_USEC", text)
            self.assertLessEqual(int(value), AGENT_TIMEOUT * 1e6, "never more than the timeout at a time")
            ticks += 1
        self.assertGreaterEqual(ticks, 2, got)
        last = got[-1][0] - declared
        self.assertGreater(last, 1.0 - 2 * AGENT_INTERVAL, "until the declared time")
        self.assertLess(last, 1.0, "and no longer")
        until = vouched_until([(declared, "EXTEND_TIMEOUT_USEC=1000000")] + got) - declared
        self.assertAlmostEqual(until, 1.0, delta=AGENT_INTERVAL)
        self.assertIsNone(proc.poll())

    def test_wait_under_systemd_is_vouched_for_with_watchdog(self):
        self.start("extend", address_var="NOTIFY_SOCKET")
        declared = self.sup.declared("EXTEND_TIMEOUT_USEC=1000000")
        got = self.sup.until_quiet()
        self.assertEqual({t for _, t in got}, {"WATCHDOG=1"})
        last = got[-1][0] - declared
        self.assertGreater(last, 1.0 - 2 * AGENT_INTERVAL, "until the declared time")
        self.assertLess(last, 1.0, "and no longer")

    def test_a_wait_ended_early_is_no_cover(self):
        self.start("extend-end")
        declared = self.sup.declared("EXTEND_TIMEOUT_USEC=3600000000")
        got = self.sup.until_quiet()
        self.assertEqual({t for _, t in got}, {"WATCHDOG=1"}, "the call was shorter than the timeout")
        last = got[-1][0] - declared
        self.assertGreater(last, 0.2, "the end of the wait counts as activity")
        self.assertLess(last, 0.2 + AGENT_TIMEOUT + AGENT_INTERVAL)
        self.assertLess(vouched_until([(declared, "EXTEND_TIMEOUT_USEC=3600000000")] + got) - declared,
                        0.2 + 2 * AGENT_TIMEOUT + AGENT_INTERVAL)


CHILD = textwrap.dedent(
    """
    import hermeskill

    hk = hermeskill.Client.from_env()
    hk.ready()
    hk.start_heartbeat()

    def wedged_here():
        hk.status("wedged")
        while True:
            pass

    wedged_here()
    """
)


class LastWordsTest(SupervisedTestCase):
    def test_dump_signal_prints_tracebacks_of_a_wedged_agent(self):
        env = dict(os.environ, PYTHONPATH=HERE, HERMESKILL_SOCKET=self.sup.path, WATCHDOG_USEC="300000")
        env.pop("NOTIFY_SOCKET", None)
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        self.addCleanup(proc.stderr.close)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        got = self.sup.recv_until(lambda d: d == "STATUS=wedged")
        self.assertEqual(got[0], "DUMP_SIGNAL=SIGUSR2")
        self.assertIn("READY=1\nDUMP_SIGNAL=SIGUSR2", got)
        # Dump once every thread runs: faulthandler reads thread state without the GIL and
        # can crash on a thread being created (CPython issue 116008).
        if "WATCHDOG=1" not in got:
            self.sup.recv_until(lambda d: d == "WATCHDOG=1")
        proc.send_signal(signal.SIGUSR2)
        stderr = read_until(proc.stderr, b"wedged_here", timeout=5)
        self.assertIn(b"wedged_here", stderr)
        self.assertGreaterEqual(stderr.count(b"hread 0x"), 3, stderr)  # main, heartbeat, receiver
        self.assertIsNone(proc.poll(), "the dump must not kill the agent")
        # The heartbeat thread does not vouch for a wedged main thread: it falls silent.
        quiet_for(self, self.sup, 1.0, limit=5.0)
        self.assertIsNone(proc.poll())


BLOCKED_CHILD = textwrap.dedent(
    """
    import signal, threading, time
    import hermeskill

    def blocks_dump_signal(thread):
        with open("/proc/self/task/%d/status" % thread.native_id) as f:
            mask = next(int(l.split()[1], 16) for l in f if l.startswith("SigBlk:"))
        return bool(mask >> (signal.SIGUSR2 - 1) & 1)

    hk = hermeskill.Client.from_env()
    hk.start_heartbeat(0.05)
    names = ("hermeskill-heartbeat", "hermeskill-directives")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # each thread blocks it first thing it runs
        ours = [t for t in threading.enumerate() if t.name in names]
        if len(ours) == 2 and all(blocks_dump_signal(t) for t in ours):
            break
        time.sleep(0.01)
    for t in sorted(threading.enumerate(), key=lambda t: t.name):
        print(t.name, blocks_dump_signal(t))
    """
)


class DumpSignalThreadTest(SupervisedTestCase):
    @unittest.skipUnless(sys.platform.startswith("linux"), "reads /proc/self/task")
    def test_the_clients_threads_leave_the_dump_signal_to_the_application(self):
        # A dump taken by the heartbeat thread while the main thread runs can crash the
        # agent (faulthandler reads the main thread's frames without the GIL); blocked in the
        # client's threads, the signal goes to the application's.
        env = dict(os.environ, PYTHONPATH=HERE, HERMESKILL_SOCKET=self.sup.path)
        env.pop("NOTIFY_SOCKET", None)
        out = subprocess.run(
            [sys.executable, "-c", BLOCKED_CHILD], env=env, stdin=subprocess.DEVNULL,
            capture_output=True, timeout=30, check=True,
        ).stdout.decode()
        self.assertEqual(
            out.split("\n"),
            ["MainThread False", "hermeskill-directives True", "hermeskill-heartbeat True", ""],
            out,
        )


def quiet_for(testcase, sup, quiet, limit):
    """Receive until ``sup`` got nothing for ``quiet`` seconds; fail if it takes ``limit``."""
    deadline = time.monotonic() + limit
    while True:
        try:
            sup.recv(timeout=quiet)
        except socket.timeout:
            return
        if time.monotonic() > deadline:
            testcase.fail("still talking after %gs: %r" % (limit, sup.log[-3:]))


def read_until(stream, needle, timeout):
    """Read ``stream`` until ``needle`` appears or ``timeout`` passes; return what was read."""
    out = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        while needle not in out:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                break
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                break
            out += chunk
    return out


if __name__ == "__main__":
    unittest.main()
