// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// The containment values (yaml: containment).
const (
	ContainmentAuto   = "auto"   // cgroup v2 where writable, else process group
	ContainmentCgroup = "cgroup" // cgroup v2 or fail
	ContainmentPgroup = "pgroup" // process group plus /proc descendants, never a cgroup
)

// Daemon is the daemon's configuration file (hermeskilld.yaml). Every field
// is set: defaults fill what the file does not say. The tags are the
// schema (see schema.go).
type Daemon struct {
	StateDir   string `yaml:"state_dir" config:"path"`   // certs/, audit.jsonl, outbox/ (default /var/lib/hermeskill)
	RuntimeDir string `yaml:"runtime_dir" config:"path"` // control.sock, agents/ID/notify.sock (default /run/hermeskill)
	AgentsDir  string `yaml:"agents_dir" config:"path"`  // one YAML file per agent (default /etc/hermeskill/agents.d)
	EstopFile  string `yaml:"estop_file" config:"path"`  // creating it kills every agent (default RuntimeDir/STOP)

	Control      Control       `yaml:"control"`
	Metrics      Metrics       `yaml:"metrics"`
	SigningKey   string        `yaml:"signing_key" config:"path"` // Ed25519 private key file; "" = certificates are not signed
	ControlPlane *ControlPlane `yaml:"control_plane"`             // nil = none
	Gateway      Gateway       `yaml:"gateway"`                   // the LLM gateway every agent's traffic goes through; off without upstreams
	Telemetry    *Telemetry    `yaml:"telemetry"`                 // OpenTelemetry export; nil = as the OTEL_* environment says
	Containment  string        `yaml:"containment" config:"oneof=auto|cgroup|pgroup"`
	Audit        AuditOpts     `yaml:"audit"`
	Logs         LogOpts       `yaml:"logs"`
	// HeartbeatRate is heartbeat_rate: datagrams per second one agent may
	// send before the rest are dropped and counted (default 1000).
	HeartbeatRate int `yaml:"heartbeat_rate"`
	// Budgets are the budgets across runs: what every matching run spends
	// in a day or a month, against warn and kill amounts (budgets.go).
	Budgets  []Budget `yaml:"budgets"`
	Defaults Defaults `yaml:"defaults"` // agent settings every agent file inherits
	Source   string   // the file it came from
}

// Control is who may use the control socket (yaml: control). Root always may.
type Control struct {
	ReadGroup      string `yaml:"read_group" config:"id"`      // group (name or gid) that may list and read; "" = root only
	OperatorsGroup string `yaml:"operators_group" config:"id"` // group (name or gid) that may also kill, estop, release; "" = root only
}

// Metrics is the Prometheus endpoint (yaml: metrics).
type Metrics struct {
	Listen string `yaml:"listen" config:"listen"` // host:port to serve /metrics on; "" = no metrics endpoint (default)
	// AgentLabelLimit is agent_label_limit: at most this many agents get
	// per-agent series (label agent=ID); beyond it they are aggregated, to
	// bound cardinality (default 1000; 0 = never label by agent).
	AgentLabelLimit int `yaml:"agent_label_limit"`
}

// ControlPlane is where certificates are delivered (yaml: control_plane).
type ControlPlane struct {
	URL          string        `yaml:"url" config:"url"`         // base URL, https (http only to a loopback host); required
	TokenFile    string        `yaml:"token_file" config:"path"` // file holding the bearer token; "" = no Authorization header
	PollInterval time.Duration `yaml:"poll_interval"`            // how often to ask for remote kill requests; 0 = never (default 10s)
	Timeout      time.Duration `yaml:"timeout"`                  // one HTTP request (default 10s)
	MaxOutbox    int           `yaml:"max_outbox"`               // undelivered certificates kept; past it new ones are refused (counted, and still on disk in certs/) (default 10000)
	// FailClosedAfter is fail_closed_after: a host that cannot reach its
	// control plane this long stops every agent (0 = never, the default).
	FailClosedAfter time.Duration `yaml:"fail_closed_after"`
}

// Telemetry is the OpenTelemetry export of certificates, events and the
// gateway's requests over OTLP/HTTP (yaml: telemetry). What it leaves
// unset, the standard OTEL_EXPORTER_OTLP_* variables say.
type Telemetry struct {
	Endpoint        string            `yaml:"endpoint"`         // OTLP/HTTP base URL (…/v1/logs, …/v1/traces); replaces the environment's endpoints
	Headers         map[string]string `yaml:"headers"`          // sent with every export, over OTEL_EXPORTER_OTLP_HEADERS
	Timeout         time.Duration     `yaml:"timeout"`          // one export request with its retries; 0 = OTEL_EXPORTER_OTLP_TIMEOUT, else 10s
	ShutdownTimeout time.Duration     `yaml:"shutdown_timeout"` // at exit, the wait for what is still queued (default 1s)
}

// setDefaults: a telemetry section the file sets starts from these.
func (t *Telemetry) setDefaults() { *t = Telemetry{ShutdownTimeout: time.Second} }

// problems are what telemetry allows beyond its types.
func (t *Telemetry) problems() []problem {
	if t == nil {
		return nil
	}
	var ps []problem
	if t.Endpoint != "" {
		if u, err := url.Parse(t.Endpoint); err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" ||
			u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			ps = append(ps, problem{key: "telemetry.endpoint", kind: ErrBadValue,
				msg: fmt.Sprintf("%q must be an absolute http(s) URL without credentials, query or fragment, such as http://localhost:4318", t.Endpoint)})
		}
	}
	if t.Timeout < 0 {
		ps = append(ps, problem{key: "telemetry.timeout", kind: ErrBadValue, msg: "must not be negative"})
	}
	if t.ShutdownTimeout <= 0 {
		ps = append(ps, problem{key: "telemetry.shutdown_timeout", kind: ErrBadValue, msg: "must be above 0"})
	}
	return ps
}

// AuditOpts rotate the audit log (yaml: audit).
type AuditOpts struct {
	MaxBytes int64 `yaml:"max_bytes" config:"size"` // size at which audit.jsonl is rotated; 0 = never (default 64MiB)
	Keep     int   `yaml:"keep"`                    // rotated files kept (default 5)
}

// LogOpts rotate the agents' output logs the daemon writes (yaml: logs).
type LogOpts struct {
	MaxBytes int64 `yaml:"max_bytes" config:"size"` // size at which a log is rotated; 0 = never (default 10MiB)
	Keep     int   `yaml:"keep"`                    // rotated files kept (default 3)
}

// DefaultHeartbeatRate is the datagrams per second one agent may send
// before the rest are dropped (heartbeat_rate; supervise uses it too).
const DefaultHeartbeatRate = 1000

// DefaultDaemon returns the daemon configuration with every default.
func DefaultDaemon() *Daemon {
	return &Daemon{
		StateDir:      "/var/lib/hermeskill",
		RuntimeDir:    "/run/hermeskill",
		AgentsDir:     "/etc/hermeskill/agents.d",
		EstopFile:     "/run/hermeskill/STOP",
		Metrics:       Metrics{AgentLabelLimit: 1000},
		Containment:   ContainmentAuto,
		Audit:         AuditOpts{MaxBytes: 64 << 20, Keep: 5},
		Logs:          LogOpts{MaxBytes: 10 << 20, Keep: 3},
		HeartbeatRate: DefaultHeartbeatRate,
	}
}

// setDefaults: a control_plane the file sets starts from these.
func (cp *ControlPlane) setDefaults() {
	*cp = ControlPlane{PollInterval: 10 * time.Second, Timeout: 10 * time.Second, MaxOutbox: 10000}
}

// LoadDaemon reads and parses the daemon file; see ParseDaemon.
func LoadDaemon(path string) (*Daemon, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("daemon config: %w", err)
	}
	return ParseDaemon(data, path)
}

// ParseDaemon parses and validates the daemon file named source, including
// its defaults section (validated as an agent file without id and command).
// An empty file is an error: write {} to run with every default. Every error
// wraps ErrInvalid and names source:line; several are joined.
func ParseDaemon(data []byte, source string) (*Daemon, error) {
	d := newDecoder(source)
	root, ok := d.document(data)
	if ok && root == nil {
		d.fail(nil, "", ErrMissing, "empty file: write {} to run with every default, or see the documentation")
	}
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	cfg := DefaultDaemon()
	cfg.Source = source
	d.mapping(root, "", reflect.ValueOf(cfg).Elem(), scope{})
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	if !d.sets("estop_file") {
		cfg.EstopFile = filepath.Join(cfg.RuntimeDir, "STOP")
	}
	d.report(cfg.problems(), "")
	df := &cfg.Defaults
	d.report(semanticProblems(df.Agent(), df.sets), "defaults.")
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	return cfg, nil
}

// problems are what the daemon's keys allow beyond their types.
func (c *Daemon) problems() []problem {
	var ps []problem
	add := func(key string, kind ErrorKind, msg string) { ps = append(ps, problem{key: key, kind: kind, msg: msg}) }
	if c.HeartbeatRate < 1 {
		add("heartbeat_rate", ErrBadValue, "must be at least 1")
	}
	ps = append(ps, c.Telemetry.problems()...)
	return append(ps, c.ControlPlane.problems()...)
}

// problems are what control_plane allows beyond its types, in the daemon
// file and in an agent file for supervise alike; nil (none) has none.
func (cp *ControlPlane) problems() []problem {
	if cp == nil {
		return nil
	}
	var ps []problem
	add := func(key string, kind ErrorKind, msg string) { ps = append(ps, problem{key: key, kind: kind, msg: msg}) }
	if cp.URL == "" {
		add("control_plane.url", ErrMissing, "required")
	}
	if cp.Timeout == 0 {
		add("control_plane.timeout", ErrBadValue, "must be above 0")
	}
	if cp.MaxOutbox < 1 {
		add("control_plane.max_outbox", ErrBadValue, "must be at least 1")
	}
	switch {
	case cp.FailClosedAfter > 0 && cp.PollInterval <= 0:
		add("control_plane.fail_closed_after", ErrBadValue, "needs poll_interval above 0: without polling the host never learns whether it reaches its control plane")
	case cp.FailClosedAfter > 0 && cp.FailClosedAfter < 2*cp.PollInterval:
		add("control_plane.fail_closed_after", ErrBadValue, fmt.Sprintf(
			"must be at least twice poll_interval (%s): a control plane answering every poll could otherwise trip it", cp.PollInterval))
	}
	return ps
}

// absPath decodes an absolute path, cleaned.
func (d *decoder) absPath(n *yaml.Node, path string) (string, bool) {
	s, ok := d.nonEmpty(n, path)
	if !ok {
		return "", false
	}
	if !filepath.IsAbs(s) {
		d.errorf(deref(n), path, "%q must be an absolute path", s)
		return "", false
	}
	return filepath.Clean(s), true
}

// listen decodes a host:port listen address; an empty host listens on
// every interface.
func (d *decoder) listen(n *yaml.Node, path string) (string, bool) {
	s, ok := d.str(n, path)
	if !ok || s == "" {
		return s, ok
	}
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		d.errorf(deref(n), path, "%q must be host:port such as 127.0.0.1:9464", s)
		return "", false
	}
	return s, true
}

// url decodes the control plane's base URL. The bearer token must not
// travel in clear text, so http is only allowed to a loopback host (a local
// TLS-terminating proxy).
func (d *decoder) url(n *yaml.Node, path string) (string, bool) {
	s, ok := d.nonEmpty(n, path)
	if !ok {
		return "", false
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http":
		d.errorf(deref(n), path, "%q must be an absolute http(s) URL such as https://cp.example/api", s)
		return "", false
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		d.errorf(deref(n), path, "%q must not have a query, a fragment or credentials (use token_file)", s)
		return "", false
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		d.errorf(deref(n), path, "%q: use https (the bearer token would travel in clear text); http is allowed only to localhost", s)
		return "", false
	}
	return s, true
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
