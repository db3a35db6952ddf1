// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Allowlist is the destinations an agent may reach through its proxy
// (network: allowlist). Each entry is HOST:PORT, one of:
//
//	api.github.com:443     that name, on that port
//	*.pypi.org:443         any name below pypi.org, at any depth
//	                       (files.pypi.org, a.b.pypi.org), not pypi.org itself
//	203.0.113.7:443        that address, asked for as a literal
//	[2001:db8::1]:443      the same for IPv6
//	10.1.0.0/16:5432       any address of that range, asked for as a literal
//	                       or resolved from a listed name
//
// Names are matched as the client asked for them (the CONNECT authority,
// the absolute URI's host), case-insensitively and without a trailing
// dot; never by reverse DNS. An IP literal is matched by address and
// range entries only. The port must match exactly.
type Allowlist struct {
	entries []entry
	text    []string
}

type entry struct {
	name     string       // a name, lower case; "" for an address or range
	wildcard bool         // name is the suffix of *.name
	prefix   netip.Prefix // an address (a /32 or /128) or range
	port     uint16
}

// Parse reads allowlist entries; the error names the first bad one by
// its index.
func Parse(entries []string) (*Allowlist, error) {
	a := &Allowlist{text: append([]string(nil), entries...)}
	for i, s := range entries {
		e, err := parseEntry(s)
		if err != nil {
			return nil, fmt.Errorf("allow[%d]: %w", i, err)
		}
		a.entries = append(a.entries, e)
	}
	return a, nil
}

// ParseEntry checks one entry, as Parse does.
func ParseEntry(s string) error {
	_, err := parseEntry(s)
	return err
}

func parseEntry(s string) (entry, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return entry{}, fmt.Errorf("%q: must be HOST:PORT, such as api.github.com:443 or *.pypi.org:443", s)
	}
	host, portText := s[:i], s[i+1:]
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return entry{}, fmt.Errorf("%q: the port must be a number from 1 to 65535, got %q", s, portText)
	}
	e := entry{port: uint16(port)}
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
		if !strings.Contains(host, ":") {
			return entry{}, fmt.Errorf("%q: brackets are for IPv6 addresses", s)
		}
	} else if strings.Contains(host, ":") {
		return entry{}, fmt.Errorf("%q: an IPv6 address is written in brackets, such as [2001:db8::1]:443", s)
	}
	if strings.Contains(host, "/") {
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return entry{}, fmt.Errorf("%q: not an address range: %w", s, err)
		}
		e.prefix = p.Masked()
		return e, nil
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Zone() != "" {
			return entry{}, fmt.Errorf("%q: an address with a zone cannot be listed", s)
		}
		addr = addr.Unmap()
		e.prefix = netip.PrefixFrom(addr, addr.BitLen())
		return e, nil
	}
	if strings.Contains(host, ":") {
		return entry{}, fmt.Errorf("%q: not an IPv6 address", s)
	}
	name, wild := strings.CutPrefix(host, "*.")
	if err := checkName(name); err != nil {
		return entry{}, fmt.Errorf("%q: %w", s, err)
	}
	e.name, e.wildcard = canonicalName(name), wild
	return e, nil
}

// checkName accepts DNS names: labels of letters, digits, '-' and '_'
// (service names use it), 1-63 bytes each, 253 in all. A '*' anywhere
// but the leading "*." is refused: it would match nothing.
func checkName(name string) error {
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return errors.New("the host is empty")
	}
	if len(name) > 253 {
		return errors.New("the name is longer than 253 bytes")
	}
	for l := range strings.SplitSeq(name, ".") {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("the label %q must be 1 to 63 bytes", l)
		}
		for _, c := range []byte(l) {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				if c == '*' {
					return errors.New("a wildcard is only the leading label: *.example.com:443")
				}
				return fmt.Errorf("%q is not a character of a host name", c)
			}
		}
	}
	return nil
}

func canonicalName(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

// String is the entries as given, comma-separated.
func (a *Allowlist) String() string { return strings.Join(a.text, ", ") }

// Entries are the entries as given.
func (a *Allowlist) Entries() []string { return append([]string(nil), a.text...) }

// nameAllowed reports whether a name (canonical) on port is listed.
func (a *Allowlist) nameAllowed(name string, port uint16) bool {
	for _, e := range a.entries {
		if e.name == "" || e.port != port {
			continue
		}
		if e.wildcard && strings.HasSuffix(name, "."+e.name) || !e.wildcard && name == e.name {
			return true
		}
	}
	return false
}

// addrListed reports whether addr on port is covered by an address or
// range entry.
func (a *Allowlist) addrListed(addr netip.Addr, port uint16) bool {
	addr = addr.Unmap()
	for _, e := range a.entries {
		if e.name == "" && e.port == port && e.prefix.Contains(addr) {
			return true
		}
	}
	return false
}

// special are the ranges no listed name may resolve into (and no literal
// reach) unless an address or range entry covers the address: this host
// and its loopback, the private networks, link-local (where the cloud
// metadata services answer, 169.254.169.254 and fd00:ec2::254), shared
// address space (carrier-grade NAT), multicast and the unspecified and
// broadcast addresses. An IPv4-mapped IPv6 address is judged as its IPv4
// address.
var special = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
		"169.254.0.0/16", "100.64.0.0/10", "224.0.0.0/4", "255.255.255.255/32",
		"::/128", "::1/128", "fc00::/7", "fe80::/10", "ff00::/8",
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// specialRange is the range of special that holds addr, if any.
func specialRange(addr netip.Addr) (netip.Prefix, bool) {
	addr = addr.Unmap()
	for _, p := range special {
		if p.Contains(addr) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// rangeName says what kind of address a special range holds.
func rangeName(p netip.Prefix) string {
	switch p.String() {
	case "127.0.0.0/8", "::1/128":
		return "a loopback address"
	case "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7":
		return "a private address"
	case "169.254.0.0/16", "fe80::/10":
		return "a link-local address (cloud metadata services answer there)"
	case "100.64.0.0/10":
		return "a shared (carrier-grade NAT) address"
	case "224.0.0.0/4", "ff00::/8":
		return "a multicast address"
	}
	return "an unspecified or broadcast address"
}
