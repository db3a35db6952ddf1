package main

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
)

// chooseContainment resolves --containment: auto uses a cgroup when a
// writable cgroup v2 hierarchy exists and falls back to process groups
// otherwise; cgroup insists; pgroup never tries. It logs once which
// containment is in use, and removes cgroups a crashed hermeskilld left.
func chooseContainment(mode string, log *zap.Logger) (*cgroup.Manager, error) {
	switch mode {
	case "pgroup":
		log.Debug("containment: process group (--containment pgroup)")
		return nil, nil
	case "auto", "cgroup", "":
	default:
		return nil, fmt.Errorf("--containment must be auto, cgroup or pgroup, not %q", mode)
	}
	m, err := cgroup.Detect(cgroup.Options{})
	if err != nil {
		if mode == "cgroup" || !errors.Is(err, cgroup.ErrUnavailable) {
			if mode == "cgroup" {
				return nil, fmt.Errorf("--containment cgroup: %w", err)
			}
			log.Warn("cgroup containment failed; using process groups", zap.Error(err))
			return nil, nil
		}
		log.Info("containment: process group + subreaper + /proc scan (no writable cgroup v2)", zap.Error(err))
		return nil, nil
	}
	log.Debug("containment: " + m.Describe())
	for _, w := range m.Warnings() {
		log.Warn("cgroup setup", zap.Error(w))
	}
	if removed, err := m.CleanupStale(); err != nil {
		log.Warn("stale cgroups not all removed", zap.Error(err))
	} else if len(removed) > 0 {
		log.Warn("removed cgroups left by a hermeskilld that died", zap.Strings("cgroups", removed))
	}
	return m, nil
}
