package smtpprobe

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

const (
	maxReplyLine  = 4096 // longest reply line accepted (RFC 5321: 512)
	maxReplyLines = 100  // lines in one multi-line reply
	quitTimeout   = 500 * time.Millisecond
)

// errProtocol marks replies that are not SMTP.
var errProtocol = errors.New("smtpprobe: malformed SMTP reply")

// reply is one SMTP reply, possibly multi-line.
type reply struct {
	code int    // 3-digit reply code
	enh  string // enhanced status code (RFC 3463) of the first line, "" if none
	text string // text of all lines joined by "\n", codes removed
	last string // last line as received, CRLF removed
}

func (r reply) class() int { return r.code / 100 }

// String returns the last line, which is what Result.Reply reports.
func (r reply) String() string { return r.last }

// parseEnhanced returns the enhanced status code at the start of text
// (class.subject.detail, class 2, 4 or 5, 1 to 3 digits each) if its class
// agrees with the reply code.
func parseEnhanced(code int, text string) string {
	end := strings.IndexByte(text, ' ')
	if end < 0 {
		end = len(text)
	}
	s := text[:end]
	if len(s) < 5 || s[0] != byte('0'+code/100) || s[1] != '.' {
		return ""
	}
	parts := strings.Split(s[2:], ".")
	if len(parts) != 2 {
		return ""
	}
	for _, p := range parts {
		if len(p) < 1 || len(p) > 3 {
			return ""
		}
		for i := 0; i < len(p); i++ {
			if p[i] < '0' || p[i] > '9' {
				return ""
			}
		}
	}
	return s
}

// readReply reads one (multi-line) reply from br.
func readReply(br *bufio.Reader) (reply, error) {
	var r reply
	var text strings.Builder
	for n := 0; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return r, fmt.Errorf("%w: line longer than %d bytes", errProtocol, maxReplyLine)
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return r, err
		}
		l := strings.TrimRight(string(line), "\r\n")
		if len(l) < 3 || !digit(l[0]) || !digit(l[1]) || !digit(l[2]) || l[0] < '1' || l[0] > '5' {
			return r, fmt.Errorf("%w: %q", errProtocol, truncate(l, 64))
		}
		code := int(l[0]-'0')*100 + int(l[1]-'0')*10 + int(l[2]-'0')
		sep := byte(' ')
		body := ""
		if len(l) > 3 {
			sep, body = l[3], l[4:]
			if sep != ' ' && sep != '-' {
				return r, fmt.Errorf("%w: %q", errProtocol, truncate(l, 64))
			}
		}
		if n == 0 {
			r.code = code
			r.enh = parseEnhanced(code, body)
		} else {
			if code != r.code {
				return r, fmt.Errorf("%w: code %d inside a %d reply", errProtocol, code, r.code)
			}
			text.WriteByte('\n')
		}
		text.WriteString(body)
		r.last = l
		if sep == ' ' {
			r.text = text.String()
			return r, nil
		}
		if n+1 >= maxReplyLines {
			return r, fmt.Errorf("%w: more than %d lines", errProtocol, maxReplyLines)
		}
	}
}

func digit(c byte) bool { return '0' <= c && c <= '9' }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
