// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ParseDuration parses a duration in Go syntax ("1.5s", "300ms", "2h45m")
// or a bare "0". A bare number other than 0 is an error (the unit is
// never guessed), as is a negative duration.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty duration")
	}
	if strings.Trim(t, "0123456789.") == "" && t != "0" {
		return 0, fmt.Errorf("bad duration %q: missing unit (e.g. %ss)", s, t)
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: want Go syntax such as 30s, 1.5s, 500ms, 2h30m", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("bad duration %q: negative", s)
	}
	return d, nil
}

// FormatDuration is the inverse of ParseDuration for messages: "0" for 0,
// else time.Duration's own form with trailing zero units removed ("1m", not
// "1m0s").
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// sizeUnits are the accepted size suffixes. Only unambiguous spellings: the
// binary IEC units and the decimal SI units. "K", "G", "Gb" and friends are
// rejected because they mean different things to different tools.
var sizeUnits = map[string]int64{
	"B":   1,
	"KB":  1000,
	"MB":  1000 * 1000,
	"GB":  1000 * 1000 * 1000,
	"TB":  1000 * 1000 * 1000 * 1000,
	"PB":  1000 * 1000 * 1000 * 1000 * 1000,
	"EB":  1000 * 1000 * 1000 * 1000 * 1000 * 1000,
	"KiB": 1 << 10,
	"MiB": 1 << 20,
	"GiB": 1 << 30,
	"TiB": 1 << 40,
	"PiB": 1 << 50,
	"EiB": 1 << 60,
}

const sizeForms = "a number of bytes, or a number with one of B, KiB, MiB, GiB, TiB, PiB, EiB (binary) or KB, MB, GB, TB, PB, EB (decimal)"

// ParseSize parses a byte size: "4096" (bytes), "512MiB", "1.5GiB", "64KiB"
// (binary units: KiB, MiB, GiB, TiB, also PiB, EiB), "100MB" (decimal
// units: KB, MB, GB, TB, also PB, EB) or "512B". Units are case-sensitive; a space between number and unit
// is allowed. A fraction is allowed with a unit and rounded down to whole
// bytes. Negative sizes and sizes above 2^63-1 bytes are errors.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("bad size %q: negative", s)
	}
	if num == "" || num == "." {
		return 0, fmt.Errorf("bad size %q: want %s", s, sizeForms)
	}
	mult := int64(1)
	if unit != "" {
		m, ok := sizeUnits[unit]
		if !ok {
			return 0, fmt.Errorf("bad size %q: unknown unit %q (want %s)", s, unit, sizeForms)
		}
		mult = m
	}
	whole, frac, hasDot := strings.Cut(num, ".")
	if strings.Contains(frac, ".") {
		return 0, fmt.Errorf("bad size %q: want %s", s, sizeForms)
	}
	if hasDot && unit == "" {
		return 0, fmt.Errorf("bad size %q: a number of bytes must be whole", s)
	}
	n := int64(0)
	if whole != "" {
		w, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || w > math.MaxInt64/mult {
			return 0, fmt.Errorf("bad size %q: too large", s)
		}
		n = w * mult
	}
	if frac != "" {
		// f*mult could overflow (mult up to 2^60, f up to 10^9): split mult
		// into quotient and remainder by the denominator; both products fit.
		if len(frac) > 9 {
			frac = frac[:9]
		}
		f, err := strconv.ParseInt(frac, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad size %q: want %s", s, sizeForms)
		}
		den := int64(math.Pow10(len(frac)))
		part := mult/den*f + mult%den*f/den
		if n > math.MaxInt64-part {
			return 0, fmt.Errorf("bad size %q: too large", s)
		}
		n += part
	}
	return n, nil
}

var binaryUnits = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// FormatSize formats a byte count for messages with binary units and at
// most one decimal: 512 -> "512B", 1536 -> "1.5KiB", 2<<30 -> "2GiB",
// 1288490189 -> "1.2GiB". Exact multiples of a unit round-trip through
// ParseSize.
func FormatSize(n int64) string {
	if n < 0 {
		if n == math.MinInt64 {
			return "-8EiB"
		}
		return "-" + FormatSize(-n)
	}
	if n < 1024 {
		return strconv.FormatInt(n, 10) + "B"
	}
	u := 0
	for u+1 < len(binaryUnits) && n >= int64(1)<<(10*(u+1)) {
		u++
	}
	unit := int64(1) << (10 * u)
	if n%unit == 0 {
		return strconv.FormatInt(n/unit, 10) + binaryUnits[u]
	}
	v := math.Round(float64(n)/float64(unit)*10) / 10
	if v >= 1024 && u+1 < len(binaryUnits) {
		u++
		v = math.Round(float64(n)/float64(int64(1)<<(10*u))*10) / 10
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + binaryUnits[u]
}

// signalAliases are the other names signal(7) lists for the same numbers
// (x/sys/unix knows each signal by one name).
var signalAliases = map[string]syscall.Signal{
	"SIGIOT": syscall.SIGABRT, "SIGPOLL": syscall.SIGIO, "SIGCLD": syscall.SIGCHLD,
}

// standardSignal is the name of sig if it is one of the standard signals
// 1-31, else "".
func standardSignal(sig syscall.Signal) string {
	if sig < 1 || sig > 31 {
		return ""
	}
	return unix.SignalName(sig)
}

// ParseSignal parses a signal: a name with or without the SIG prefix
// ("SIGINT", "INT", case-insensitive), a number 1-31 ("2"), or "none",
// which returns 0 (no signal).
func ParseSignal(s string) (syscall.Signal, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	if t == "NONE" {
		return 0, nil
	}
	if n, err := strconv.Atoi(t); err == nil {
		if standardSignal(syscall.Signal(n)) != "" {
			return syscall.Signal(n), nil
		}
	} else {
		if !strings.HasPrefix(t, "SIG") {
			t = "SIG" + t
		}
		if sig, ok := signalAliases[t]; ok {
			return sig, nil
		}
		if sig := unix.SignalNum(t); standardSignal(sig) != "" {
			return sig, nil
		}
	}
	return 0, fmt.Errorf("unknown signal %q (want a name such as SIGINT or INT, a number 1-31, or none)", s)
}

// SignalName returns the name of sig as ParseSignal accepts it: "SIGINT",
// "none" for 0, and "signal N" for a number outside 1-31.
func SignalName(sig syscall.Signal) string {
	if sig == 0 {
		return "none"
	}
	if name := standardSignal(sig); name != "" {
		return name
	}
	return "signal " + strconv.Itoa(int(sig))
}
