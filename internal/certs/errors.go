// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import "errors"

// Errors of this package, matchable with errors.Is. Verify returns one of the
// first three for every certificate that does not verify.
var (
	// ErrUnsigned means the certificate has no signature field (or it is null).
	ErrUnsigned = errors.New("certificate is not signed")
	// ErrKeyMismatch means the signature names a key_id other than the key
	// given to Verify: signed by another key, or the key_id was edited.
	ErrKeyMismatch = errors.New("certificate signed by another key")
	// ErrBadSignature means the content is not what was signed: a value was
	// changed, added or removed, or the signature itself was altered. A
	// certificate that no longer parses (ErrMalformed) also matches it.
	ErrBadSignature = errors.New("certificate content does not match its signature")
	// ErrMalformed means the bytes are not a certificate: not JSON, not one
	// JSON object, not UTF-8, a duplicate key, a lone surrogate escape, or a
	// field of the wrong type.
	ErrMalformed = errors.New("malformed certificate")
	// ErrSchema means the schema field is not Schema.
	ErrSchema = errors.New("unsupported certificate schema")
	// ErrKeyFileMode means a private key file is accessible by group or
	// others (mode & 0077 != 0); LoadSigner refuses it.
	ErrKeyFileMode = errors.New("private key file is accessible by group or others")
	// ErrBadKey means a key file holds no Ed25519 key in a known encoding.
	ErrBadKey = errors.New("not an Ed25519 key")
)
