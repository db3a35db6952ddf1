// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// go.yaml.in/yaml/v3 (v3.0.6) reports a syntax error as text only: an
// error made by fmt.Errorf, with no type or field for the line. This file
// is the one place that reads that text; TestYAMLSyntaxErrorFormat pins
// the forms relied on, so that a new version of the library that changes
// them fails a test rather than misplacing errors.

var (
	yamlLineErr   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })
	yamlAnchorErr = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: unknown anchor '(.*)' referenced$`) })
)

// yamlParserProblems are the messages of yaml's parser (parserc.go), as
// opposed to its scanner. The parser reports the 0-based line of its mark
// where the scanner reports a 1-based one (parser.fail in decode.go adds 1
// for scanner errors only).
var yamlParserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// syntaxError turns an error of yaml's parser on data into an ErrSyntax
// error at the line it concerns:
//
//   - "yaml: line N: MSG": line N, or N+1 for a parser problem (see
//     yamlParserProblems);
//   - "yaml: MSG": line 1 (yaml omits a line that is 0 in its marks);
//   - "yaml: unknown anchor 'a' referenced": the first line that uses *a,
//     which yaml does not say.
//
// A line indented with a tab gets a hint: it is the usual cause.
func syntaxError(file string, data []byte, err error) *Error {
	text := err.Error()
	line, msg := 1, strings.TrimPrefix(text, "yaml: ")
	if m := yamlLineErr().FindStringSubmatch(text); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		if yamlParserProblems[msg] {
			line++
		}
	} else if m := yamlAnchorErr().FindStringSubmatch(text); m != nil {
		line = 0
		for i, l := range bytes.Split(data, []byte("\n")) {
			if bytes.Contains(l, []byte("*"+m[1])) {
				line = i + 1
				break
			}
		}
		msg = "alias *" + m[1] + " refers to no anchor &" + m[1] + " defined before it"
	}
	// At the end of a file without a final newline yaml's mark moves to a
	// line after the last (an open "[" at the end): the error is on the
	// file's last line. (After a final newline, that line is the empty one
	// an editor shows.)
	line = min(line, lastLine(data))
	if indentedWithTab(data, line) {
		msg += " (YAML does not allow tabs for indentation: use spaces)"
	}
	return &Error{File: file, Line: line, Kind: ErrSyntax, Err: errors.New("YAML syntax: " + msg)}
}

// lastLine is the number of data's last line: the one after its last line
// break, empty or not. Line breaks are yaml's: "\r\n", "\n", "\r", and
// NEL, LS and PS (U+0085, U+2028, U+2029).
func lastLine(data []byte) int {
	n := 1
	for i := 0; i < len(data); i++ {
		switch {
		case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
			i++
			n++
		case data[i] == '\r', data[i] == '\n':
			n++
		case data[i] == 0xC2 && i+1 < len(data) && data[i+1] == 0x85:
			i++
			n++
		case data[i] == 0xE2 && i+2 < len(data) && data[i+1] == 0x80 && (data[i+2] == 0xA8 || data[i+2] == 0xA9):
			i += 2
			n++
		}
	}
	return n
}

// indentedWithTab says whether the 1-based line of data has a tab in its
// leading white space.
func indentedWithTab(data []byte, line int) bool {
	lines := bytes.Split(data, []byte("\n"))
	if line < 1 || line > len(lines) {
		return false
	}
	l := lines[line-1]
	indent := l[:len(l)-len(bytes.TrimLeft(l, " \t"))]
	return bytes.IndexByte(indent, '\t') >= 0
}
