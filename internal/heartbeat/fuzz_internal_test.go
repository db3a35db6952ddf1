// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// FuzzCredentials reads arbitrary control messages as a datagram's: the
// sender chooses what it passes along (descriptors, its own credentials
// message), the kernel only makes sure the credentials are true. Whatever
// precedes them, the credentials message is found and read exactly; what
// is not one never panics. (closeFDs walks the same messages but closes
// what it finds, so it is not fuzzed here.)
func FuzzCredentials(f *testing.F) {
	creds := unix.UnixCredentials(&unix.Ucred{Pid: 4242, Uid: 1000, Gid: 1000})
	rights := unix.UnixRights(0, 1, 2)
	f.Add(creds, int32(1), uint32(0), uint32(0))
	f.Add(append(rights, creds...), int32(4194303), uint32(65534), uint32(100))
	f.Add(rights[:len(rights)-1], int32(-1), ^uint32(0), ^uint32(0))
	f.Add([]byte{}, int32(0), uint32(0), uint32(0))
	f.Add(creds[:unix.CmsgSpace(unix.SizeofUcred)-2], int32(7), uint32(1), uint32(2))
	f.Fuzz(func(t *testing.T, ctl []byte, pid int32, uid, gid uint32) {
		_, _ = credentials(ctl)

		want := unix.Ucred{Pid: pid, Uid: uid, Gid: gid}
		c := unix.UnixCredentials(&want)
		got, ok := credentials(c)
		require.True(t, ok)
		require.Equal(t, want, got)

		// After well-formed messages that are not credentials, found
		// still; after a malformed one, the walk stops without panicking.
		msgs, err := unix.ParseSocketControlMessage(ctl)
		whole := 0 // the bytes of the messages, aligned as the kernel aligns them
		for _, m := range msgs {
			whole += unix.CmsgSpace(len(m.Data))
		}
		if err == nil && len(msgs) > 0 && whole == len(ctl) {
			if _, isCred := credentials(ctl); !isCred {
				got, ok = credentials(append(append([]byte{}, ctl...), c...))
				require.True(t, ok)
				require.Equal(t, want, got)
			}
		}
	})
}
