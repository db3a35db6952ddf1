// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"

	"github.com/hermeskill/hermeskilld/internal/atomicfile"
)

// maxKeyFile bounds what is read from a key file.
const maxKeyFile = 64 << 10

// Signer signs certificates with an Ed25519 private key. It is immutable and
// safe for concurrent use.
type Signer struct {
	priv  ed25519.PrivateKey
	keyID string
}

// NewSigner returns a Signer for priv (an ed25519.PrivateKeySize key).
func NewSigner(priv ed25519.PrivateKey) (*Signer, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: private key of %d bytes", ErrBadKey, len(priv))
	}
	priv = bytes.Clone(priv)
	return &Signer{priv: priv, keyID: KeyID(priv.Public().(ed25519.PublicKey))}, nil
}

// KeyID is the fingerprint of pub that certificates name their key by:
// "ed25519:" and the first 16 hex digits of sha256(pub).
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return AlgEd25519 + ":" + hex.EncodeToString(sum[:8])
}

// KeyID returns KeyID(s.Public()).
func (s *Signer) KeyID() string { return s.keyID }

// Public returns the public key.
func (s *Signer) Public() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }

// Sign sets c.Signature to an Ed25519 signature over the canonical JSON (see
// Canonical) of c without its signature; an old signature is replaced. On
// error c is unchanged.
func (s *Signer) Sign(c *Certificate) error {
	unsigned := *c
	unsigned.Signature = nil
	b, err := json.Marshal(unsigned)
	if err != nil {
		return fmt.Errorf("sign certificate: %w", err)
	}
	canon, err := Canonical(b)
	if err != nil {
		return fmt.Errorf("sign certificate: %w", err)
	}
	c.Signature = &Signature{
		Alg:   AlgEd25519,
		KeyID: s.keyID,
		Value: base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, canon)),
	}
	return nil
}

// SignJSON returns the signature of a JSON object other than a
// certificate (a directive receipt) as Sign makes a certificate's: Ed25519
// over Canonical(objJSON), so Verify checks it the same way. A top-level
// "signature" member of objJSON is left out of what is signed. The
// object's JSON must name a schema of its own, so that its signature can
// never pass for a certificate's.
//
// Errors: ErrMalformed when objJSON is not one JSON object (see Canonical).
func (s *Signer) SignJSON(objJSON []byte) (*Signature, error) {
	canon, err := Canonical(objJSON)
	if err != nil {
		return nil, err
	}
	return &Signature{Alg: AlgEd25519, KeyID: s.keyID,
		Value: base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, canon))}, nil
}

// SignMessage returns the Ed25519 signature of msg by s's key. The audit
// log signs its anchor with it; the anchor's JSON names a schema of its own,
// so its signature can never pass for a certificate's.
func (s *Signer) SignMessage(msg []byte) []byte { return ed25519.Sign(s.priv, msg) }

// LoadSigner reads an Ed25519 private key from path: a PEM "PRIVATE KEY"
// block (PKCS#8, as GenerateKey and `openssl genpkey -algorithm ed25519`
// write), or a raw 32-byte seed or 64-byte private key (seed then public
// key), in binary, hex or base64. A file accessible by group or others
// (mode & 0077 != 0) is refused with ErrKeyFileMode; one without a usable
// key gives ErrBadKey.
func LoadSigner(path string) (*Signer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("signing key %s: %w (mode %04o; chmod 600 it)", path, ErrKeyFileMode, perm)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile))
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	priv, err := parsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	return NewSigner(priv)
}

func parsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	if block, _ := pem.Decode(data); block != nil {
		if block.Type != "PRIVATE KEY" {
			return nil, fmt.Errorf("%w: PEM block %q, want \"PRIVATE KEY\" (PKCS#8)", ErrBadKey, block.Type)
		}
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%w: PKCS#8 key is a %T", ErrBadKey, k)
		}
		return priv, nil
	}
	raw, err := decodeRaw(data, ed25519.SeedSize, ed25519.PrivateKeySize)
	if err != nil {
		return nil, err
	}
	if len(raw) == ed25519.SeedSize {
		return ed25519.NewKeyFromSeed(raw), nil
	}
	priv := ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize])
	if !bytes.Equal(priv, raw) {
		return nil, fmt.Errorf("%w: the public half of the 64-byte key does not match its seed", ErrBadKey)
	}
	return priv, nil
}

// LoadPublicKey reads an Ed25519 public key from path: a PEM "PUBLIC KEY"
// block (PKIX, as GenerateKey writes to PATH.pub), or 32 raw bytes in
// binary, hex or base64.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	data, err := readLimited(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	pub, err := parsePublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", path, err)
	}
	return pub, nil
}

func parsePublicKey(data []byte) (ed25519.PublicKey, error) {
	if block, _ := pem.Decode(data); block != nil {
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("%w: PEM block %q, want \"PUBLIC KEY\" (the .pub file)", ErrBadKey, block.Type)
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("%w: PKIX key is a %T", ErrBadKey, k)
		}
		return pub, nil
	}
	raw, err := decodeRaw(data, ed25519.PublicKeySize)
	if err != nil {
		return nil, err
	}
	return ed25519.PublicKey(raw), nil
}

// decodeRaw decodes a raw key of one of sizes bytes: hex or base64 text
// first (trimmed of white space), then the bytes themselves. Text is tried
// first because hex text of a 32-byte key is 64 bytes long; binary key bytes
// that are all hex digits are too improbable to matter.
func decodeRaw(data []byte, sizes ...int) ([]byte, error) {
	okSize := func(b []byte) bool {
		for _, n := range sizes {
			if len(b) == n {
				return true
			}
		}
		return false
	}
	text := string(bytes.TrimSpace(data))
	if b, err := hex.DecodeString(text); err == nil && okSize(b) {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.Strict().DecodeString(text); err == nil && okSize(b) {
			return b, nil
		}
	}
	if okSize(data) {
		return bytes.Clone(data), nil
	}
	return nil, fmt.Errorf("%w: neither PEM nor a raw key of %v bytes (binary, hex or base64)", ErrBadKey, sizes)
}

// GenerateKey creates a new Ed25519 key pair: the private key at path (PEM
// "PRIVATE KEY", PKCS#8, mode 0600) and the public key at path+".pub" (PEM
// "PUBLIC KEY", mode 0644), both written atomically. It refuses to replace
// either file (the error matches fs.ErrExist): each name is claimed with
// O_EXCL first, so two concurrent calls cannot both succeed. The directory
// must exist. On error neither file is left behind.
func GenerateKey(path string) (pubPath string, err error) {
	pubPath = path + ".pub"
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}

	var claimed []string
	defer func() {
		if err != nil {
			for _, p := range claimed {
				os.Remove(p)
			}
		}
	}()
	for _, p := range []string{path, pubPath} {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", fmt.Errorf("generate key: %w", err)
		}
		claimed = append(claimed, p)
		f.Close()
	}
	if err := atomicfile.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	if err := atomicfile.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	return pubPath, nil
}

// readLimited reads at most limit bytes of the regular file at path.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return data, nil
}
