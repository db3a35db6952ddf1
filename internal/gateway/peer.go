// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// A handle is a bearer credential, and any process of the agent's user
// can read it from the agent's environment (/proc/PID/environ). So a grant
// with members (Grant.SetMembers) is honoured only on connections whose
// client socket is held by one of its run's processes: the kernel says
// which socket is the other end of a loopback connection (/proc/net/tcp:
// its inode), and the run's processes' descriptors say who holds it.

// conn is what the gateway knows of one client connection; verified is
// the grant it was found to belong to, so that a keep-alive connection is
// looked up once.
type conn struct {
	local, remote net.Addr
	diag          *diagSocket // where to look the client up; nil: our namespace

	mu       sync.Mutex
	verified *Grant
}

type connKey struct{}

// connContext puts the connection's addresses in its requests' context.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &conn{local: c.LocalAddr(), remote: c.RemoteAddr(), diag: nsDiag(c)})
}

// nsDiag is the sock_diag socket of c's network namespace when c was
// accepted in an agent's (ServeIn), nil otherwise.
func nsDiag(c net.Conn) *diagSocket {
	for c != nil {
		if nc, ok := c.(*nsConn); ok {
			return nc.diag
		}
		u, ok := c.(interface{ Unwrap() net.Conn })
		if !ok {
			return nil
		}
		c = u.Unwrap()
	}
	return nil
}

// errNotMember is a connection from outside the grant's run.
var errNotMember = errors.New("the connection is not from a process of the handle's run")

// checkPeer returns nil when gr has no members to check against, or when
// the request's connection is held by one of them.
func checkPeer(ctx context.Context, gr *Grant) error {
	members := gr.membersFunc()
	if members == nil {
		return nil
	}
	c, _ := ctx.Value(connKey{}).(*conn)
	if c == nil {
		return errors.New("no connection to check") // fail closed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.verified == gr {
		return nil
	}
	local, lok := c.local.(*net.TCPAddr)
	remote, rok := c.remote.(*net.TCPAddr)
	if !lok || !rok {
		return fmt.Errorf("not a TCP connection (%s)", c.remote)
	}
	// The client's socket: local address the connection's remote one.
	inode, _, err := socketEntry(c.diag, remote, local)
	if err != nil {
		return err
	}
	if !holdsSocket(members(), inode) {
		return errNotMember
	}
	c.verified = gr
	return nil
}

// procNetEntry is socketEntry read from /proc/net/tcp or tcp6 (this
// network namespace's), the whole table for one socket.
func procNetEntry(local, remote *net.TCPAddr) (inode uint64, uid string, err error) {
	file, l, r := "/proc/net/tcp6", hexAddr6(local), hexAddr6(remote)
	if local.IP.To4() != nil && remote.IP.To4() != nil {
		file, l, r = "/proc/net/tcp", hexAddr4(local), hexAddr4(remote)
	}
	f, err := os.Open(file)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[1] != l || fs[2] != r {
			continue
		}
		inode, err := strconv.ParseUint(fs[9], 10, 64)
		return inode, fs[7], err
	}
	if err := sc.Err(); err != nil {
		return 0, "", err
	}
	return 0, "", fmt.Errorf("no socket %s -> %s in %s", local, remote, file)
}

// connPeer names the local user that holds the client end of c, for the
// connection bounds: "uid N", or "unknown" (shared by every connection
// whose owner cannot be read, so that they too are bounded together).
func connPeer(c net.Conn) string {
	local, lok := c.LocalAddr().(*net.TCPAddr)
	remote, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok {
		return "unknown"
	}
	if _, uid, err := socketEntry(nsDiag(c), remote, local); err == nil {
		return "uid " + uid
	}
	return "unknown"
}

// hexAddr4 is addr as /proc/net/tcp writes it: the address as one 32-bit
// word in the host's byte order, in hex, a colon, the port in hex.
func hexAddr4(a *net.TCPAddr) string {
	return fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(a.IP.To4()), a.Port)
}

// hexAddr6 is addr as /proc/net/tcp6 writes it: four 32-bit words, each
// in the host's byte order.
func hexAddr6(a *net.TCPAddr) string {
	ip := a.IP.To16()
	var b strings.Builder
	for i := 0; i < 16; i += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(ip[i:i+4]))
	}
	fmt.Fprintf(&b, ":%04X", a.Port)
	return b.String()
}

// holdsSocket reports whether one of pids has socket inode open.
func holdsSocket(pids []int, inode uint64) bool {
	want := "socket:[" + strconv.FormatUint(inode, 10) + "]"
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
		f, err := os.Open(dir)
		if err != nil {
			continue
		}
		names, _ := f.Readdirnames(-1)
		f.Close()
		for _, n := range names {
			if target, err := os.Readlink(dir + n); err == nil && target == want {
				return true
			}
		}
	}
	return false
}
