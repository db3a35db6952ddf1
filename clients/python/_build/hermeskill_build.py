# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0

"""The build backend of the hermeskill distribution: setuptools', whole, where it can build
wheels; where it cannot, the same with a wheel build of its own.

setuptools before 70.1 builds wheels with the separate ``wheel`` package. An interpreter
without it cannot fetch it when installing with ``--no-build-isolation`` and no network, and
setuptools' wheel build then fails with "invalid command 'bdist_wheel'". There, build_wheel
runs setuptools' own egg_info and build_py commands, which need nothing more, and zips what
they made as a pure-Python wheel: the files build_py copied, plus METADATA (egg_info's
PKG-INFO), WHEEL and RECORD in the .dist-info directory.
"""

import base64
import glob
import hashlib
import os
import tempfile
import zipfile
from email.parser import Parser

import setuptools
from setuptools.build_meta import *  # noqa: F401,F403 (sdist, editable installs, metadata)


def _can_build_wheels():
    try:
        import setuptools.command.bdist_wheel  # noqa: F401 (setuptools >= 70.1)
    except ImportError:
        try:
            import wheel.bdist_wheel  # noqa: F401
        except ImportError:
            return False
    return True


def _check_setuptools():
    major = int(setuptools.__version__.split(".")[0])
    if major < 61:  # before 61 it ignores the [project] table of pyproject.toml
        raise RuntimeError(
            "hermeskill: building needs setuptools >= 61, not %s" % setuptools.__version__
        )


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _build_wheel_without_wheel(wheel_directory):
    _check_setuptools()
    with tempfile.TemporaryDirectory() as tmp:
        lib = os.path.join(tmp, "lib")
        setuptools.setup(
            script_name="setup.py",
            script_args=["--quiet", "egg_info", "--egg-base", tmp, "build_py", "--build-lib", lib],
        )
        (info,) = glob.glob(os.path.join(tmp, "*.egg-info"))
        with open(os.path.join(info, "PKG-INFO"), "rb") as f:
            metadata = f.read()
        fields = Parser().parsestr(metadata.decode("utf-8"), headersonly=True)
        dist = "%s-%s" % (fields["Name"].replace("-", "_"), fields["Version"])
        name = dist + "-py3-none-any.whl"
        records = []
        with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as zf:

            def add(arcname, data):
                zf.writestr(arcname, data)
                records.append(_record_line(arcname, data))

            for root, dirs, files in os.walk(lib):
                dirs.sort()
                for file in sorted(files):
                    path = os.path.join(root, file)
                    with open(path, "rb") as f:
                        add(os.path.relpath(path, lib).replace(os.sep, "/"), f.read())
            add(dist + ".dist-info/METADATA", metadata)
            add(
                dist + ".dist-info/WHEEL",
                b"Wheel-Version: 1.0\nGenerator: hermeskill_build\n"
                b"Root-Is-Purelib: true\nTag: py3-none-any\n",
            )
            record = dist + ".dist-info/RECORD"
            zf.writestr(record, "\n".join(records + [record + ",,"]) + "\n")
        return name


if not _can_build_wheels():
    del prepare_metadata_for_build_wheel  # noqa: F821 (then the frontend reads the wheel's)

    def get_requires_for_build_wheel(config_settings=None):
        return []

    def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
        return _build_wheel_without_wheel(wheel_directory)
