// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/denials"
	"github.com/hermeskill/hermeskilld/internal/escalate"
	"github.com/hermeskill/hermeskilld/internal/fault"
	"github.com/hermeskill/hermeskilld/internal/gateway"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/keeper"
	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// Run is one supervised agent, from start to certificate. Its loop
// goroutine owns the run's decisions; Run's methods only post requests to
// it or read what it published, so none of them waits on the agent.
type Run struct {
	o    Options
	id   string
	log  *zap.Logger
	host string

	sock   *heartbeat.Socket
	guard  *keeper.Run
	marker string        // KEY=VALUE every process of the run inherits (the keeper finds them by it)
	jrnl   *journalState // nil without Options.JournalDir
	// watchStop ends the membership watch (process-group runs with a
	// keeper); watchDone is closed once it has.
	watchStop, watchDone chan struct{}
	grant                *gateway.Grant
	meters               *meterQueue
	proc                 *procsup.Process
	tree                 *procsup.Tree
	treeReady            chan struct{}
	cg                   *cgroup.Group
	confinement          string // the agent's Landlock domain and network (Status.Confinement)
	denials              *denials.Counter
	denialsTree          atomic.Pointer[procsup.Tree] // the tree, for the denials' reader to attribute pids
	net                  network                      // the agent's own network namespace (gateway-only, allowlist)
	egressQ              *egressQueue                 // what the egress proxy did (allowlist); nil without
	stdout               *stream
	stderr               *stream
	sampler              sampler

	// Touched only from the loop goroutine (through effects), and the
	// autopsy from the ladder it starts, before the loop reads it.
	killID      string // the kill's event id, once decided: the certificate's id
	triggeredAt time.Time
	autopsy     []procfs.Proc
	external    bool

	loop      *loop
	hurry     chan struct{}
	hurryOnce sync.Once

	// internal is the first panic recovered in code serving this run
	// (fault): the run is killed for internal_error, and its certificate
	// carries it. faults tells the loop of one recovered elsewhere (the
	// gateway's metering, the daemon's slot).
	internal atomic.Pointer[fault.Error]
	faults   chan *fault.Error
	// climbing is the ladder in flight (set by the loop's goroutine),
	// which a loop that panicked waits for rather than start another.
	climbing *ladderRun
	// ack is the acknowledgement of the STOP directive, once sent.
	ack *stopAck
	// stopping is set once a ladder climbs (Stopping).
	stopping atomic.Bool
	// pausedNow is set while a pause freezes the tree (Paused).
	pausedNow atomic.Bool

	done    chan struct{}
	outcome Outcome
}

type killReq struct {
	operator, reason string
	// check, when set, is a stop the host decided (HostStop), observed
	// what it saw; operator is then unused.
	check    symptoms.Check
	observed string
}

var _ effects = (*Run)(nil)

// Start starts the agent and supervises it until it is gone; Wait returns
// how it ended. An error means the agent never started; a *procsup.StartError
// carries the shell status (126/127).
func Start(o Options) (*Run, error) {
	a := o.Agent
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("agent", a.ID))
	host, _ := os.Hostname()
	r := &Run{
		o: o, id: a.ID, log: log, host: host,
		treeReady: make(chan struct{}),
		hurry:     make(chan struct{}),
		ack:       newStopAck(),
		done:      make(chan struct{}),
		faults:    make(chan *fault.Error, 1),
	}
	if err := r.start(); err != nil {
		r.abandon()
		return nil, err
	}
	metered := r.grant != nil
	engine := symptoms.New(engineConfig(a, metered), r.proc.Started())
	base := Status{ID: a.ID, PID: r.proc.PID(), Containment: r.tree.Mode(), Confinement: r.confinement, Started: r.proc.Started(), Socket: r.sock.Path(),
		StreamSocket: r.sock.StreamPath()}
	r.loop = newLoop(log, a, engine, r, base, r.sock.C(), r.proc.Done())
	r.loop.metered, r.loop.meters, r.loop.faults = metered, r.meters, r.faults
	r.loop.egressQ = r.egressQ
	r.loop.blind.after = o.blindAfter
	r.emit(Event{Type: EventStarted})
	go func() {
		defer close(r.done)
		r.outcome = r.supervise()
	}()
	return r, nil
}

// supervise runs the loop; a panic in it ends this run only (afterPanic).
func (r *Run) supervise() (out Outcome) {
	defer func() {
		if v := recover(); v != nil {
			out = r.afterPanic(fault.Recovered(fault.RunLoop, v))
		}
	}()
	return r.loop.run()
}

// afterPanic ends a run whose loop panicked: the agent is killed (fail
// closed) for internal_error — or, when a ladder was climbing already, by
// that ladder — and the run is recorded with the panic in its
// certificate. Should that panic too, the tree gets SIGKILL.
func (r *Run) afterPanic(e *fault.Error) (out Outcome) {
	r.log.Error("internal error: the run's loop panicked; the agent is killed",
		zap.String("panic", e.Panic), zap.String("stack", e.Stack))
	r.internal.CompareAndSwap(nil, e)
	s := internalSymptom(e, time.Now())
	trigger := &s
	defer func() {
		if v := recover(); v != nil {
			e2 := fault.Recovered(fault.RunLoop, v)
			r.log.Error("internal error: the run's end panicked too; SIGKILL of the tree",
				zap.String("panic", e2.Panic), zap.String("stack", e2.Stack))
			res := r.killNow(nil)
			out = Outcome{Exit: r.proc.Status(), Killed: true, Trigger: trigger, Reached: res.Reached}
		}
	}()
	l := r.loop
	l.recent = append(l.recent, s)
	r.emit(Event{Type: EventSymptom, Symptom: &s})
	var res escalate.Result
	if c := r.climbing; c != nil {
		<-c.done
		res = c.res
		if l.trigger != nil {
			trigger = l.trigger
		}
	} else {
		l.kill(s)
		l.publish()
		res = <-l.ladder
	}
	out = r.finish(&res, trigger, l.runState())
	l.state = StateExited
	l.publish()
	return out
}

// Fail kills the run for an internal error recovered in code serving it
// (the gateway's metering of its requests, the daemon's slot): check
// internal_error, in every mode. The first one is the certificate's.
func (r *Run) Fail(e *fault.Error) {
	r.internal.CompareAndSwap(nil, e)
	select {
	case r.faults <- e:
	default: // one is pending: the run is being killed for it
	}
}

// internalSymptom is the terminal symptom of the panic e.
func internalSymptom(e *fault.Error, at time.Time) symptoms.Symptom {
	return symptoms.Symptom{At: at, Check: symptoms.InternalError, Severity: symptoms.Terminal,
		Observed: e.Component,
		Message:  "hermeskilld's " + e.Component + " panicked serving this run: " + e.Panic + " (the stack is in the certificate)"}
}

func (r *Run) start() error {
	o, a := r.o, r.o.Agent
	defer close(r.treeReady)
	uid, gid := -1, -1
	if o.Credential != nil {
		uid, gid = int(o.Credential.Uid), int(o.Credential.Gid)
	}
	if err := heartbeat.PrepareDir(o.SocketDir, uid, gid); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	sockPath := filepath.Join(o.SocketDir, heartbeat.SocketName)
	streamPath := filepath.Join(o.SocketDir, heartbeat.StreamName)
	sock, err := heartbeat.Listen(heartbeat.Config{
		Path: sockPath, StreamPath: streamPath, UID: uid, GID: gid,
		Auth: heartbeat.AuthFunc(r.authenticate), Rate: o.HeartbeatRate, Poller: o.Poller,
		Ready: r.treeReady, // a datagram can arrive before Start has the pid
	})
	if err != nil {
		return fmt.Errorf("heartbeat socket: %w", err)
	}
	r.sock = sock

	cgFD := 0
	if o.Cgroups != nil {
		g, err := o.Cgroups.Create(a.ID)
		if err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
		r.cg, cgFD = g, g.FD()
	}
	if r.stdout, err = newStream(o.StdoutDirect, o.StdoutSink); err == nil {
		r.stderr, err = newStream(o.StderrDirect, o.StderrSink)
	}
	if err != nil {
		return err
	}
	base, extra := os.Environ(), a.Env
	var stripped strippedVars
	if o.Gateway != nil {
		base, extra, stripped = withoutProviderVars(base, extra)
	}
	env := procsup.AgentEnv(base, extra, a.ID, sockPath, streamPath, a.Checks.HeartbeatTimeout)
	if o.Gateway != nil {
		// The provider keys stay here: the agent gets the gateway's base
		// URLs and a handle of this run only.
		r.meters = newMeterQueue()
		r.meters.fail = r.Fail
		r.grant = o.Gateway.Grant(a.ID, r.meters)
		r.grant.SetBudget(budget(a))
		r.grant.SetPools(o.Pools...)
		given := r.grant.Env()
		env = append(env, given...)
		logStripped(r.log, stripped, given)
	}
	if r.cg == nil {
		// The keeper finds them by the socket every one of them inherits
		// in its environment.
		r.guard = o.Keeper.Guard(procsup.EnvSocket, sockPath)
		r.marker = procsup.EnvSocket + "=" + sockPath
	}
	confine, err := confinement(a, o.Runtime.LandlockABI())
	if err != nil {
		return err
	}
	// Before the fork, the keeper must exist and have been told this run
	// (or its cgroups): should we die at any moment from then on, it
	// kills the agent's processes, once it runs if it does not yet. An
	// agent in a Landlock domain cannot open the descriptors of a keeper
	// not yet undumpable (ptrace access outside the domain is refused),
	// so it need not wait for the keeper's own start; an unconfined one
	// does.
	wait, early := o.Keeper.Ready, confine.Restricts()
	if early {
		wait = o.Keeper.Forked
	}
	if err := wait(); err != nil {
		return fmt.Errorf("%w (it kills the agent's processes should hermeskilld die; without it they could outlive a SIGKILL)", err)
	}
	if err := r.openNetwork(a); err != nil {
		return err
	}
	r.confinement = describeConfinement(confine, r.net.ns != nil)
	if err := r.trackDenials(a, confine); err != nil {
		return err
	}
	if r.net.proxy != nil {
		env = proxyEnv(env, r.net.proxyURL)
	}
	proc, err := o.Runtime.Start(procsup.Spec{
		Argv: a.Command, Env: env, Dir: a.Cwd,
		Stdin: o.Stdin, Stdout: r.stdout.child, Stderr: r.stderr.child, Foreground: o.Foreground,
		Credential: o.Credential, CgroupFD: cgFD, Landlock: confine, NetNS: r.net.fd(),
	})
	if err != nil {
		return err
	}
	r.proc = proc
	if early {
		go r.watchKeeper()
	}
	r.stdout.start()
	r.stderr.start()
	r.tree = procsup.NewTree(o.Runtime, proc, procsup.TreeOptions{AgentID: a.ID, Cgroup: r.cg, Exclusive: o.Exclusive,
		OnMember: r.guard.Member})
	r.denialsTree.Store(r.tree)
	r.guard.Spawned(proc.PID(), r.tree.MainStartTicks())
	if r.cg == nil && r.guard != nil && o.Exclusive {
		// supervise only: the daemon's many trees would keep its scanner
		// busy (they share it); there the samples tell the keeper.
		r.watchStop, r.watchDone = make(chan struct{}), make(chan struct{})
		go r.watchMembers()
	}
	r.sock.SetMainPID(proc.PID())
	if r.grant != nil {
		// The handle is good only from the run's own processes: any
		// process of the agent's user can read it from the agent's
		// environment.
		tree := r.tree
		r.grant.SetMembers(func() []int { pids, _ := tree.PIDs(); return pids })
	}
	r.journalBegin(runState{agent: a})
	if r.net.proxy != nil {
		r.log.Info("egress proxy serving the agent's namespace", zap.String("proxy", r.net.proxyURL), zap.Strings("allow", a.Allow))
	}
	r.log.Info("agent started", zap.Int("pid", proc.PID()), zap.Strings("command", a.Command),
		zap.String("containment", r.tree.Mode()), zap.String("confinement", r.confinement), zap.String("socket", sockPath), zap.String("stream_socket", streamPath))
	return nil
}

// watchKeeper stops the run should the keeper, forked before the agent
// but not yet running then, fail to start: fail closed, the agent is not
// left to run unguarded.
func (r *Run) watchKeeper() {
	err := r.o.Keeper.Up()
	if err == nil {
		return
	}
	r.log.Error("the keeper did not start; stopping the agent", zap.Error(err))
	r.HostStop(symptoms.InternalError, "keeper",
		"hermeskilld's keeper did not start ("+err.Error()+"): the agent's processes could have outlived a SIGKILL of hermeskilld")
}

// abandon releases what start acquired when the agent did not start.
func (r *Run) abandon() {
	if r.stdout != nil {
		r.stdout.abort()
	}
	if r.stderr != nil {
		r.stderr.abort()
	}
	if r.sock != nil {
		r.sock.Close()
	}
	if r.cg != nil {
		_ = r.cg.Remove()
	}
	r.guard.End()
	if r.grant != nil {
		r.grant.Close()
	}
	r.closeNetwork()
	os.Remove(r.o.SocketDir)
}

// authenticate is the heartbeat socket's Authenticator: tree membership.
func (r *Run) authenticate(pid int) heartbeat.Verdict {
	select {
	case <-r.treeReady:
	default:
		// Never waited for: the socket is read only once the tree is
		// ready (heartbeat.Config.Ready), and a poller that waited here
		// would hold back every other agent's heartbeats.
		return heartbeat.NotMember
	}
	if r.tree == nil {
		return heartbeat.NotMember
	}
	if pid == r.proc.PID() {
		// The main process, most senders' pid: until we reap it (even
		// as a zombie) its pid cannot be given to anyone else, so this
		// needs no /proc read.
		select {
		case <-r.proc.Done():
			return heartbeat.Gone
		default:
			return heartbeat.Member
		}
	}
	ok, err := r.tree.Contains(pid)
	switch {
	case errors.Is(err, procfs.ErrNoProcess):
		return heartbeat.Gone
	case err != nil || !ok:
		return heartbeat.NotMember
	}
	return heartbeat.Member
}

// InTree reports whether pid may be a process of the agent's tree: a
// member, or one that could not be told apart (gone). Control requests
// from the agent itself are refused by it.
func (r *Run) InTree(pid int) bool { return r.authenticate(pid) != heartbeat.NotMember }

// Kill asks for a manual kill through the ladder. A kill already in
// progress wins; this one is logged.
func (r *Run) Kill(operator, reason string) {
	select {
	case r.loop.kills <- killReq{operator: operator, reason: reason}:
	case <-r.done:
	default: // one is pending already
	}
}

// HostStop kills the agent through the ladder for a reason of the host's
// own (check symptoms.ControlPlaneUnreachable): the certificate's trigger
// is check with reason, observed what the host saw, in every mode.
func (r *Run) HostStop(check symptoms.Check, observed, reason string) {
	select {
	case r.loop.kills <- killReq{reason: reason, check: check, observed: observed}:
	case <-r.done:
	default: // one is pending already
	}
}

// Exceed stops the run for a limit decided outside it, as one of its own
// checks would (a terminal symptom s of s.Check, with its observed value,
// threshold and message; in shadow mode a shadow certificate only): the
// daemon's budgets across runs (check budget). Only the first one
// pending counts.
func (r *Run) Exceed(s symptoms.Symptom) {
	select {
	case r.loop.limits <- s:
	case <-r.done:
	default: // one is pending already
	}
}

// SetPools puts the run's next requests at the gateway in pools, the
// budgets across runs it belongs to now (the daemon's file changed); a
// run without the gateway has none.
func (r *Run) SetPools(pools ...*gateway.Pool) {
	if r.grant != nil {
		r.grant.SetPools(pools...)
	}
}

// Hurry skips the remaining graces of the ladder, now or when it starts,
// straight to SIGKILL (a second Ctrl-C).
func (r *Run) Hurry() { r.hurryOnce.Do(func() { close(r.hurry) }) }

// Forward sends sig to the agent's main process (SIGHUP, SIGUSR1, … sent
// to hermeskilld are passed on, as tini does).
func (r *Run) Forward(sig syscall.Signal) error { return r.proc.Signal(sig) }

// Reconfigure applies a new agent file: checks and escalation at once;
// command, user, env and cwd only at the next start.
func (r *Run) Reconfigure(a *config.Agent) {
	select {
	case <-r.loop.reconf: // drop a pending older one
	default:
	}
	select {
	case r.loop.reconf <- a:
	case <-r.done:
	}
}

// PID is the main process's pid.
func (r *Run) PID() int { return r.proc.PID() }

// Stopping reports whether a ladder climbs or climbed: the agent is being
// stopped (a kill, or the end of what its main process left behind).
func (r *Run) Stopping() bool { return r.stopping.Load() }

// Main is the agent's main process.
func (r *Run) Main() *procsup.Process { return r.proc }

// Done is closed when the run is over (certificate written).
func (r *Run) Done() <-chan struct{} { return r.done }

// Wait blocks until the run is over and returns how it ended.
func (r *Run) Wait() Outcome {
	<-r.done
	return r.outcome
}

// Status is the run as its loop last published it, with its usage as
// the gateway counts it now: it never waits for the loop, whatever the run
// is busy with.
func (r *Run) Status() Status {
	st := *r.loop.status.Load()
	st.Usage = r.usage(st.Agent)
	return st
}

func (r *Run) emit(e Event) {
	if r.o.OnEvent == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.AgentID = r.id
	if r.o.Agent != nil {
		e.Labels = r.o.Agent.Labels
	}
	if r.proc != nil {
		e.PID = r.proc.PID()
	}
	r.o.OnEvent(e)
}

// memberWatch is how often a process-group run's tree is listed for the
// keeper. Without a cgroup the keeper finds a process that left the
// agent's group and session and cleared its environment only by having
// been told it was in the tree: the samples (every few seconds when idle)
// would leave it that long unknown, free to outlive a SIGKILL of
// hermeskilld.
const memberWatch = 200 * time.Millisecond

// watchMembers lists the tree every memberWatch until watchStop; each new
// member reaches the keeper (Tree's OnMember, Run.Member).
func (r *Run) watchMembers() {
	defer close(r.watchDone)
	t := time.NewTicker(memberWatch)
	defer t.Stop()
	for {
		select {
		case <-r.watchStop:
			return
		case <-t.C:
			_, _ = r.tree.PIDs()
		}
	}
}

// stopWatch ends the membership watch, if any.
func (r *Run) stopWatch() {
	if r.watchStop != nil {
		close(r.watchStop)
		<-r.watchDone
		r.watchStop = nil
	}
}
