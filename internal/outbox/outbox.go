// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/atomicfile"
	"github.com/hermeskill/hermeskilld/internal/certs"
)

// Errors of this package, matchable with errors.Is.
var (
	// ErrFull: Enqueue refused a certificate because MaxItems are pending.
	// The certificate is still in the certificates directory; it is only
	// not delivered.
	ErrFull = errors.New("outbox full")
	// ErrClosed: the Outbox was closed.
	ErrClosed = errors.New("outbox closed")
	// ErrLocked: another Outbox (in this process or another) has the
	// directory open.
	ErrLocked = errors.New("outbox directory in use")
	// ErrRunning: Run was called while another Run is active.
	ErrRunning = errors.New("outbox sender already running")
	// ErrBadCertificate: Enqueue was given no certificate, one without
	// cert_id or agent_id, a cert_id unusable as a file name, or raw bytes
	// that are not a JSON object.
	ErrBadCertificate = errors.New("certificate cannot be queued")
	// ErrNotReceipt: ParseReceipt was given JSON of another schema, or
	// a receipt without its directive_id.
	ErrNotReceipt = errors.New("not a directive receipt")
)

// Defaults of Options.
const (
	defaultTimeout    = 10 * time.Second
	defaultMaxItems   = 10000
	defaultMinBackoff = time.Second
	defaultMaxBackoff = 5 * time.Minute
)

// Names inside Options.Dir.
const (
	parkedDir = "parked"               // refused items
	seenFile  = "directives-seen.json" // the poller's memory
	lockFile  = ".lock"                // flock(2): one Outbox per directory
	dirMode   = os.FileMode(0o750)     // as the certificates directory
	fileMode  = certs.FileMode         // an item holds a certificate
	maxIDLen  = 200                    // a cert_id becomes a file name
	itemExt   = ".json"                // <cert_id>.json
	reasonExt = ".reason"              // parked/<cert_id>.reason
)

// Options configure an Outbox. URL and Dir are required.
type Options struct {
	// URL is the control plane's base URL ("https://cp.example/api").
	URL string
	// TokenFile holds the bearer token, read at each attempt; "" sends no
	// Authorization header.
	TokenFile string
	// Dir holds the undelivered items (state_dir/outbox); created 0750.
	Dir string
	// Timeout bounds one request (default 10s).
	Timeout time.Duration
	// MaxItems bounds the pending items (default 10000); beyond it Enqueue
	// returns ErrFull and Stats.Rejected counts it.
	MaxItems int
	// MinBackoff and MaxBackoff bound the wait after a failure (defaults
	// 1s and 5m); see the package comment.
	MinBackoff, MaxBackoff time.Duration
	// HTTPClient sends the requests; nil is a client with no timeout of its
	// own (Timeout applies per request).
	HTTPClient *http.Client
	// OnStats, when set, is called with the Stats at Open and after every
	// change (enqueue, delivery, failure, parking, refusal), for metrics. It must not block
	// and must not call the Outbox.
	OnStats func(Stats)
	Log     *zap.Logger
}

// Stats are the Outbox's counters. Pending and Parked are item counts now;
// the others count since Open.
type Stats struct {
	Pending   int    `json:"pending"`
	Parked    int    `json:"parked"`
	Delivered uint64 `json:"delivered"`
	// Failures counts failed attempts: retryable ones and parkings.
	Failures uint64 `json:"failures"`
	// Rejected counts Enqueue calls refused with ErrFull.
	Rejected uint64 `json:"rejected"`
	// Receipts count the directive receipts by what became of them.
	Receipts ReceiptStats `json:"receipts"`
}

// ReceiptStats count directive receipts since Open: queued for the
// control plane (again, for a repeated directive), sent (2xx), parked
// (refused by the control plane, or unreadable), dropped (not made, not
// queued — the outbox full or closed, the disk — or taken by no
// control plane that answers 404 to receipts).
type ReceiptStats struct {
	Queued  uint64 `json:"queued"`
	Sent    uint64 `json:"sent"`
	Parked  uint64 `json:"parked"`
	Dropped uint64 `json:"dropped"`
}

// Outbox is a durable queue of certificates for the control plane. Enqueue
// may be called from any goroutine; one goroutine calls Run.
type Outbox struct {
	opts    Options
	base    string // URL without trailing "/"
	log     *zap.Logger
	lock    *os.File
	wake    chan struct{} // capacity 1: Enqueue -> Run
	flush   chan struct{} // capacity 1: Flush -> Run, cuts a backoff short
	closing chan struct{} // closed by Close

	mu      sync.Mutex
	queue   []*item // oldest first
	byID    map[string]*item
	stats   Stats
	closed  bool
	running chan struct{} // non-nil while Run runs; closed when it returns
	change  chan struct{} // closed (and replaced) at every change of stats: Flush waits on it
}

// item is one pending certificate, or one directive receipt; its payload
// is the file Dir/<id>.json, read at each attempt (an item may be
// megabytes; thousands may wait).
type item struct {
	id      string
	agentID string // a certificate's
	// directiveID is a receipt's: the item is POSTed to the directive's
	// receipts, not to an agent's kill events.
	directiveID string
}

// Open opens (creating it if needed) the outbox directory and loads the
// items a previous run left there, oldest (by modification time) first; the
// next Run sends them. It locks the directory: a second Open of the same
// directory gets ErrLocked until Close. Other errors are the file system's.
func Open(opts Options) (*Outbox, error) {
	if opts.URL == "" || opts.Dir == "" {
		return nil, errors.New("open outbox: URL and Dir are required")
	}
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("open outbox: URL %q is not an http(s) URL", opts.URL)
	}
	opts.Timeout = cmp.Or(opts.Timeout, defaultTimeout)
	opts.MaxItems = cmp.Or(opts.MaxItems, defaultMaxItems)
	opts.MinBackoff = cmp.Or(opts.MinBackoff, defaultMinBackoff)
	opts.MaxBackoff = max(cmp.Or(opts.MaxBackoff, defaultMaxBackoff), opts.MinBackoff)
	opts.HTTPClient = withoutRedirects(opts.HTTPClient)
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, parkedDir), dirMode); err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	lock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	o := &Outbox{
		opts: opts, base: strings.TrimRight(opts.URL, "/"), log: opts.Log, lock: lock,
		wake: make(chan struct{}, 1), flush: make(chan struct{}, 1), closing: make(chan struct{}),
		byID: map[string]*item{}, change: make(chan struct{}),
	}
	if err := o.load(); err != nil {
		lock.Close()
		return nil, err
	}
	o.mu.Lock()
	o.changed() // the figures a previous run left
	o.mu.Unlock()
	return o, nil
}

func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("open outbox %s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("open outbox: %w", os.NewSyscallError("flock", err))
	}
	return f, nil
}

// load reads the items left in Dir and counts the parked ones. A file that
// is not an item (unreadable, not our payload) is parked with the reason, so
// it neither blocks the queue nor disappears.
func (o *Outbox) load() error {
	ents, err := os.ReadDir(o.opts.Dir)
	if err != nil {
		return fmt.Errorf("open outbox: %w", err)
	}
	type found struct {
		it  *item
		mod time.Time
	}
	var items []found
	for _, de := range ents {
		name := de.Name()
		if strings.HasPrefix(name, ".") {
			if strings.HasSuffix(name, ".tmp") { // an atomicfile temp a crash left
				os.Remove(filepath.Join(o.opts.Dir, name))
			}
			continue
		}
		if name == seenFile || !strings.HasSuffix(name, itemExt) || !de.Type().IsRegular() {
			continue
		}
		id := strings.TrimSuffix(name, itemExt)
		it, err := readItem(filepath.Join(o.opts.Dir, name), id)
		if err != nil {
			o.log.Error("outbox item unreadable; parking it", zap.String("file", name), zap.Error(err))
			if perr := o.park(id, "unreadable at start: "+err.Error()); perr != nil {
				o.log.Error("outbox item not parked", zap.String("file", name), zap.Error(perr))
			}
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		items = append(items, found{it, fi.ModTime()})
	}
	slices.SortStableFunc(items, func(a, b found) int {
		return cmp.Or(a.mod.Compare(b.mod), strings.Compare(a.it.id, b.it.id))
	})
	for _, f := range items {
		o.queue = append(o.queue, f.it)
		o.byID[f.it.id] = f.it
	}
	o.stats.Pending = len(o.queue)
	o.stats.Parked = countParked(filepath.Join(o.opts.Dir, parkedDir))
	if len(o.queue) > 0 {
		o.log.Info("outbox has undelivered certificates", zap.Int("pending", len(o.queue)))
	}
	return nil
}

func countParked(dir string) int {
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, de := range ents {
		if strings.HasSuffix(de.Name(), itemExt) && !strings.HasPrefix(de.Name(), ".") {
			n++
		}
	}
	return n
}

// Enqueue stores the kill event of certificate c durably in the outbox and
// wakes the sender; when it returns nil the event will be delivered even
// across a crash. raw is the certificate's JSON as written to its file
// (sent as is, so its signature survives); nil means certs.Marshal(c),
// which gives the same bytes certs.Write wrote. A certificate already
// pending is replaced, not queued twice.
//
// Errors: ErrBadCertificate, ErrFull, ErrClosed, or the file system's.
func (o *Outbox) Enqueue(c *certs.Certificate, raw []byte) error {
	if c == nil {
		return fmt.Errorf("enqueue: %w: nil", ErrBadCertificate)
	}
	if err := checkID(c.CertID); err != nil {
		return fmt.Errorf("enqueue %q: %w", c.CertID, err)
	}
	if c.AgentID == "" {
		return fmt.Errorf("enqueue %s: %w: no agent_id", c.CertID, ErrBadCertificate)
	}
	body, err := buildPayload(c, raw)
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", c.CertID, err)
	}
	return o.enqueue(&item{id: c.CertID, agentID: c.AgentID}, body)
}

// enqueue stores body as it's payload and queues it (Enqueue).
func (o *Outbox) enqueue(it *item, body []byte) (err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if it.directiveID != "" {
		defer func() {
			if err != nil {
				o.stats.Receipts.Dropped++
			} else {
				o.stats.Receipts.Queued++
			}
			o.changed()
		}()
	}
	if o.closed {
		return ErrClosed
	}
	_, pending := o.byID[it.id]
	if !pending && len(o.queue) >= o.opts.MaxItems {
		o.stats.Rejected++
		o.changed()
		return fmt.Errorf("enqueue %s: %w (%d pending)", it.id, ErrFull, len(o.queue))
	}
	// Written under the lock so that Run never sees an item without its file.
	if err := atomicfile.WriteFile(o.itemPath(it.id), body, fileMode); err != nil {
		return fmt.Errorf("enqueue %s: %w", it.id, err)
	}
	if !pending {
		o.queue = append(o.queue, it)
		o.byID[it.id] = it
		o.stats.Pending = len(o.queue)
		o.changed()
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return nil
}

// checkID accepts a cert_id that is safe as a file name.
func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: no cert_id", ErrBadCertificate)
	case len(id) > maxIDLen, strings.HasPrefix(id, "."), strings.ContainsAny(id, "/\x00"),
		id+itemExt == seenFile:
		return fmt.Errorf("%w: cert_id unusable as a file name", ErrBadCertificate)
	}
	return nil
}

// Stats returns the current counters.
func (o *Outbox) Stats() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stats
}

// changed reports the stats and wakes Flush; o.mu is held.
func (o *Outbox) changed() {
	if o.opts.OnStats != nil {
		o.opts.OnStats(o.stats)
	}
	close(o.change)
	o.change = make(chan struct{})
}

// Close stops a running Run (waiting for it to return: an attempt in flight
// is cancelled and stays pending) and releases the directory. Items not yet
// delivered stay on disk for the next Open. Close is idempotent.
func (o *Outbox) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	close(o.closing)
	running := o.running
	close(o.change) // a Flush returns
	o.change = make(chan struct{})
	o.mu.Unlock()
	if running != nil {
		<-running
	}
	return o.lock.Close() // releases the flock
}

func (o *Outbox) itemPath(id string) string { return filepath.Join(o.opts.Dir, id+itemExt) }

// head returns the oldest pending item, nil when none.
func (o *Outbox) head() *item {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.queue) == 0 {
		return nil
	}
	return o.queue[0]
}

// remove drops it from the queue and updates the stats with fn.
func (o *Outbox) remove(it *item, fn func(*Stats)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dropLocked(it)
	fn(&o.stats)
	o.changed()
}

// dropLocked removes it from the queue; o.mu is held.
func (o *Outbox) dropLocked(it *item) {
	if o.byID[it.id] == it {
		delete(o.byID, it.id)
		o.queue = slices.DeleteFunc(o.queue, func(x *item) bool { return x == it })
	}
	o.stats.Pending = len(o.queue)
}

// receiptDropped counts a receipt that could not be made.
func (o *Outbox) receiptDropped() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stats.Receipts.Dropped++
	o.changed()
}

func (o *Outbox) countFailure() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stats.Failures++
	o.changed()
}

// park moves Dir/<id>.json to parked/ and writes the reason next to it.
func (o *Outbox) park(id, reason string) error {
	pdir := filepath.Join(o.opts.Dir, parkedDir)
	if err := atomicfile.WriteFile(filepath.Join(pdir, id+reasonExt), []byte(reason+"\n"), fileMode); err != nil {
		return err
	}
	if err := os.Rename(o.itemPath(id), filepath.Join(pdir, id+itemExt)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := atomicfile.SyncDir(pdir); err != nil {
		return err
	}
	return atomicfile.SyncDir(o.opts.Dir)
}
