// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"io/fs"
	"os"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
)

// kubeTerminationLog is where Kubernetes reads a container's termination
// message unless its terminationMessagePath says otherwise; the kubelet
// creates the file, so its presence says we run in a pod.
const kubeTerminationLog = "/dev/termination-log"

// terminationLog is where supervise writes the digest of its run's
// certificate: --termination-log, else Kubernetes' file when it exists,
// else nowhere (""). create says whether the file may be made: only a
// path given on purpose is.
func terminationLog(flag string) (path string, create bool) {
	if flag != "" {
		return flag, true
	}
	if fi, err := os.Stat(kubeTerminationLog); err == nil && fi.Mode().IsRegular() {
		return kubeTerminationLog, false
	}
	return "", false
}

// writeTerminationLog writes the digest of the run's certificate (a kill
// or an external death; a plain exit has none and leaves the file as it
// is) to path. A failure is logged, never fatal: the certificate and the
// exit status already say what happened.
func writeTerminationLog(path string, create bool, out supervisor.Outcome, log *zap.Logger) {
	if path == "" || out.Cert == nil {
		return
	}
	flags := os.O_WRONLY | os.O_TRUNC
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err == nil {
		_, err = f.Write(certs.Digest(out.Cert, out.CertPath))
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		lvl := zap.WarnLevel
		if errors.Is(err, fs.ErrNotExist) && !create {
			lvl = zap.DebugLevel // gone since we looked: not a pod's after all
		}
		log.Check(lvl, "termination message not written").Write(zap.String("path", path), zap.Error(err))
	}
}
