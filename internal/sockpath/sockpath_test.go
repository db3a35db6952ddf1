// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package sockpath_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/sockpath"
)

func TestMax(t *testing.T) {
	assert.Equal(t, 107, sockpath.Max, "Linux's sun_path is 108 bytes")
	assert.Equal(t, "socket path too long for sun_path (max 107 bytes)", sockpath.ErrTooLong.Error())
}

func TestCheck(t *testing.T) {
	fits := "/" + strings.Repeat("x", sockpath.Max-1)
	require.NoError(t, sockpath.Check(fits), "107 bytes and the NUL fill sun_path exactly")
	require.NoError(t, sockpath.Check(""))

	err := sockpath.Check(fits + "x")
	require.ErrorIs(t, err, sockpath.ErrTooLong)
	assert.Contains(t, err.Error(), "(108 bytes)")
}
