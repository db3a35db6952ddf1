// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"fmt"
	"net"
	"os"

	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/egress"
	"github.com/hermeskill/hermeskilld/internal/landlock"
	"github.com/hermeskill/hermeskilld/internal/netns"
)

// devices are writable beside an agent's writable paths, where they
// exist: what nearly every program writes to (output thrown away, its
// terminal, pseudo-terminals it opens).
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts"}

// confinement is the Landlock domain agent a runs in, on a kernel of
// Landlock ABI abi:
//   - its signals scoped wherever the kernel can scope them, so that an
//     agent of our own user cannot stop, kill or trace us or the keeper
//     (without that ABI it runs as before, and status and certificate say
//     so);
//   - with writable paths, writes confined beneath them and the devices;
//     a kernel without Landlock is an error: the agent is not started
//     with its files open.
func confinement(a *config.Agent, abi int) (landlock.Ruleset, error) {
	r := landlock.Ruleset{ScopeSignals: abi >= landlock.SignalsABI}
	if a.Writable == nil {
		return r, nil
	}
	if abi < landlock.FilesABI {
		return r, fmt.Errorf("writable: %w: the kernel has no Landlock (Linux 5.13 or later, with landlock in its lsm= list); the agent is not started with its files open",
			landlock.ErrUnsupported)
	}
	r.Writable = append([]string{}, a.Writable...)
	for _, d := range devices {
		if _, err := os.Stat(d); err == nil {
			r.Writable = append(r.Writable, d)
		}
	}
	return r, nil
}

// describeConfinement is Status.Confinement: r's parts ("signals",
// "files"), then "network" for a namespace of its own, joined by "+";
// "none" when nothing confines the agent.
func describeConfinement(r landlock.Ruleset, ownNetwork bool) string {
	if !ownNetwork {
		return r.String()
	}
	if !r.Restricts() {
		return "network"
	}
	return r.String() + "+network"
}

// network is the agent's own network namespace (network: gateway-only,
// allowlist), made before the fork, with the gateway served inside it and,
// for allowlist, the egress proxy.
type network struct {
	ns       *netns.NS
	gw       net.Listener  // the gateway's listener in ns; nil without a gateway
	proxy    *egress.Proxy // network: allowlist's egress proxy
	proxyURL string        // where the agent reaches it: http://127.0.0.1:PORT
}

// fd is the namespace for procsup.Spec.NetNS; 0 for the host's.
func (n *network) fd() int {
	if n.ns == nil {
		return 0
	}
	return n.ns.FD()
}

// openNetwork gives a gateway-only or allowlist agent its namespace: only
// loopback, up, where the gateway listens at its own address, so that the
// base URLs in the agent's environment reach it, and for allowlist the
// egress proxy; the heartbeat sockets are files, which a network
// namespace does not hide. What cannot be set up is an error: the agent
// is never started with the host's network instead.
func (r *Run) openNetwork(a *config.Agent) error {
	if a.Network != config.NetworkGatewayOnly && a.Network != config.NetworkAllowlist {
		return nil
	}
	ns, err := netns.New()
	if err != nil {
		return fmt.Errorf("network: %s: %w; the agent is not started with the host's network", a.Network, err)
	}
	r.net.ns = ns
	if g := r.o.Gateway; g != nil {
		ln, err := ns.Listen("tcp", g.Addr())
		if err != nil {
			return fmt.Errorf("network: %s: the gateway in the agent's namespace: %w", a.Network, err)
		}
		r.net.gw = g.ServeIn(ln, ns.Do)
	}
	if a.Network == config.NetworkAllowlist {
		return r.openEgress(a)
	}
	return nil
}

// closeNetwork closes the gateway's listener in the agent's namespace and
// lets the namespace go (the kernel frees it with its last process and
// socket).
func (r *Run) closeNetwork() {
	if r.net.proxy != nil {
		_ = r.net.proxy.Close()
	}
	if r.net.gw != nil {
		_ = r.net.gw.Close()
	}
	if r.net.ns != nil {
		_ = r.net.ns.Close()
	}
}
