// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ArgsHash returns the hex sha256 of args as canonical JSON, the value of
// TOOL_ARGS_SHA256. args goes through encoding/json first, so a struct and
// a map with the same JSON hash the same, and a json.RawMessage hashes as
// the value it encodes. The canonical form is what Python writes with
// json.dumps(value, sort_keys=True, separators=(",", ":"),
// ensure_ascii=False), encoded as UTF-8 — the Python client hashes exactly
// that, and so do other tools:
//
//   - object keys sorted (by code point), no whitespace, no trailing newline;
//   - strings in UTF-8 as they are: only '"', '\\' and the control characters
//     below U+0020 are escaped (\n, \r, \t, \b, \f, else \u00xx in lower
//     case); no \u escapes of non-ASCII, no HTML escaping of <, >, &;
//   - an integer as its exact digits ("-0" is 0);
//   - any other number as the float64 it reads as, in the shortest digits
//     that read back the same, as Python's repr writes them: positional
//     when 1e-4 <= |x| < 1e16, with ".0" on whole numbers (1.0, 0.0001,
//     1.5), else with a signed exponent of at least two digits (1e-05,
//     1e+16); Infinity for one too large for a float64.
//
// A string is hashed as a JSON string, never parsed: pass a
// json.RawMessage to hash a JSON document by value.
//
// Go and Python values agree when their JSON does. They cannot where
// encoding/json writes a value as an integer that Python writes as a
// float: float64(1) is 1 here and Python's 1.0 is 1.0, so send whole
// numbers as integers. A []byte is base64 text here, as encoding/json
// writes it.
//
// It returns json.Marshal's error for a value that has no JSON encoding
// (a channel, a function, NaN).
func ArgsHash(args any) (string, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return "", fmt.Errorf("hash tool args: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("hash tool args: %w", err)
	}
	sum := sha256.Sum256(appendCanonical(nil, v))
	return hex.EncodeToString(sum[:]), nil
}

// appendCanonical appends v, as encoding/json decodes into an any with
// UseNumber, in canonical form. Decoded strings are valid UTF-8: the
// decoder turned invalid bytes and lone surrogates into U+FFFD.
func appendCanonical(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case json.Number:
		return appendNumber(b, string(v))
	case string:
		return appendString(b, v)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanonical(b, e)
		}
		return append(b, ']')
	case map[string]any:
		b = append(b, '{')
		// Byte order of UTF-8 is code point order, Python's order of str.
		for i, k := range slices.Sorted(maps.Keys(v)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, k), ':')
			b = appendCanonical(b, v[k])
		}
		return append(b, '}')
	}
	panic(fmt.Sprintf("hermeskill: canonical JSON of a decoded %T", v)) // encoding/json decodes to no other type
}

func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20:
			b = append(b, c)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c == '\b':
			b = append(b, `\b`...)
		case c == '\f':
			b = append(b, `\f`...)
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return append(b, '"')
}

// appendNumber appends the JSON number n as Python writes the value
// json.loads reads from it: an int when n has no fraction and no exponent,
// else a float.
func appendNumber(b []byte, n string) []byte {
	if !strings.ContainsAny(n, ".eE") {
		if n == "-0" {
			n = "0"
		}
		return append(b, n...)
	}
	f, _ := strconv.ParseFloat(n, 64) // out of range: ±Inf, as Python reads it
	return appendFloat(b, f)
}

// appendFloat appends f as Python's repr does (json.dumps writes floats with
// it), and its infinities as json.dumps spells them.
func appendFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) {
		if f < 0 {
			b = append(b, '-')
		}
		return append(b, "Infinity"...)
	}
	// The shortest digits that read back as f: "-d.ddde±XX".
	e := strconv.FormatFloat(f, 'e', -1, 64)
	if e[0] == '-' {
		b, e = append(b, '-'), e[1:]
	}
	mantissa, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mantissa, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	// point: where the decimal point falls in digits. repr goes positional
	// for -4 < point <= 16.
	switch point := x + 1; {
	case point <= -4 || point > 16:
		b = append(b, digits[0])
		if len(digits) > 1 {
			b = append(append(b, '.'), digits[1:]...)
		}
		b = append(b, 'e')
		if x < 0 {
			b, x = append(b, '-'), -x
		} else {
			b = append(b, '+')
		}
		if x < 10 {
			b = append(b, '0')
		}
		return strconv.AppendInt(b, int64(x), 10)
	case point <= 0:
		b = append(b, "0."...)
		b = append(b, strings.Repeat("0", -point)...)
		return append(b, digits...)
	case point >= len(digits):
		b = append(b, digits...)
		b = append(b, strings.Repeat("0", point-len(digits))...)
		return append(b, ".0"...)
	default:
		b = append(b, digits[:point]...)
		b = append(b, '.')
		return append(b, digits[point:]...)
	}
}
