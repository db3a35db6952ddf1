# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0

"""Tests of the installable package: pip builds and installs it with no package index (the
build backend is the standard library alone, so nothing is fetched, with or without build
isolation), into a venv, into --target, editable and from the sdist; what it installs is the
client with its type hints; the wheel and the sdist are the same bytes when built again.

Each test builds from a copy of this directory, so the tree stays clean. Skipped where the
interpreter has no pip; the venv tests where it has no venv with pip (ensurepip).

Run from the repository root: python3 -m unittest discover -s clients/python -v
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import unittest
import zipfile

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
    if importlib.util.find_spec("pip") is None:
        raise unittest.SkipTest("no pip")


def environ():
    env = {k: v for k, v in os.environ.items()
           if k not in ("HERMESKILL_SOCKET", "NOTIFY_SOCKET", "PYTHONPATH") and not k.startswith("PIP_")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")  # offline
    return env


def run(args, **kw):
    proc = subprocess.run(args, env=kw.pop("env", environ()), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=TIMEOUT, **kw)
    if proc.returncode != 0:
        raise AssertionError("%s: exit %d\n%s" % (" ".join(args), proc.returncode,
                                                  proc.stdout.decode(errors="replace")[-3000:]))
    return proc.stdout.decode()


# Calls one hook of the backend in the source tree argv[1], with the output directory argv[3].
HOOK = "import sys; sys.path.insert(0, sys.argv[1] + '/_build'); import hermeskill_build as b; " \
       "print(getattr(b, sys.argv[2])(sys.argv[3]))"


class PackageTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="hk-pkg")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.src = self.copy("src")

    def copy(self, name):
        dst = os.path.join(self.tmp, name)
        shutil.copytree(HERE, dst, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "build", "dist", "*.egg-info"))
        return dst

    def pip(self, *args, python=sys.executable):
        # --no-index on the command line as well as in the environment: nothing may be fetched.
        index = ["--no-index"] if args[0] in ("install", "wheel") else []
        return run([python, "-m", "pip", "--no-cache-dir", args[0]] + index + list(args[1:]))

    def check_surface(self, python, env, where):
        out = run([python, "-c", SDK_SURFACE + "import importlib.metadata as m; print(m.version('hermeskill'))"],
                  cwd=self.tmp, env=env)
        path, version = out.strip().splitlines()[-2:]
        self.assertEqual(path, where)
        self.assertEqual(version, hermeskill.__version__)

    def venv(self):
        venv = os.path.join(self.tmp, "venv")
        try:
            run([sys.executable, "-m", "venv", venv])
        except AssertionError as e:
            self.skipTest("no venv with pip here (ensurepip): %s" % str(e).splitlines()[0])
        return os.path.join(venv, "bin", "python")

    def test_pip_install_into_a_venv(self):
        python = self.venv()
        self.pip("install", self.src, python=python)
        site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
        pkg = os.path.join(site, "hermeskill")
        self.assertTrue(os.path.isfile(os.path.join(pkg, "py.typed")))
        self.check_surface(python, environ(), os.path.join(pkg, "__init__.py"))
        self.pip("uninstall", "--yes", "hermeskill", python=python)
        self.assertFalse(os.path.exists(pkg), "uninstall removes what install put there")

    def test_pip_install_offers_the_sdk_surface(self):
        target = os.path.join(self.tmp, "site")
        self.pip("install", "--target", target, self.src)
        self.assertTrue(os.path.isfile(os.path.join(target, "hermeskill", "py.typed")))
        with open(os.path.join(target, "hermeskill", "__init__.py"), "rb") as f, \
                open(os.path.join(HERE, "hermeskill.py"), "rb") as g:
            self.assertEqual(f.read(), g.read(), "the module is hermeskill.py itself")
        self.check_surface(sys.executable, dict(environ(), PYTHONPATH=target),
                           os.path.join(target, "hermeskill", "__init__.py"))

    def test_pip_install_without_build_isolation(self):
        target = os.path.join(self.tmp, "site")
        self.pip("install", "--no-build-isolation", "--target", target, self.src)
        self.assertTrue(os.path.isfile(os.path.join(target, "hermeskill", "__init__.py")))

    def test_pip_install_editable(self):
        python = self.venv()
        self.pip("install", "--editable", self.src, python=python)
        self.check_surface(python, environ(), os.path.join(self.src, "src", "hermeskill", "__init__.py"))

    def test_pip_wheel(self):
        out = os.path.join(self.tmp, "wheels")
        self.pip("wheel", "--no-deps", "--wheel-dir", out, self.src)
        self.check_wheel(out)

    def test_sdist_builds_and_installs(self):
        out = os.path.join(self.tmp, "sdist")
        os.mkdir(out)
        name = self.hook(self.src, "build_sdist", out)
        dist = "hermeskill-%s" % hermeskill.__version__
        self.assertEqual(name, dist + ".tar.gz")
        with tarfile.open(os.path.join(out, name)) as tar:
            members = tar.getmembers()
            self.assertEqual(sorted(m.name for m in members if m.isfile()), sorted(
                dist + "/" + n for n in ["PKG-INFO", "README.md", "_build/hermeskill_build.py", "hermeskill.py",
                                         "pyproject.toml", "src/hermeskill/__init__.py", "src/hermeskill/py.typed"]))
            self.assertTrue(all(m.isfile() or m.isdir() for m in members), "no links in the sdist")
            self.assertTrue(all(m.uid == 0 and m.uname == "" for m in members))
        target = os.path.join(self.tmp, "site")
        self.pip("install", "--target", target, os.path.join(out, name))
        self.check_surface(sys.executable, dict(environ(), PYTHONPATH=target),
                           os.path.join(target, "hermeskill", "__init__.py"))

    def test_builds_are_reproducible(self):
        # Two copies whose files have other times, built at other moments: the same bytes.
        other = self.copy("other")
        for root, _, files in os.walk(other):
            for f in files:
                os.utime(os.path.join(root, f), (1e9, 1e9), follow_symlinks=False)
        for hook in ("build_wheel", "build_sdist"):
            blobs = []
            for src in (self.src, other):
                out = tempfile.mkdtemp(dir=self.tmp)
                name = self.hook(src, hook, out)
                with open(os.path.join(out, name), "rb") as f:
                    blobs.append(f.read())
            self.assertEqual(blobs[0], blobs[1], hook)
        # SOURCE_DATE_EPOCH sets every timestamp.
        out = tempfile.mkdtemp(dir=self.tmp)
        name = self.hook(self.src, "build_wheel", out, SOURCE_DATE_EPOCH="1700000000")
        with zipfile.ZipFile(os.path.join(out, name)) as whl:
            self.assertEqual({i.date_time for i in whl.infolist()}, {(2023, 11, 14, 22, 13, 20)})

    def test_metadata_is_pyprojects(self):
        try:
            import tomllib
        except ImportError:
            self.skipTest("no tomllib (Python < 3.11)")
        with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
            pyproject = tomllib.load(f)
        self.assertEqual(pyproject["build-system"]["requires"], [], "nothing to fetch")
        project = pyproject["project"]
        out = os.path.join(self.tmp, "wheels")
        os.mkdir(out)
        self.hook(self.src, "build_wheel", out)
        fields = self.check_wheel(out)
        self.assertEqual(fields["Name"], [project["name"]])
        self.assertEqual(fields["Summary"], [project["description"]])
        self.assertEqual(fields["Requires-Python"], [project["requires-python"]])
        self.assertEqual(fields["License"], [project["license"]["text"]])
        self.assertEqual(fields["Classifier"], project["classifiers"])
        self.assertEqual(fields["Home-page"], [project["urls"]["Homepage"]])
        self.assertNotIn("dependencies", project)

    def hook(self, src, name, out, **env):
        return run([sys.executable, "-c", HOOK, src, name, out], cwd=self.tmp,
                   env=dict(environ(), **env)).strip().splitlines()[-1]

    def check_wheel(self, directory):
        name = "hermeskill-%s-py3-none-any.whl" % hermeskill.__version__
        self.assertEqual(os.listdir(directory), [name])
        dist = "hermeskill-%s.dist-info/" % hermeskill.__version__
        with zipfile.ZipFile(os.path.join(directory, name)) as whl:
            names = whl.namelist()
            self.assertEqual(names, ["hermeskill/__init__.py", "hermeskill/py.typed", dist + "METADATA",
                                     dist + "WHEEL", dist + "RECORD"])
            with open(os.path.join(HERE, "hermeskill.py"), "rb") as f:
                self.assertEqual(whl.read("hermeskill/__init__.py"), f.read())
            metadata = whl.read(dist + "METADATA").decode()
            record = whl.read(dist + "RECORD").decode()
        self.assertIn("\nName: hermeskill\n", metadata)
        self.assertIn("\nVersion: %s\n" % hermeskill.__version__, metadata)
        self.assertIn("\nRequires-Python: >=3.8\n", metadata)
        self.assertNotIn("Requires-Dist", metadata, "the standard library only")
        for n in names:
            self.assertIn(n + ",", record)
        head, _, body = metadata.partition("\n\n")
        self.assertTrue(body.startswith("# hermeskill"), "the README is the description")
        fields = {}
        for line in head.splitlines():
            k, _, v = line.partition(": ")
            fields.setdefault(k, []).append(v)
        return fields


if __name__ == "__main__":
    unittest.main()
