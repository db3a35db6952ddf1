package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// CheckAgentsDir says what the daemon does with cfg's agents_dir when it
// starts; `check-config` reports the same. It returns:
//
//   - false, nil: agents_dir is a directory; it is used as it is.
//   - true, nil: agents_dir does not exist and is the default
//     (/etc/hermeskill/agents.d, which `make install` creates): the daemon
//     creates it, empty, and logs that it did.
//   - an error wrapping ErrNoAgentsDir: any other agents_dir that does not
//     exist. The daemon refuses to start.
//   - an error wrapping syscall.ENOTDIR: agents_dir is not a directory.
//   - an error wrapping the stat(2) error otherwise (EACCES, ELOOP, …).
//
// Every error names the daemon file and the path.
func CheckAgentsDir(cfg *config.Daemon) (create bool, err error) {
	return checkAgentsDir(cfg.AgentsDir, config.DefaultDaemon().AgentsDir, cfg.Source)
}

// checkAgentsDir is CheckAgentsDir for path, dflt being the default
// agents_dir and source the daemon file.
func checkAgentsDir(path, dflt, source string) (bool, error) {
	prefix := "" // errors name the daemon file first, as config errors do
	if source != "" {
		prefix = source + ": "
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && path == dflt:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("%s%w: %s (create it, or correct agents_dir)", prefix, ErrNoAgentsDir, path)
	case err != nil:
		return false, fmt.Errorf("%sagents_dir: %w", prefix, err)
	case !fi.IsDir():
		return false, fmt.Errorf("%sagents_dir %s: %w", prefix, path, syscall.ENOTDIR)
	}
	return false, nil
}

// prepareAgentsDir applies CheckAgentsDir: it refuses a missing
// agents_dir, or creates the default one and says so.
func (d *Daemon) prepareAgentsDir() error {
	create, err := CheckAgentsDir(d.cfg)
	if err != nil || !create {
		return err
	}
	if err := os.MkdirAll(d.cfg.AgentsDir, 0o755); err != nil {
		return fmt.Errorf("agents_dir: %w", err)
	}
	d.log.Warn("agents_dir did not exist: created it, empty (the default layout); each agent is a YAML file there",
		zap.String("agents_dir", d.cfg.AgentsDir))
	return nil
}
