package restapi

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
)

// FuzzFeedbackLines: readLine cuts any input into its lines as
// strings.Split on "\n" does (line endings trimmed), never returns a line
// longer than maxFeedbackLine (a longer one is errLineTooLong, read to its
// end), and fails with nothing but io.EOF at the end.
func FuzzFeedbackLines(f *testing.F) {
	f.Add([]byte("email\tfraud_type\r\na@b.test\tbot\n\nlast"))
	f.Add(append(bytes.Repeat([]byte("x"), maxFeedbackLine), "\nnext\n"...))
	f.Add(append(bytes.Repeat([]byte("y"), 70<<10), "\r\n\r\r\n"...))
	f.Fuzz(func(t *testing.T, data []byte) {
		want := strings.Split(string(data), "\n")
		if want[len(want)-1] == "" {
			want = want[:len(want)-1]
		}
		br := bufio.NewReaderSize(bytes.NewReader(data), 64<<10)
		for i := 0; ; i++ {
			line, err := readLine(br)
			if err == io.EOF {
				if i != len(want) {
					t.Fatalf("%d lines, want %d", i, len(want))
				}
				return
			}
			if i >= len(want) {
				t.Fatalf("line %d beyond the %d of the input (%v)", i+1, len(want), err)
			}
			size := len(want[i])
			if i < len(want)-1 || strings.HasSuffix(string(data), "\n") {
				size++ // its "\n"
			}
			switch {
			case size > maxFeedbackLine:
				if err != errLineTooLong {
					t.Fatalf("line %d of %d bytes: %q, %v; want errLineTooLong", i+1, size, line, err)
				}
			case err != nil:
				t.Fatalf("line %d: %v", i+1, err)
			case string(line) != strings.TrimRight(want[i], "\r\n"):
				t.Fatalf("line %d: %q, want %q", i+1, line, strings.TrimRight(want[i], "\r\n"))
			}
		}
	})
}
