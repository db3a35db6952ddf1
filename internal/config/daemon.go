package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
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
// is set: defaults fill what the file does not say.
type Daemon struct {
	StateDir   string // state_dir: certs/, audit.jsonl, outbox/ (default /var/lib/hermeskill)
	RuntimeDir string // runtime_dir: control.sock, agents/ID.sock (default /run/hermeskill)
	AgentsDir  string // agents_dir: one YAML file per agent (default /etc/hermeskill/agents.d)
	EstopFile  string // estop_file: creating it kills every agent (default RuntimeDir/STOP)

	Control      Control       // control
	Metrics      Metrics       // metrics
	SigningKey   string        // signing_key: Ed25519 private key file; "" = certificates are not signed
	ControlPlane *ControlPlane // control_plane: nil = none
	Containment  string        // containment: auto | cgroup | pgroup (default auto)
	Audit        AuditOpts     // audit
	Logs         LogOpts       // logs
	// HeartbeatRate is heartbeat_rate: datagrams per second one agent may
	// send before the rest are dropped and counted (default 1000).
	HeartbeatRate int
	Defaults      Defaults // defaults: agent settings every agent file inherits
	Source        string   // the file it came from
}

// Control is who may use the control socket (yaml: control). Root always may.
type Control struct {
	ReadGroup      string // read_group: group (name or gid) that may list and read; "" = root only
	OperatorsGroup string // operators_group: group (name or gid) that may also kill, estop, release; "" = root only
}

// Metrics is the Prometheus endpoint (yaml: metrics).
type Metrics struct {
	Listen string // listen: host:port to serve /metrics on; "" = no metrics endpoint (default)
	// AgentLabelLimit is agent_label_limit: at most this many agents get
	// per-agent series (label agent=ID); beyond it they are aggregated, to
	// bound cardinality (default 1000; 0 = never label by agent).
	AgentLabelLimit int
}

// ControlPlane is where certificates are delivered (yaml: control_plane).
type ControlPlane struct {
	URL          string        // url: base URL, https (http only to a loopback host)
	TokenFile    string        // token_file: file holding the bearer token; "" = no Authorization header
	PollInterval time.Duration // poll_interval: how often to ask for remote kill requests; 0 = never (default 10s)
	Timeout      time.Duration // timeout: one HTTP request (default 10s)
	MaxOutbox    int           // max_outbox: undelivered certificates kept; past it new ones are refused (counted, and still on disk in certs/) (default 10000)
}

// AuditOpts rotate the audit log (yaml: audit).
type AuditOpts struct {
	MaxBytes int64 // max_bytes: size at which audit.jsonl is rotated; 0 = never (default 64MiB)
	Keep     int   // keep: rotated files kept (default 5)
}

// LogOpts rotate the agents' output logs the daemon writes (yaml: logs).
type LogOpts struct {
	MaxBytes int64 // max_bytes: size at which a log is rotated; 0 = never (default 10MiB)
	Keep     int   // keep: rotated files kept (default 3)
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

func defaultControlPlane() *ControlPlane {
	return &ControlPlane{PollInterval: 10 * time.Second, Timeout: 10 * time.Second, MaxOutbox: 10000}
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
	if !ok {
		return nil, d.err()
	}
	if root == nil {
		d.fail(nil, "", ErrMissing, "empty file: write {} to run with every default, or see the documentation")
		return nil, d.err()
	}
	cfg := DefaultDaemon()
	cfg.Source = source
	estopSet := false
	d.mapping(root, "", []field{
		{"state_dir", d.pathTo(&cfg.StateDir)},
		{"runtime_dir", d.pathTo(&cfg.RuntimeDir)},
		{"agents_dir", d.pathTo(&cfg.AgentsDir)},
		{"estop_file", func(p string, v *yaml.Node) { estopSet = true; d.pathTo(&cfg.EstopFile)(p, v) }},
		{"control", func(p string, v *yaml.Node) {
			d.mapping(v, p, []field{
				{"read_group", func(p string, v *yaml.Node) { cfg.Control.ReadGroup, _ = d.nameOrID(v, p) }},
				{"operators_group", func(p string, v *yaml.Node) { cfg.Control.OperatorsGroup, _ = d.nameOrID(v, p) }},
			}, nil)
		}},
		{"metrics", func(p string, v *yaml.Node) {
			d.mapping(v, p, []field{
				{"listen", func(p string, v *yaml.Node) { cfg.Metrics.Listen, _ = d.listen(v, p) }},
				{"agent_label_limit", func(p string, v *yaml.Node) { cfg.Metrics.AgentLabelLimit, _ = d.smallInt(v, p) }},
			}, nil)
		}},
		{"signing_key", d.pathTo(&cfg.SigningKey)},
		{"control_plane", func(p string, v *yaml.Node) { cfg.ControlPlane = d.controlPlane(v, p) }},
		{"containment", func(p string, v *yaml.Node) {
			cfg.Containment, _ = d.enum(v, p, ContainmentAuto, ContainmentCgroup, ContainmentPgroup)
		}},
		{"audit", func(p string, v *yaml.Node) {
			cfg.Audit.MaxBytes, cfg.Audit.Keep = d.rotation(v, p, cfg.Audit.MaxBytes, cfg.Audit.Keep)
		}},
		{"logs", func(p string, v *yaml.Node) {
			cfg.Logs.MaxBytes, cfg.Logs.Keep = d.rotation(v, p, cfg.Logs.MaxBytes, cfg.Logs.Keep)
		}},
		{"heartbeat_rate", func(p string, v *yaml.Node) {
			if n, ok := d.smallInt(v, p); ok {
				if n == 0 {
					d.errorf(deref(v), p, "must be at least 1")
				}
				cfg.HeartbeatRate = n
			}
		}},
		{"defaults", func(p string, v *yaml.Node) { cfg.Defaults.raw = d.agent(v, p, true) }},
	}, nil)
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	if !estopSet {
		cfg.EstopFile = filepath.Join(cfg.RuntimeDir, "STOP")
	}
	d.report(semanticProblems(cfg.Defaults.raw, resolve(cfg.Defaults.raw)), "defaults.")
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	return cfg, nil
}

// pathTo is a field function that stores an absolute, cleaned path in *dst.
func (d *decoder) pathTo(dst *string) func(string, *yaml.Node) {
	return func(p string, v *yaml.Node) {
		s, ok := d.nonEmpty(v, p)
		if !ok {
			return
		}
		if !filepath.IsAbs(s) {
			d.errorf(deref(v), p, "%q must be an absolute path", s)
			return
		}
		*dst = filepath.Clean(s)
	}
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

func (d *decoder) controlPlane(n *yaml.Node, path string) *ControlPlane {
	if isNull(deref(n)) {
		return nil
	}
	cp := defaultControlPlane()
	d.mapping(n, path, []field{
		{"url", func(p string, v *yaml.Node) { cp.URL, _ = d.url(v, p) }},
		{"token_file", d.pathTo(&cp.TokenFile)},
		{"poll_interval", func(p string, v *yaml.Node) { cp.PollInterval, _ = d.duration(v, p) }},
		{"timeout", func(p string, v *yaml.Node) {
			if t, ok := d.duration(v, p); ok {
				if t == 0 {
					d.errorf(deref(v), p, "must be above 0")
				}
				cp.Timeout = t
			}
		}},
		{"max_outbox", func(p string, v *yaml.Node) {
			if m, ok := d.smallInt(v, p); ok {
				if m == 0 {
					d.errorf(deref(v), p, "must be at least 1")
				}
				cp.MaxOutbox = m
			}
		}},
	}, nil)
	if _, ok := d.lines[join(path, "url")]; !ok && deref(n).Kind == yaml.MappingNode {
		d.fail(deref(n), path, ErrMissing, "url is required")
	}
	return cp
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

// rotation decodes {max_bytes, keep} over the given defaults.
func (d *decoder) rotation(n *yaml.Node, path string, maxBytes int64, keep int) (int64, int) {
	d.mapping(n, path, []field{
		{"max_bytes", func(p string, v *yaml.Node) {
			if b, ok := d.size(v, p); ok {
				maxBytes = b
			}
		}},
		{"keep", func(p string, v *yaml.Node) {
			if k, ok := d.smallInt(v, p); ok {
				keep = k
			}
		}},
	}, nil)
	return maxBytes, keep
}
