package recordfmt

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// Input splits a producer's input into records: each ends at the
// delimiter (the last may end at the end of the input instead), and with a
// key separator its key is what comes before the first separator. A
// record without the separator has a null key and is all value.
type Input struct {
	sc     *bufio.Scanner
	keySep []byte
	n      int
}

// NewInput reads records from r; none may be longer than maxBytes.
func NewInput(r io.Reader, delimiter, keySeparator string, maxBytes int) (*Input, error) {
	if delimiter == "" {
		return nil, fmt.Errorf("the record delimiter is empty")
	}
	delim := []byte(delimiter)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(64<<10, maxBytes)), maxBytes)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.Index(data, delim); i >= 0 {
			return i + len(delim), data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	return &Input{sc: sc, keySep: []byte(keySeparator)}, nil
}

// Next is the next record's key and value (each its own copy); ok is
// false at the end of the input or on an error (Err).
func (in *Input) Next() (key, value []byte, ok bool) {
	if !in.sc.Scan() {
		return nil, nil, false
	}
	in.n++
	line := bytes.Clone(in.sc.Bytes())
	if line == nil {
		line = []byte{}
	}
	if len(in.keySep) > 0 {
		if k, v, found := bytes.Cut(line, in.keySep); found {
			return k, v, true
		}
	}
	return nil, line, true
}

// Err is why the input stopped early, nil at its end.
func (in *Input) Err() error {
	if err := in.sc.Err(); err != nil {
		return fmt.Errorf("record %d: %w", in.n+1, err)
	}
	return nil
}

// Unescape reads the escapes \n, \t, \r, \0 and \\ in a separator or
// delimiter given on the command line.
func Unescape(s string) (string, error) {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			out = append(out, s[i])
			continue
		}
		e, err := escaped(s, i)
		if err != nil {
			return "", err
		}
		out = append(out, e)
		i++
	}
	return string(out), nil
}
