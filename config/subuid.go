package config

import (
	"errors"
	"io/fs"
	"strings"

	"github.com/registrar-otel/registrar-otel/internal/subid"
)

// DefaultSubuidFile is registrar.subuid_file's default: the file useradd
// writes and newuidmap reads.
const DefaultSubuidFile = "/etc/subuid"

const keySubuidFile = "registrar.subuid_file"

// LoadSubuids reads registrar.subuid_file: nil with no error when the key
// is "" (the mapping is off), no ranges when the file is missing at
// DefaultSubuidFile (a host without subordinate ids), and otherwise the
// file's ranges or a *KeyError naming the key, the path and what is wrong
// (unreadable, malformed with the line, overlapping ranges). A missing
// file at any other path is an error: the operator named it.
func (c *Config) LoadSubuids() (*subid.Map, error) {
	path := c.Registrar.SubuidFile
	if path == "" {
		return nil, nil
	}
	return loadSubuids(path, path == DefaultSubuidFile)
}

// loadSubuids is LoadSubuids of path; missingOK reads a missing file as
// one without ranges.
func loadSubuids(path string, missingOK bool) (*subid.Map, error) {
	m, err := subid.Load(path)
	switch {
	case err == nil:
		return m, nil
	case missingOK && errors.Is(err, fs.ErrNotExist):
		return &subid.Map{}, nil
	}
	if _, ok := errors.AsType[*subid.LineError](err); !ok {
		// The open, the read, the size bound or an account lookup.
		return nil, &KeyError{Key: keySubuidFile, Value: path, Rule: "cannot be read: " + problems(err)}
	}
	return nil, &KeyError{Key: keySubuidFile, Value: path, Rule: "must be a subordinate uid file (name:start:count lines, no two ranges overlapping): " + problems(err)}
}

// problems is subid.Load's error on one line, without the path (the
// KeyError's value): "; " between its problems.
func problems(err error) string {
	if _, ok := errors.AsType[*fs.PathError](err); ok {
		return oneLine(pathErrText(err))
	}
	if inner := errors.Unwrap(err); inner != nil {
		err = inner // the path is the KeyError's value already
	}
	var msgs []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			msgs = append(msgs, oneLine(e.Error()))
		}
	} else {
		msgs = append(msgs, oneLine(err.Error()))
	}
	return strings.Join(msgs, "; ")
}
