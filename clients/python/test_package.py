# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0

"""Tests of the installable package: pip builds and installs it offline, without build
isolation, and what it installs is the client with its type hints.

Each test builds from a copy of this directory, so the tree stays clean. Skipped where the
interpreter has no pip or a setuptools older than 61 (which ignores pyproject.toml's
[project] table).

Run from the repository root: python3 -m unittest discover -s clients/python -v
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
import zipfile
from importlib import metadata as importlib_metadata

import hermeskill
from test_hermeskill import HERE

TIMEOUT = 300  # only reached on failure

# What an agent written against the hermeskill SDK 0.1.0a1 expects of the module.
SDK_SURFACE = textwrap.dedent(
    """
    import hermeskill
    assert hermeskill.__version__
    hermeskill.checkpoint()
    e = hermeskill.HermeskillTerminated("budget exceeded", kill_event_id="k-1")
    assert e.kill_event_id == "k-1"
    assert issubclass(hermeskill.HermeskillTerminated, BaseException)
    assert hasattr(hermeskill, "HermeskillError")
    print(hermeskill.__file__)
    """
)


def setUpModule():
    # Looked up, not imported: importing setuptools here would patch distutils for the
    # whole test process.
    if importlib.util.find_spec("pip") is None:
        raise unittest.SkipTest("no pip")
    try:
        version = importlib_metadata.version("setuptools")
    except importlib_metadata.PackageNotFoundError:
        raise unittest.SkipTest("no setuptools") from None
    if int(version.split(".")[0]) < 61:
        raise unittest.SkipTest("setuptools %s is older than 61" % version)


def environ():
    env = {k: v for k, v in os.environ.items()
           if k not in ("HERMESKILL_SOCKET", "NOTIFY_SOCKET", "PYTHONPATH") and not k.startswith("PIP_")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")  # offline
    return env


class PackageTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="hk-pkg")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.src = os.path.join(self.tmp, "src")
        shutil.copytree(HERE, self.src, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "build", "dist", "*.egg-info"))

    def pip(self, *args):
        proc = subprocess.run([sys.executable, "-m", "pip", "--no-cache-dir"] + list(args), env=environ(),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stdout.decode(errors="replace")[-3000:])

    def test_pip_install_offers_the_sdk_surface(self):
        target = os.path.join(self.tmp, "site")
        self.pip("install", "--no-build-isolation", "--no-deps", "--target", target, self.src)
        self.assertTrue(os.path.isfile(os.path.join(target, "hermeskill", "py.typed")))
        with open(os.path.join(target, "hermeskill", "__init__.py"), "rb") as f, \
                open(os.path.join(HERE, "hermeskill.py"), "rb") as g:
            self.assertEqual(f.read(), g.read(), "the module is hermeskill.py itself")
        env = dict(environ(), PYTHONPATH=target)
        out = subprocess.run([sys.executable, "-c", SDK_SURFACE], cwd=self.tmp, env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, check=True, timeout=TIMEOUT)
        self.assertEqual(out.stdout.decode().strip(), os.path.join(target, "hermeskill", "__init__.py"))

    def test_pip_wheel(self):
        out = os.path.join(self.tmp, "wheels")
        self.pip("wheel", "--no-build-isolation", "--no-deps", "--wheel-dir", out, self.src)
        self.check_wheel(out)

    def test_wheel_build_without_the_wheel_package(self):
        # The backend's own wheel build, used where setuptools needs the missing `wheel`.
        out = os.path.join(self.tmp, "wheels")
        os.mkdir(out)
        build = "import sys; import hermeskill_build as b; print(b._build_wheel_without_wheel(sys.argv[1]))"
        env = dict(environ(), PYTHONPATH=os.path.join(self.src, "_build"))
        proc = subprocess.run([sys.executable, "-c", build, out], cwd=self.src, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stdout.decode(errors="replace")[-3000:])
        self.check_wheel(out)

    def check_wheel(self, directory):
        name = "hermeskill-%s-py3-none-any.whl" % hermeskill.__version__
        self.assertEqual(os.listdir(directory), [name])
        with zipfile.ZipFile(os.path.join(directory, name)) as whl:
            names = whl.namelist()
            self.assertIn("hermeskill/__init__.py", names)
            self.assertIn("hermeskill/py.typed", names)
            dist = "hermeskill-%s.dist-info/" % hermeskill.__version__
            metadata = whl.read(dist + "METADATA").decode()
            record = whl.read(dist + "RECORD").decode()
        self.assertIn("\nName: hermeskill\n", metadata)
        self.assertIn("\nVersion: %s\n" % hermeskill.__version__, metadata)
        self.assertIn("\nRequires-Python: >=3.8\n", metadata)
        self.assertNotIn("Requires-Dist", metadata, "the standard library only")
        for n in names:
            self.assertIn(n + ",", record)


if __name__ == "__main__":
    unittest.main()
