// Package config owns hermeskilld's configuration: it parses, validates and
// defaults the daemon file (hermeskilld.yaml, see LoadDaemon) and agent files
// (one per agent in agents_dir, and the file given to `supervise --config`,
// see LoadAgent), and it is the one place where durations, sizes and signals
// are parsed (ParseDuration, ParseSize, ParseSignal). Other packages get
// typed values and never see YAML. The schema is declared once, by the
// struct tags of Agent and Daemon (see schema.go); this comment is its
// reference for people, and a test holds the two to each other.
//
// # Using it
//
// The daemon:
//
//	d, err := config.LoadDaemon(path)             // validated, defaults filled
//	a, err := config.LoadAgent(file, &d.Defaults) // for each file in d.AgentsDir
//	a.Normalize()
//	err = a.Validate(true)                        // id and command required
//
// supervise:
//
//	a := config.DefaultAgent()                    // without --config, or
//	a, err := config.LoadAgent(file, nil)         // with --config FILE
//	err = a.Set("checks.memory.kill", "2GiB")     // for each flag given: flags win, key by key
//	a.ID, a.Command = id, argv
//	a.Normalize()
//	err = a.Validate(true)
//
// Normalize must run after the flags, because some defaults derive from
// other values (startup_timeout from heartbeat_timeout).
//
// The daemon's status shows an agent's checks with Checks.Describe and
// Escalation.Describe. Every error is an *Error with the file, line and key
// and a Kind to match (ErrUnknownKey, ErrBadValue, …), joined when there
// are several.
//
// # Syntax
//
// Files are YAML (go.yaml.in/yaml/v3), one document per file, UTF-8, at
// most 1 MiB. Indent with spaces, never tabs. Unknown keys, duplicate keys,
// values of the wrong type and merge keys (<<) are errors; anchors and
// aliases (&a, *a) work. Every error names the file and line:
//
//	agent.yaml:4: unknown key "chekcs" (known: id, labels, command, …); did you mean "checks"?
//	agent.yaml:12: checks.memory.kill: bad size "2Gb": unknown unit "Gb" (…)
//
// Value types used below:
//
//   - string: a YAML string. Numbers, booleans and dates are not strings:
//     quote them (env: {DEBUG: "true"}, labels: {version: "2"}).
//   - duration: Go syntax: 300ms, 1.5s, 30s, 5m, 2h, 1h30m; a bare 0 is
//     allowed; a bare number other than 0 is an error (no unit is guessed);
//     negative durations are errors. Units: ns, us (µs), ms, s, m, h.
//   - size: bytes as an integer (4096), or a number and a unit: B, KiB, MiB,
//     GiB, TiB, PiB, EiB (powers of 1024), KB, MB, GB, TB, PB, EB (powers of
//     1000); 512MiB, 1.5GiB, 100MB. Units are case-sensitive; K, G, Gb, gib are refused as
//     ambiguous. A fraction is rounded down to whole bytes.
//   - count: a non-negative integer (1000, 1_000, 0x3e8).
//   - number: a non-negative decimal (4.00, 5, 95.5).
//   - signal: SIGINT, INT, sigint or 2 (names and numbers 1-31 of signal(7),
//     case-insensitive), or none.
//
// Thresholds and timeouts use 0 for "off". A key left out takes its default
// (from the daemon's defaults section, then the built-in default).
//
// # Agent file
//
// Every key, with its default. An empty file is a valid agent file for
// supervise (everything default; id and command come from flags).
//
//	id: research-bot      # string, required by the daemon (supervise: --id).
//	                      # 1-64 of A-Z a-z 0-9 . _ -, not starting with . or -
//	labels:               # string -> string, default {}. Names: up to 63 of
//	  team: research      # A-Z a-z 0-9 _ . / -, starting with a letter or _;
//	                      # values up to 256 bytes.
//	command: [python3, agent.py]  # list of strings, required by the daemon
//	                      # (supervise: after --). argv as is: never a shell,
//	                      # so a single string is an error.
//	user: bots            # user name or numeric uid to run as, default: the
//	                      # user hermeskilld runs as.
//	cwd: /opt/bots/x      # absolute path, default: hermeskilld's directory.
//	env:                  # string -> string, added to hermeskilld's
//	  LOG_LEVEL: info     # environment. Names [A-Za-z_][A-Za-z0-9_]*. Refused
//	                      # (hermeskilld sets them): HERMESKILL_SOCKET,
//	                      # HERMESKILL_AGENT_ID, NOTIFY_SOCKET, WATCHDOG_USEC.
//	mode: enforce         # enforce | shadow (supervise --shadow). Shadow: a
//	                      # terminal symptom writes a certificate with
//	                      # "mode": "shadow" and nothing is signalled.
//	after_kill: quarantine # quarantine | restart (daemon only). quarantine: a
//	                      # killed agent stays down until `hermeskilld release
//	                      # ID`; restart: it is restarted with the backoff and
//	                      # limits of restart, whatever restart.policy says.
//	restart:              # daemon only: an agent that exits by itself.
//	  policy: never       # never | on-failure (exit code != 0 or a signal) | always
//	  backoff: 1s         # duration, first delay before a restart; doubles
//	  max_backoff: 5m     # duration, cap of the delay; >= backoff
//	  max_restarts: 5     # count within window, then the agent is left down
//	                      # as crash-looping; 0 = no limit
//	  window: 10m         # duration, > 0 when max_restarts is set
//	  stable_after: 1m    # duration: a run this long resets the backoff
//	escalation:           # the kill ladder: cooperative stop, SIGTERM, SIGKILL
//	  coop_signal: SIGINT # signal to the main process at the cooperative
//	                      # stage (--coop-signal); none skips it. SIGKILL and
//	                      # SIGSTOP are refused (they cannot be caught).
//	  coop_grace: 10s     # duration, wait after the cooperative stop (--coop-grace)
//	  term_grace: 5s      # duration, wait after SIGTERM (--term-grace); also
//	                      # the stop_timeout after STOPPING=1
//	  dump_wait: 200ms    # duration, wait after the agent's DUMP_SIGNAL for
//	                      # its stack traces, before the ladder
//	checks:               # symptom checks; all off by default
//	  startup_timeout: 60s    # duration (--startup-timeout); default:
//	                          # heartbeat_timeout but at least 10s (an agent
//	                          # that never beats must still die)
//	  heartbeat_timeout: 30s  # duration (--heartbeat-timeout); also passed to
//	                          # the agent as WATCHDOG_USEC
//	  heartbeat_timeout_min: 100ms # duration: lowest WATCHDOG_USEC an agent may
//	                          # set; default 100ms, lowered to
//	                          # heartbeat_timeout_max when above it
//	  heartbeat_timeout_max: 30s # duration: highest WATCHDOG_USEC an agent may
//	                          # set; default heartbeat_timeout (an agent may
//	                          # tighten its watchdog, not loosen it). With no
//	                          # heartbeat_timeout and no max, an agent cannot
//	                          # arm a watchdog. Must be >= heartbeat_timeout.
//	  progress_timeout: 5m    # duration (--progress-timeout): PROGRESS must
//	                          # increase this often
//	  max_runtime: 2h         # duration (--max-runtime): wall-clock limit
//	  max_extension: 30m      # duration (--max-extension); 0 = the default,
//	                          # 30m: EXTEND_TIMEOUT_USEC messages in a row
//	                          # (no WATCHDOG=1 between them) never push the
//	                          # startup, heartbeat or stop deadline more than
//	                          # this beyond where it would be without them
//	                          # (the last heartbeat + heartbeat_timeout, the
//	                          # start + startup_timeout, STOPPING + term_grace);
//	                          # a clamped extension is a warning
//	  sample_interval: 1s     # duration, >= 10ms (0 = the default): how often
//	                          # the kernel metrics (memory, cpu_spin, procs,
//	                          # fds) are read
//	  memory: {warn: 1GiB, kill: 2GiB, for: 10s} # sizes, tree RSS (--max-rss
//	                          # sets kill); for: duration above the threshold
//	                          # before it counts, 0 = the first sample
//	  cpu_spin: {percent: 95, for: 2m, only_without_progress: true}
//	                          # percent: number, tree CPU in percent of one CPU
//	                          # as top shows it (200 = two CPUs) (--max-cpu);
//	                          # for: duration (--cpu-for), 0 = the first
//	                          # sample; only_without_progress: true | false
//	                          # (default false): count only while PROGRESS
//	                          # does not increase
//	  procs: {warn: 128, kill: 256, for: 0}  # counts, processes + threads of
//	                          # the tree (--max-procs sets kill)
//	  fds: {warn: 2048, kill: 4096, for: 0}  # counts, open fds of the tree
//	                          # (--max-fds sets kill)
//	  tokens: {warn: 800000, kill: 1000000}  # counts, cumulative TOKENS
//	                          # (--max-tokens sets kill)
//	  cost: {warn: 4.00, kill: 5.00}  # numbers, USD, cumulative COST_USD
//	                          # (--max-cost sets kill)
//	  tool_loop: {repeats: 5} # count >= 2 (or 0): the same tool call, or the
//	                          # same cycle of 2-3 calls, this many times in a
//	                          # row (--tool-loop). Short form: tool_loop: 5
//	  error_streak: {warn: 5, kill: 10}  # counts, ERRORs without progress
//	                          # between (--error-streak sets kill)
//	  steps: {warn: 400, kill: 500}  # counts, the PROGRESS value (--max-steps
//	                          # sets kill)
//	gateway:              # supervise only (the daemon has its own): the
//	                      # agent's LLM traffic through hermeskilld; off
//	                      # without upstreams. See docs/gateway.md.
//	  upstreams: [openai=https://api.openai.com/v1]  # list of NAME=URL or
//	                      # NAME=URL,style=openai|anthropic (--llm-upstream)
//	  key_files: {openai: /etc/hermeskill/openai.key}  # name -> key file, not
//	                      # readable by group or others (--llm-key-file)
//	  prices: /etc/hermeskill/prices.yaml  # USD per million tokens by model
//	                      # (--llm-prices); without it costs are unknown
//	  listen: 127.0.0.1:0 # host:port on loopback; default a free port
//
// In memory, procs, fds, tokens, cost, error_streak and steps, warn and kill
// are each optional (0 = off) and warn must not be above kill. A warning is
// logged, kept for the certificate and sent to the agent; a kill starts the
// ladder (or, in shadow mode, only writes the certificate).
//
// # Daemon file
//
// Every key, with its default. Paths must be absolute. An empty file is an
// error: write {} to run with every default.
//
//	state_dir: /var/lib/hermeskill        # certs/, audit.jsonl, outbox/
//	runtime_dir: /run/hermeskill          # control.sock, agents/ID.sock
//	agents_dir: /etc/hermeskill/agents.d  # one YAML file per agent, watched
//	estop_file: /run/hermeskill/STOP      # default: runtime_dir/STOP; creating
//	                                      # it kills every agent
//	control:                   # who may use control.sock; root always may
//	  read_group: hermeskill   # group name or gid that may list; default none
//	  operators_group: hermeskill-ops # group that may also kill, estop and
//	                           # release; default none
//	metrics:
//	  listen: "127.0.0.1:9464" # host:port of the Prometheus endpoint; default
//	                           # "" = none. Quote it.
//	  agent_label_limit: 1000  # count: agents beyond this many are not given
//	                           # per-agent series (0 = none are)
//	signing_key: /etc/hermeskill/signing.key # Ed25519 key; default "" =
//	                           # certificates are not signed
//	control_plane:             # default: none. Certificates are POSTed here
//	  url: https://cp.example/api # required; https, or http to localhost only
//	  token_file: /etc/hermeskill/cp.token # bearer token; default: none
//	  poll_interval: 10s       # duration: polling for remote kill requests,
//	                           # 0 = never
//	  timeout: 10s             # duration > 0: one HTTP request
//	  max_outbox: 10000        # count >= 1: undelivered certificates kept;
//	                           # past it new ones are refused and counted
//	gateway:                   # default: off. One LLM gateway for every
//	  upstreams: [anthropic=https://api.anthropic.com]  # agent (the handle
//	  key_files: {anthropic: /etc/hermeskill/anthropic.key}  # says which);
//	  prices: /etc/hermeskill/prices.yaml  # the keys of an agent file's
//	  listen: 127.0.0.1:0      # gateway section, see above
//	containment: auto          # auto (cgroup v2 where writable, else process
//	                           # group) | cgroup (cgroup or fail) | pgroup
//	audit: {max_bytes: 64MiB, keep: 5}  # rotation of audit.jsonl: size (0 =
//	                           # never rotate), count of rotated files kept
//	logs: {max_bytes: 10MiB, keep: 3}   # rotation of the agents' output logs
//	heartbeat_rate: 1000       # count >= 1: datagrams per second per agent
//	                           # before the rest are dropped and counted
//	defaults:                  # agent keys every agent file inherits: labels,
//	  checks:                  # user, env, mode, after_kill, restart,
//	    heartbeat_timeout: 30s # escalation, checks (not id, command, cwd)
//
// # Defaults and merging
//
// An agent's value is, in order of precedence: the flag (supervise), the
// agent file, the daemon's defaults section, the built-in default. Merging
// goes key by key: escalation: {coop_grace: 2s} in an agent file keeps the
// other escalation keys of the defaults, and so does restart and each
// timeout in checks. labels and env are merged (the agent's keys win). A
// threshold check (memory, cpu_spin, procs, fds, tokens, cost, tool_loop,
// error_streak, steps) is one value: set in the agent file it replaces the
// defaults' check as a whole, and memory: {} (or memory: with no value)
// turns an inherited check off; heartbeat_timeout: 0 does the same for a
// timeout. A flag sets one key: --max-rss 2GiB sets memory.kill and keeps
// the file's memory.warn.
package config
