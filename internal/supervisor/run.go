package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/cgroup"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/keeper"
	"github.com/hermeskill/hermeskilld/internal/procfs"
	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

// SocketName is the heartbeat socket's name inside Options.SocketDir.
const SocketName = "notify.sock"

// Run is one supervised agent, from start to certificate.
type Run struct {
	o    Options
	a    *config.Agent // owned by the loop goroutine; replaced on Reconfigure
	id   string
	log  *zap.Logger
	host string

	sock      *heartbeat.Socket
	guard     *keeper.Run
	proc      *procsup.Process
	tree      *procsup.Tree
	treeReady chan struct{}
	cg        *cgroup.Group
	stdout    *stream
	stderr    *stream
	engine    *symptoms.Engine
	sampler   sampler

	// Set by the loop goroutine once a terminal symptom is acted on.
	trigger     *symptoms.Symptom
	triggeredAt time.Time
	autopsy     []procfs.Proc
	shadowed    bool // a check fired in shadow mode: this run is never enforced
	dumpPID     int // the sender of DUMP_SIGNAL
	shadowCerts []string

	killCh    chan killReq
	reconfCh  chan *config.Agent
	statusCh  chan chan Status
	hurry     chan struct{}
	hurryOnce sync.Once

	done    chan struct{}
	final   Status
	outcome Outcome
}

type killReq struct {
	operator, reason string
}

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
		o: o, a: a, id: a.ID, log: log, host: host,
		treeReady: make(chan struct{}),
		killCh:    make(chan killReq, 1),
		reconfCh:  make(chan *config.Agent, 1),
		statusCh:  make(chan chan Status),
		hurry:     make(chan struct{}),
		done:      make(chan struct{}),
	}
	if err := r.start(); err != nil {
		r.cleanup()
		return nil, err
	}
	go r.loop()
	return r, nil
}

func (r *Run) start() error {
	o, a := r.o, r.a
	uid, gid := -1, -1
	if o.Credential != nil {
		uid, gid = int(o.Credential.Uid), int(o.Credential.Gid)
	}
	if err := heartbeat.PrepareDir(o.SocketDir, uid, gid); err != nil {
		close(r.treeReady)
		return fmt.Errorf("socket directory: %w", err)
	}
	sockPath := filepath.Join(o.SocketDir, SocketName)
	sock, err := heartbeat.Listen(heartbeat.Config{
		Path: sockPath, UID: uid, GID: gid,
		Auth: heartbeat.AuthFunc(r.authenticate), Rate: o.HeartbeatRate,
	})
	if err != nil {
		close(r.treeReady)
		return fmt.Errorf("heartbeat socket: %w", err)
	}
	r.sock = sock

	cgFD := 0
	if o.Cgroups != nil {
		g, err := o.Cgroups.Create(a.ID)
		if err != nil {
			close(r.treeReady)
			return fmt.Errorf("cgroup: %w", err)
		}
		r.cg, cgFD = g, g.FD()
	}
	if r.stdout, err = newStream(o.StdoutDirect, o.StdoutSink); err == nil {
		r.stderr, err = newStream(o.StderrDirect, o.StderrSink)
	}
	if err != nil {
		close(r.treeReady)
		return err
	}
	env := procsup.AgentEnv(os.Environ(), a.Env, a.ID, sockPath, a.Checks.HeartbeatTimeout)
	if r.cg == nil {
		// Before the fork: should we die at any moment from now on, the
		// keeper finds the agent's processes by the socket every one of
		// them inherits in its environment.
		r.guard = o.Keeper.Guard(procsup.EnvSocket, sockPath)
	}
	proc, err := o.Runtime.Start(procsup.Spec{
		Argv: a.Command, Env: env, Dir: a.Cwd,
		Stdin: o.Stdin, Stdout: r.stdout.child, Stderr: r.stderr.child,
		Credential: o.Credential, CgroupFD: cgFD,
	})
	if err != nil {
		close(r.treeReady)
		return err
	}
	r.proc = proc
	r.stdout.start()
	r.stderr.start()
	r.tree = procsup.NewTree(o.Runtime, proc, procsup.TreeOptions{AgentID: a.ID, Cgroup: r.cg, Exclusive: o.Exclusive,
		OnMember: r.guard.Member})
	r.guard.Spawned(proc.PID(), r.tree.MainStartTicks())
	close(r.treeReady)
	r.engine = symptoms.New(r.engineConfig(a), proc.Started())
	r.log.Info("agent started", zap.Int("pid", proc.PID()), zap.Strings("command", a.Command),
		zap.String("containment", r.tree.Mode()), zap.String("socket", sockPath))
	r.emit(Event{Type: EventStarted})
	return nil
}

// cleanup releases what start acquired when the agent did not start.
func (r *Run) cleanup() {
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
	os.Remove(r.o.SocketDir)
}

func (r *Run) engineConfig(a *config.Agent) symptoms.Config {
	return symptoms.Config{Checks: a.Checks, StopTimeout: a.Escalation.TermGrace, Shadow: a.Mode == config.ModeShadow}
}

// authenticate is the heartbeat socket's Authenticator: tree membership.
func (r *Run) authenticate(pid int) heartbeat.Verdict {
	<-r.treeReady // a datagram can arrive before Start has the pid
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

// Kill asks for a manual kill through the ladder. A kill already in
// progress wins; this one is logged.
func (r *Run) Kill(operator, reason string) {
	select {
	case r.killCh <- killReq{operator, reason}:
	case <-r.done:
	default: // one is pending already
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
	case <-r.reconfCh: // drop a pending older one
	default:
	}
	select {
	case r.reconfCh <- a:
	case <-r.done:
	}
}

// PID is the main process's pid.
func (r *Run) PID() int { return r.proc.PID() }

// Done is closed when the run is over (certificate written).
func (r *Run) Done() <-chan struct{} { return r.done }

// Wait blocks until the run is over and returns how it ended.
func (r *Run) Wait() Outcome {
	<-r.done
	return r.outcome
}

// Status returns a snapshot of the run.
func (r *Run) Status() Status {
	ch := make(chan Status, 1)
	select {
	case r.statusCh <- ch:
		return <-ch
	case <-r.done:
		return r.final
	}
}

func (r *Run) emit(e Event) {
	if r.o.OnEvent == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.AgentID = r.id
	if r.proc != nil {
		e.PID = r.proc.PID()
	}
	r.o.OnEvent(e)
}
