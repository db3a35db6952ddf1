# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0

"""The build backend of the hermeskill distribution (PEP 517, with PEP 660's editable hook),
on the standard library alone.

pyproject.toml declares ``requires = []``, so a frontend has nothing to fetch: ``pip install
./clients/python`` works without the package index, with or without build isolation, on any
Python >= 3.8 pip runs on. setuptools is not used (it would have to be fetched into pip's
isolated build environment, and older ones also need the ``wheel`` package).

The distribution is one module: the package ``hermeskill`` whose ``__init__.py`` is
hermeskill.py (src/hermeskill/__init__.py links to it), and its ``py.typed``.

- build_wheel: hermeskill-VERSION-py3-none-any.whl, those two files and the .dist-info
  (METADATA, WHEEL, RECORD). The licence is named in METADATA and in every file's header.
- build_sdist: hermeskill-VERSION.tar.gz, what building the wheel again needs, PKG-INFO first.
- build_editable: a wheel holding a .pth file that puts src/ on sys.path.

Both archives are reproducible: members in a fixed order, every timestamp SOURCE_DATE_EPOCH
when it is set (else 1980-01-01, the earliest a zip can say), fixed modes, no owner names, and
a gzip header without time or file name. The same tree gives the same bytes.

The version is hermeskill.py's ``__version__``, read as text (never imported). The metadata
is below, not read from pyproject.toml: Python before 3.11 has no TOML parser, and this
backend runs on the interpreter that installs. test_package.py keeps the two in step.
"""

import base64
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

NAME = "hermeskill"
SUMMARY = "Python client of hermeskilld, the out-of-process kill switch for AI agents"
REQUIRES_PYTHON = ">=3.8"
LICENSE = "Apache-2.0"
HOMEPAGE = "https://github.com/hermeskill/hermeskilld"
CLASSIFIERS = (
    "License :: OSI Approved :: Apache Software License",
    "Operating System :: POSIX :: Linux",
    "Programming Language :: Python :: 3",
    "Typing :: Typed",
)

# The source tree: this file is _build/hermeskill_build.py in it.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What the wheel installs: (path in the wheel, path in the tree).
WHEEL_FILES = (
    ("hermeskill/__init__.py", "hermeskill.py"),
    ("hermeskill/py.typed", "src/hermeskill/py.typed"),
)
# What the sdist holds besides PKG-INFO, all regular files (src/hermeskill/__init__.py is
# the link, resolved).
SDIST_FILES = (
    "README.md",
    "_build/hermeskill_build.py",
    "hermeskill.py",
    "pyproject.toml",
    "src/hermeskill/__init__.py",
    "src/hermeskill/py.typed",
)
ZIP_EPOCH = 315532800  # 1980-01-01T00:00:00Z


def _epoch():
    value = os.environ.get("SOURCE_DATE_EPOCH", "")
    try:
        return max(int(value), ZIP_EPOCH)
    except ValueError:
        return ZIP_EPOCH


def _read(rel):
    with open(os.path.join(ROOT, rel), "rb") as f:
        return f.read()


def version():
    """hermeskill.py's __version__, read as text."""
    m = re.search(rb'^__version__ = "([^"]+)"$', _read("hermeskill.py"), re.M)
    if m is None:
        raise RuntimeError("hermeskill_build: no __version__ in hermeskill.py")
    return m.group(1).decode("ascii")


def _dist():
    return "%s-%s" % (NAME, version())


def metadata():
    """The core metadata (METADATA in the wheel, PKG-INFO in the sdist), as bytes."""
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + NAME,
        "Version: " + version(),
        "Summary: " + SUMMARY,
        "Home-page: " + HOMEPAGE,
        "License: " + LICENSE,
        "Requires-Python: " + REQUIRES_PYTHON,
    ]
    lines += ["Classifier: " + c for c in CLASSIFIERS]
    lines.append("Description-Content-Type: text/markdown")
    return ("\n".join(lines) + "\n\n").encode("utf-8") + _read("README.md")


WHEEL = b"Wheel-Version: 1.0\nGenerator: hermeskill_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _dist_info_files():
    info = _dist() + ".dist-info/"
    return [(info + "METADATA", metadata()), (info + "WHEEL", WHEEL)]


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _write_wheel(directory, files):
    """Write the wheel of files, a list of (arcname, bytes), in that order, RECORD last."""
    name = "%s-py3-none-any.whl" % _dist()
    record = _dist() + ".dist-info/RECORD"
    lines = [_record_line(a, d) for a, d in files] + [record + ",,"]
    files = list(files) + [(record, ("\n".join(lines) + "\n").encode("utf-8"))]
    date_time = time.gmtime(_epoch())[:6]
    path = os.path.join(directory, name)
    with zipfile.ZipFile(path + ".part", "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in files:
            info = zipfile.ZipInfo(arcname, date_time)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100644 << 16)
            info.create_system = 3  # Unix, so that the mode above is read
            zf.writestr(info, data)
    os.replace(path + ".part", path)
    return name


# PEP 517 hooks.

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = _dist() + ".dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for arcname, data in _dist_info_files():
        with open(os.path.join(metadata_directory, arcname), "wb") as f:
            f.write(data)
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = [(arcname, _read(rel)) for arcname, rel in WHEEL_FILES]
    return _write_wheel(wheel_directory, files + _dist_info_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth line naming a directory puts it on sys.path: src/ holds the package, whose
    # __init__.py is the link to hermeskill.py, so edits take effect at once.
    pth = (os.path.join(ROOT, "src") + "\n").encode("utf-8")
    return _write_wheel(wheel_directory, [("__editable__.%s.pth" % NAME, pth)] + _dist_info_files())


def build_sdist(sdist_directory, config_settings=None):
    dist = _dist()
    mtime = _epoch()
    members = sorted([("PKG-INFO", metadata())] + [(rel, _read(rel)) for rel in SDIST_FILES])
    name = dist + ".tar.gz"
    path = os.path.join(sdist_directory, name)
    with open(path + ".part", "wb") as raw:
        # filename="" and mtime: no file name and a fixed time in the gzip header.
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime, compresslevel=9) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                tar.addfile(_tarinfo(dist, tarfile.DIRTYPE, 0o755, mtime))
                dirs = set()
                for rel, data in members:
                    parts = rel.split("/")[:-1]
                    for i in range(len(parts)):
                        d = "/".join(parts[: i + 1])
                        if d not in dirs:
                            dirs.add(d)
                            tar.addfile(_tarinfo(dist + "/" + d, tarfile.DIRTYPE, 0o755, mtime))
                    info = _tarinfo(dist + "/" + rel, tarfile.REGTYPE, 0o644, mtime)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    os.replace(path + ".part", path)
    return name


def _tarinfo(name, kind, mode, mtime):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
