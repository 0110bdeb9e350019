package smtpprobe

import "time"

// rfcReplyTimeout is RFC 5321 §4.5.3.2's minimum wait for the reply to
// MAIL and to RCPT (and the server's own idle timeout): Config
// CommandTimeout's default.
const rfcReplyTimeout = 5 * time.Minute
