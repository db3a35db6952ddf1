// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
)

// anchorSchema is the schema member of every anchor file.
const anchorSchema = "hermeskill.audit-anchor.v1"

// anchorSize is the length of every anchor file: the JSON object padded with
// spaces and ended by "\n". Every update is then one pwrite(2) of the same
// length at offset 0, within one page: it never leaves an older, longer
// content's bytes behind, and no process sees half of it.
const anchorSize = 1024

// algEd25519 is AnchorSignature.Alg.
const algEd25519 = "ed25519"

// AnchorPath is the anchor file of the audit log at logPath.
func AnchorPath(logPath string) string { return logPath + ".anchor" }

// Head is one line of the chain: its seq and the sha256 of its bytes (without
// "\n"), which the next line carries as prev_sha256.
type Head struct {
	Seq    uint64 `json:"seq"`
	SHA256 string `json:"sha256"`
}

// Anchor is what an anchor file holds: where its log file's chain ends and
// where it starts.
type Anchor struct {
	Head // the file's last line
	// FirstSeq and FirstPrev are the seq and prev_sha256 of the file's first
	// line: 1 and 64 zeros when the file starts the chain, the seq after and
	// the hash of FILE.1's last line when it follows a rotation. FirstSeq is
	// 0 when the writer could not read the first line.
	FirstSeq  uint64 `json:"first_seq"`
	FirstPrev string `json:"first_prev_sha256"`
	// Signature is nil when the writer had no key.
	Signature *AnchorSignature `json:"signature,omitempty"`
}

// AnchorSignature is an Ed25519 signature over the anchor's canonical JSON
// without its signature: its other members, keys sorted, no spaces.
type AnchorSignature struct {
	Alg   string `json:"alg"`    // "ed25519"
	KeyID string `json:"key_id"` // the Signer's KeyID
	Value string `json:"value"`  // base64 of the 64-byte signature
}

// Signer signs anchors with an Ed25519 key. *certs.Signer is one: every
// writer of a log should use the key that signs the certificates.
type Signer interface {
	KeyID() string
	Public() ed25519.PublicKey
	SignMessage(msg []byte) []byte
}

// anchorFile is the anchor file's JSON, in the order a person reads it.
type anchorFile struct {
	Schema string `json:"schema"`
	Anchor
}

// anchorSigned is what the signature covers: the anchor file's members but
// the signature, keys in sorted order, so the message is the canonical JSON
// certificates are signed over too.
type anchorSigned struct {
	FirstPrev string `json:"first_prev_sha256"`
	FirstSeq  uint64 `json:"first_seq"`
	Schema    string `json:"schema"`
	Seq       uint64 `json:"seq"`
	SHA256    string `json:"sha256"`
}

// signedMessage is the message a's signature covers.
func signedMessage(a Anchor) []byte {
	// Numbers and lowercase hex only: json.Marshal cannot fail or escape.
	msg, _ := json.Marshal(anchorSigned{
		FirstPrev: a.FirstPrev, FirstSeq: a.FirstSeq, Schema: anchorSchema, Seq: a.Seq, SHA256: a.SHA256,
	})
	return msg
}

// sign returns a signed by s.
func sign(a Anchor, s Signer) Anchor {
	a.Signature = &AnchorSignature{
		Alg:   algEd25519,
		KeyID: s.KeyID(),
		Value: base64.StdEncoding.EncodeToString(s.SignMessage(signedMessage(a))),
	}
	return a
}

// VerifySignature checks a's signature with pub. It returns nil,
// ErrAnchorUnsigned, or an error matching ErrAnchorSignature: another key
// signed it (the error names the anchor's key_id), or a value was changed.
func (a Anchor) VerifySignature(pub ed25519.PublicKey) error {
	s := a.Signature
	if s == nil {
		return ErrAnchorUnsigned
	}
	// Strict: other encodings of the same bytes would make the file malleable.
	raw, err := base64.StdEncoding.Strict().DecodeString(s.Value)
	if s.Alg != algEd25519 || err != nil || len(raw) != ed25519.SignatureSize {
		return fmt.Errorf("%w: not an ed25519 signature", ErrAnchorSignature)
	}
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, signedMessage(a), raw) {
		return fmt.Errorf("%w (the anchor names key %s)", ErrAnchorSignature, s.KeyID)
	}
	return nil
}

// encodeAnchor returns a's anchor file, anchorSize bytes: what json.Marshal makes of an
// anchorFile (a test holds them equal), written by hand because it runs on every append and
// reflection would cost more than the pwrite(2).
func encodeAnchor(a Anchor) ([]byte, error) {
	b := make([]byte, 0, anchorSize)
	b = append(b, `{"schema":"`+anchorSchema+`","seq":`...)
	b = strconv.AppendUint(b, a.Seq, 10)
	b = append(b, `,"sha256":`...)
	b = appendJSONString(b, a.SHA256)
	b = append(b, `,"first_seq":`...)
	b = strconv.AppendUint(b, a.FirstSeq, 10)
	b = append(b, `,"first_prev_sha256":`...)
	b = appendJSONString(b, a.FirstPrev)
	if s := a.Signature; s != nil {
		b = append(b, `,"signature":{"alg":`...)
		b = appendJSONString(b, s.Alg)
		b = append(b, `,"key_id":`...)
		b = appendJSONString(b, s.KeyID)
		b = append(b, `,"value":`...)
		b = appendJSONString(b, s.Value)
		b = append(b, '}')
	}
	b = append(b, '}')
	if len(b) >= anchorSize {
		return nil, fmt.Errorf("encode audit anchor: %d bytes, more than %d", len(b), anchorSize-1)
	}
	for len(b) < anchorSize-1 {
		b = append(b, ' ')
	}
	return append(b, '\n'), nil
}

// appendJSONString appends s as a JSON string, as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte {
	for _, c := range []byte(s) {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// decodeAnchor parses an anchor file: ErrNoAnchor when it is empty (created,
// never written), ErrBadAnchor when it is anything but one anchor.
func decodeAnchor(b []byte) (Anchor, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return Anchor{}, ErrNoAnchor
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f anchorFile
	if err := dec.Decode(&f); err != nil {
		return Anchor{}, fmt.Errorf("%w: %w", ErrBadAnchor, err)
	}
	if len(bytes.TrimSpace(b[dec.InputOffset():])) > 0 {
		return Anchor{}, fmt.Errorf("%w: data after the object", ErrBadAnchor)
	}
	a := f.Anchor
	switch {
	case f.Schema != anchorSchema:
		return Anchor{}, fmt.Errorf("%w: schema %q, want %q", ErrBadAnchor, f.Schema, anchorSchema)
	case a.Seq == 0 || a.FirstSeq > a.Seq:
		return Anchor{}, fmt.Errorf("%w: seq %d, first_seq %d", ErrBadAnchor, a.Seq, a.FirstSeq)
	case !isHash(a.SHA256) || !isHash(a.FirstPrev):
		return Anchor{}, fmt.Errorf("%w: a hash is not 64 lowercase hex digits", ErrBadAnchor)
	}
	return a, nil
}

// maxAnchorFile bounds what is read of an anchor file.
const maxAnchorFile = 64 << 10

// readAnchor reads the anchor file r.
func readAnchor(r io.ReaderAt) (Anchor, error) {
	b, err := io.ReadAll(io.NewSectionReader(r, 0, maxAnchorFile+1))
	if err != nil {
		return Anchor{}, fmt.Errorf("read audit anchor: %w", err)
	}
	if len(b) > maxAnchorFile {
		return Anchor{}, fmt.Errorf("%w: larger than %d bytes", ErrBadAnchor, maxAnchorFile)
	}
	return decodeAnchor(b)
}

// ReadAnchor reads the anchor file at path. A missing or empty file gives
// ErrNoAnchor (a missing one matches fs.ErrNotExist too), one that holds
// anything but an anchor ErrBadAnchor. It does not check the signature
// (Anchor.VerifySignature does).
func ReadAnchor(path string) (Anchor, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Anchor{}, fmt.Errorf("%w: %w", ErrNoAnchor, err)
	}
	if err != nil {
		return Anchor{}, err
	}
	defer f.Close()
	a, err := readAnchor(f)
	if err != nil {
		return Anchor{}, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}
