// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"os"
	"syscall"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// credential resolves an agent's `user:` (a name or a numeric uid) to the
// uid, gid and supplementary groups it runs with (config.UserCredential);
// "" runs it as us. Another user than ours needs root.
func credential(name string) (*syscall.Credential, error) {
	c, err := config.UserCredential(name)
	if err != nil || c == nil {
		return c, err
	}
	if euid := os.Geteuid(); euid != 0 && int(c.Uid) != euid {
		return nil, fmt.Errorf("user %q: running agents as another user needs hermeskilld to run as root", name)
	}
	return c, nil
}
