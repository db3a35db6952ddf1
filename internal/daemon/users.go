// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// credential resolves an agent's `user:` (a name or a numeric uid) to the
// uid, gid and supplementary groups it runs with; "" runs it as us.
func credential(name string) (*syscall.Credential, error) {
	if name == "" {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		if _, numErr := strconv.Atoi(name); numErr != nil {
			return nil, fmt.Errorf("user %q: %w", name, err)
		}
		if u, err = user.LookupId(name); err != nil {
			return nil, fmt.Errorf("user %q: %w", name, err)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user %q: %w", name, err)
	}
	if os.Geteuid() != 0 && int(uid) != os.Geteuid() {
		return nil, fmt.Errorf("user %q: running agents as another user needs hermeskilld to run as root", name)
	}
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				c.Groups = append(c.Groups, uint32(n))
			}
		}
	}
	return c, nil
}
