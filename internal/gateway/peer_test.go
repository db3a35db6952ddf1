// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway_test

import (
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// thief posts with a handle from another process (as a process of the
// agent's user that read the handle from /proc/PID/environ would), and
// prints the status and the body.
const thief = `
import sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[1], data=b"{}", headers={"Authorization": "Bearer " + sys.argv[2], "Content-Type": "application/json"})
try:
    r = urllib.request.urlopen(req, timeout=10)
    print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
`

// A grant with members is honoured only on connections whose client
// socket one of its run's processes holds: the same handle from another
// process is refused, in the provider's format, and reaches no upstream.
func TestHandleHonouredOnlyFromItsRun(t *testing.T) {
	py, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 plays the other process")
	e := newEnv(t, echoOK, echoOK)
	recs := newRecords()
	gr, vars := e.grant(t, recs)
	url, handle := vars["OPENAI_BASE_URL"]+"/chat/completions", vars["OPENAI_API_KEY"]
	self := os.Getpid()
	gr.SetMembers(func() []int { return []int{self} })

	resp := e.post(t, gateway.OpenAI, url, handle, `{}`)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, "this process is the run's: it holds its connection")
	recs.next(t)

	out, err := exec.Command(py, "-c", thief, url, handle).CombinedOutput()
	require.NoError(t, err, "%s", out)
	status, body, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	assert.Equal(t, "403", status, body)
	oe := decode[openAIError](t, body)
	assert.Equal(t, "handle_not_yours", oe.Error.Code)
	assert.Len(t, e.openai.requests(), 1, "the other process reached no upstream")

	// A run with no process left: nobody holds its connections. (A
	// connection once verified stays so: who holds it cannot change.)
	gr.SetMembers(func() []int { return nil })
	e.agent.CloseIdleConnections()
	resp = e.post(t, gateway.Anthropic, vars["ANTHROPIC_BASE_URL"]+"/v1/messages", vars["ANTHROPIC_API_KEY"], `{}`)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	ae := decode[anthropicError](t, readAll(t, resp))
	assert.Equal(t, "permission_error", ae.Error.Type)
	assert.Empty(t, e.anthropic.requests())

	// Without members (a grant no run's tree backs), any connection.
	gr.SetMembers(nil)
	out, err = exec.Command(py, "-c", thief, url, handle).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.True(t, strings.HasPrefix(string(out), "200 "), "%s", out)
}
