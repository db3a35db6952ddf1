// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/testnobody"
)

// Idle connections cannot take the gateway's descriptors: past its bound
// per local user, a connection is answered 503 in a body both styles'
// SDKs read as an error, and closed; another user is still served; once
// the idle connections close, their slots serve again.
func TestConnectionBounds(t *testing.T) {
	e := newEnv(t, echoOK, echoOK, func(c *gateway.Config) { c.MaxConns, c.MaxConnsPerUser = 6, 3 })
	_, vars := e.grant(t, newRecords())
	var idle []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", e.gw.Addr())
		require.NoError(t, err)
		idle = append(idle, c)
	}
	// Each is accepted (counted) by the time a request on a fourth comes.
	time.Sleep(100 * time.Millisecond)
	// A new connection for each request (no keep-alive, but no
	// "Connection: close" either, whose server side lingers past the test).
	do := func() (int, string) {
		fresh := &http.Client{Transport: &http.Transport{}}
		defer fresh.CloseIdleConnections()
		req, err := http.NewRequest(http.MethodPost, vars["OPENAI_BASE_URL"]+"/chat/completions", strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+vars["OPENAI_API_KEY"])
		resp, err := fresh.Do(req)
		require.NoError(t, err)
		return resp.StatusCode, readAll(t, resp)
	}
	status, body := do()
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	oe := decode[openAIError](t, body)
	assert.Equal(t, "too_many_connections", oe.Error.Code)
	assert.Contains(t, oe.Error.Message, "from this user")
	ae := decode[anthropicError](t, body)
	assert.Equal(t, "error", ae.Type)
	assert.Equal(t, "overloaded_error", ae.Error.Type)

	// Another local user has a bound of its own.
	// The system's interpreter: a per-user one (pyenv) is not reachable
	// by uid 65534.
	py := "/usr/bin/python3"
	_, err := os.Stat(py)
	require.NoError(t, err, "python3 is needed for the other user's client (.ci/run installs it)")
	other := exec.Command(py, "-c", `
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")
print(s.recv(100).split(b"\r\n")[0].decode())
`, e.gw.Addr()[strings.LastIndex(e.gw.Addr(), ":")+1:])
	other.Dir = testnobody.Dir(t)
	other.SysProcAttr = &syscall.SysProcAttr{Credential: testnobody.Credential()}
	out, err := other.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.NotContains(t, string(out), "503", "another user was refused for our connections")

	for _, c := range idle {
		c.Close()
	}
	require.Eventually(t, func() bool { s, _ := do(); return s == http.StatusOK }, 10*time.Second, 20*time.Millisecond,
		"the idle connections' slots were not given back")
}
