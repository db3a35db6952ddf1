// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// Every receipt is counted by what became of it: queued, then sent
// (2xx), parked (refused) or dropped (a control plane without receipts,
// 404; an outbox that could not take it). The receipt stored for repeats
// is signed, and verifies.
func TestReceiptStats(t *testing.T) {
	answers := map[string]int{"d-ok": http.StatusCreated, "d-refused": http.StatusUnprocessableEntity, "d-none": http.StatusNotFound}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/directives/{id}/receipts", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(answers[r.PathValue("id")])
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	keys := t.TempDir()
	pub, err := certs.GenerateKey(filepath.Join(keys, "signing.key"))
	require.NoError(t, err)
	signer, err := certs.LoadSigner(filepath.Join(keys, "signing.key"))
	require.NoError(t, err)
	pk, err := certs.LoadPublicKey(pub)
	require.NoError(t, err)

	dir := t.TempDir()
	o := open(t, Options{URL: srv.URL + "/api/", Dir: dir, Timeout: 2 * time.Second,
		MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond, Log: zaptest.NewLogger(t)})
	a := &acker{host: "agents-7", signer: signer, ob: o, dir: filepath.Join(dir, receiptsDir), max: 10,
		log: zaptest.NewLogger(t), inflight: map[seenKey]bool{}}
	for _, id := range []string{"d-ok", "d-refused", "d-none"} {
		a.acknowledge("", Directive{ID: id, Action: ActionKill}, time.Now(), Acted{})
	}
	assert.Equal(t, ReceiptStats{Queued: 3}, o.Stats().Receipts)

	stop := run(t, o)
	require.Eventually(t, func() bool { return o.Stats().Pending == 0 }, 10*time.Second, 5*time.Millisecond)
	stop()
	assert.Equal(t, ReceiptStats{Queued: 3, Sent: 1, Parked: 1, Dropped: 1}, o.Stats().Receipts)

	raw, err := os.ReadFile(filepath.Join(a.dir, receiptKey("", "d-ok")+itemExt))
	require.NoError(t, err)
	require.NoError(t, certs.Verify(raw, pk), "the stored receipt is signed")
	r, err := ParseReceipt(raw)
	require.NoError(t, err)
	assert.Equal(t, "d-ok", r.DirectiveID)
	_, err = ParseReceipt([]byte(`{"schema":"hermeskill.death-certificate.v1"}`))
	assert.ErrorIs(t, err, ErrNotReceipt)

	require.NoError(t, o.Close())
	a.acknowledge("", Directive{ID: "d-late", Action: ActionKill}, time.Now(), Acted{})
	assert.Equal(t, uint64(2), o.Stats().Receipts.Dropped, "a closed outbox takes none")
}
