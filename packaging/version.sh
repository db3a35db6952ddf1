#!/bin/sh
# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0
# Prints the Debian upstream version of this checkout, from git:
#   at tag v1.2.0                   1.2.0
#   commits after tag v1.2.0        1.2.0+git20261202.1a2b3c4
#   before the first tag            0.0~git20261202.1a2b3c4
#   at tag v1.3.0-rc1               1.3.0~rc1
# "~" sorts before anything and "+" after (deb-version(7)): a snapshot is
# newer than the tag before it and older than the next release. The date is
# the commit's, in UTC. An uncommitted change is not marked here; the
# binary's own version (git describe --dirty) says so.
set -eu
cd "$(dirname "$0")/.."
if ! head=$(git rev-parse HEAD 2>/dev/null); then
	echo "0.0~unknown"
	exit 0
fi
rev=$(git rev-parse --short=7 HEAD)
date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d)
if tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null); then
	base=$(printf '%s' "${tag#v}" | tr - '~')
	if [ "$(git rev-list -n 1 "$tag")" = "$head" ]; then
		echo "$base"
	else
		echo "$base+git$date.$rev"
	fi
else
	echo "0.0~git$date.$rev"
fi
