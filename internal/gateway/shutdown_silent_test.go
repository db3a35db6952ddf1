// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// A connection that never sent a request does not hold Serve's end: it is
// closed at once, as an idle one is.
func TestShutdownClosesSilentConnections(t *testing.T) {
	f := newFake(t, echoOK)
	gw, err := gateway.New(gateway.Config{Upstreams: []gateway.Upstream{{Name: "openai", URL: f.URL, Style: gateway.OpenAI}}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Serve(ctx) }()
	c, err := net.Dial("tcp", gw.Addr())
	require.NoError(t, err)
	defer c.Close()
	time.Sleep(50 * time.Millisecond) // accepted
	start := time.Now()
	cancel()
	require.NoError(t, <-done)
	assert.Less(t, time.Since(start), time.Second, "Serve waited for a silent connection")
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Second)))
	_, err = c.Read(make([]byte, 1))
	assert.Error(t, err, "the silent connection is closed")
	require.NoError(t, gw.Close())
}
