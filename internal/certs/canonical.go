// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// maxDepth bounds the nesting Canonical accepts (encoding/json's own limit).
const maxDepth = 10000

// Canonical returns the canonical form of a certificate's JSON: the bytes an
// Ed25519 signature covers. The JSON is parsed with numbers kept as their
// exact text (json.Decoder.UseNumber), the top-level "signature" member is
// dropped, and the rest is re-encoded compactly with object keys sorted (as
// encoding/json sorts map keys), without HTML escaping.
//
// So the signature covers content, not layout: whitespace, indentation, key
// order and equivalent string escapes ("\u0041" for "A") may change without
// breaking it, while any change of a key or value does. A number keeps its
// text, so 4242 and 4242.0 differ. Strings are written as encoding/json
// writes them (a test pins that escaping: it changed once, in Go 1.22).
//
// Input that could be read differently by different JSON parsers is
// rejected with ErrMalformed: invalid UTF-8, a duplicate key in an object, a
// lone UTF-16 surrogate escape, anything but one JSON object.
func Canonical(certJSON []byte) ([]byte, error) {
	m, err := parseObject(certJSON)
	if err != nil {
		return nil, err
	}
	delete(m, "signature")
	return encodeCanonical(m)
}

// Verify checks the signature of certJSON (a certificate file's bytes)
// against pub. It returns nil, or an error matching exactly one of:
//
//   - ErrUnsigned: there is no signature;
//   - ErrKeyMismatch: the signature's key_id is not KeyID(pub);
//   - ErrBadSignature: the content differs from what was signed, the
//     signature is not a valid Ed25519 signature, or the bytes are not a
//     parsable certificate (then it matches ErrMalformed too).
//
// A pub that is not an Ed25519 public key gives ErrBadKey. The check is on
// content only (see Canonical): a re-indented certificate still verifies.
func Verify(certJSON []byte, pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: public key of %d bytes", ErrBadKey, len(pub))
	}
	m, err := parseObject(certJSON)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	sigv, ok := m["signature"]
	if !ok || sigv == nil {
		return ErrUnsigned
	}
	sig, err := signatureOf(sigv)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	if sig.Alg != AlgEd25519 {
		return fmt.Errorf("%w: algorithm %q, want %q", ErrBadSignature, sig.Alg, AlgEd25519)
	}
	if want := KeyID(pub); sig.KeyID != want {
		return fmt.Errorf("%w: signed by %q, key given is %q", ErrKeyMismatch, sig.KeyID, want)
	}
	// Strict: an encoding with non-zero padding bits would otherwise decode
	// to the same signature, making the file malleable.
	raw, err := base64.StdEncoding.Strict().DecodeString(sig.Value)
	if err != nil || len(raw) != ed25519.SignatureSize {
		return fmt.Errorf("%w: signature value is not %d bytes of base64", ErrBadSignature, ed25519.SignatureSize)
	}
	delete(m, "signature")
	canon, err := encodeCanonical(m)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	if !ed25519.Verify(pub, canon, raw) {
		return ErrBadSignature
	}
	return nil
}

// signatureOf reads the parsed signature member.
func signatureOf(v any) (Signature, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return Signature{}, malformed("signature is not an object")
	}
	var s Signature
	for _, f := range []struct {
		key string
		dst *string
	}{{"alg", &s.Alg}, {"key_id", &s.KeyID}, {"value", &s.Value}} {
		str, ok := obj[f.key].(string)
		if !ok {
			return Signature{}, malformed("signature." + f.key + " is not a string")
		}
		*f.dst = str
	}
	return s, nil
}

// parseObject parses one JSON object strictly (see Canonical), numbers as
// json.Number.
func parseObject(data []byte) (map[string]any, error) {
	if !utf8.Valid(data) {
		return nil, malformed("not valid UTF-8")
	}
	if err := checkSurrogates(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, malformedErr(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("data after the top-level object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, malformed("not a JSON object")
	}
	return m, nil
}

// decodeValue decodes the next JSON value token by token, so that duplicate
// object keys are seen (json.Unmarshal keeps the last one silently, while
// other parsers keep the first: a signature must not mean two things).
func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key := kt.(string) // the decoder guarantees a string key here
			if _, dup := obj[key]; dup {
				return nil, fmt.Errorf("duplicate key %q", key)
			}
			if obj[key], err = decodeValue(dec, depth+1); err != nil {
				return nil, err
			}
		}
		_, err := dec.Token() // '}'
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ']'
		return arr, err
	}
	return tok, nil // string, json.Number, bool or nil
}

// checkSurrogates rejects a \uD800-\uDFFF escape that is not half of a
// high+low pair: encoding/json turns every such lone surrogate into U+FFFD,
// so "\ud800" and "\ud801" would canonicalise alike, while other parsers
// keep them apart.
func checkSurrogates(data []byte) error {
	inString := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(data):
			i++
			if data[i] != 'u' {
				continue
			}
			r, ok := hex4(data, i+1)
			if !ok || r < 0xd800 || r > 0xdfff {
				continue // a bad escape is left to the parser
			}
			if r >= 0xdc00 {
				return malformed("lone surrogate escape")
			}
			// A high surrogate must be followed by \u and a low surrogate.
			if i+10 >= len(data) || data[i+5] != '\\' || data[i+6] != 'u' {
				return malformed("lone surrogate escape")
			}
			lo, ok := hex4(data, i+7)
			if !ok || lo < 0xdc00 || lo > 0xdfff {
				return malformed("lone surrogate escape")
			}
			i += 10
		}
	}
	return nil
}

// hex4 parses the 4 hex digits at data[i:i+4].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// encodeCanonical writes v compactly, map keys sorted, no HTML escaping.
func encodeCanonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, malformedErr(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func malformed(why string) error { return fmt.Errorf("%w: %s", ErrMalformed, why) }

func malformedErr(err error) error { return fmt.Errorf("%w: %w", ErrMalformed, err) }
