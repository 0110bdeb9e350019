package mxdns

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/miekg/dns"
	"golang.org/x/net/idna"
)

const (
	ednsSize = 1232 // RFC 9715 / DNS flag day 2020
	maxCNAME = 8    // CNAME hops followed per query
)

// rcodeError is an explicit failure answer from the resolver.
type rcodeError struct{ rcode int }

func (e *rcodeError) Error() string {
	return ErrServerFailure.Error() + " (rcode " + dns.RcodeToString[e.rcode] + ")"
}

func (e *rcodeError) Unwrap() error { return ErrServerFailure }

var (
	errCNAMELoop   = errors.New("mxdns: CNAME chain too long")
	errBadResponse = errors.New("mxdns: response does not match the question")
)

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// answer is the outcome of one (name, type) question after CNAME chasing.
type answer struct {
	rrs []dns.RR // records of the asked type owned by the end of the chain
	nx  bool     // NXDOMAIN
	ttl uint32   // min TTL of rrs and CNAMEs; for NXDOMAIN/NODATA the negative TTL
}

// query asks (name, qtype), following CNAMEs, re-querying the target when the
// resolver did not chase the chain itself.
func (r *Resolver) query(ctx context.Context, name string, qtype uint16) (answer, error) {
	qname := name + "."
	ttl := ^uint32(0)
	hops := 0 // CNAMEs followed, across re-queries
	for q := 0; q <= maxCNAME; q++ {
		msg, err := r.exchange(ctx, qname, qtype)
		if err != nil {
			return answer{}, err
		}
		if msg.Rcode != dns.RcodeSuccess && msg.Rcode != dns.RcodeNameError {
			return answer{}, &rcodeError{msg.Rcode}
		}
		target := qname
		for moved := true; moved; {
			moved = false
			for _, rr := range msg.Answer {
				if c, ok := rr.(*dns.CNAME); ok && strings.EqualFold(c.Hdr.Name, target) {
					if hops++; hops > maxCNAME {
						return answer{}, errCNAMELoop
					}
					target = c.Target
					ttl = min(ttl, c.Hdr.Ttl)
					moved = true
					break
				}
			}
		}
		var rrs []dns.RR
		for _, rr := range msg.Answer {
			h := rr.Header()
			if h.Rrtype == qtype && strings.EqualFold(h.Name, target) {
				rrs = append(rrs, rr)
				ttl = min(ttl, h.Ttl)
			}
		}
		if len(rrs) > 0 {
			return answer{rrs: rrs, ttl: ttl}, nil
		}
		soaTTL, hasSOA := negativeTTL(msg)
		if !strings.EqualFold(target, qname) && !hasSOA && msg.Rcode == dns.RcodeSuccess {
			qname = target // the server did not chase the CNAME: do it ourselves
			continue
		}
		if !hasSOA {
			soaTTL = uint32(r.cfg.NegativeTTL.Seconds())
		}
		return answer{nx: msg.Rcode == dns.RcodeNameError, ttl: min(ttl, soaTTL)}, nil
	}
	return answer{}, errCNAMELoop
}

// negativeTTL extracts the negative caching TTL from the SOA in the authority
// section (RFC 2308 §5: min of the SOA TTL and its MINIMUM field).
func negativeTTL(msg *dns.Msg) (uint32, bool) {
	for _, rr := range msg.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return min(soa.Hdr.Ttl, soa.Minttl), true
		}
	}
	return 0, false
}

// exchange sends one question with retries over UDP and a TCP retry on
// truncation.
func (r *Resolver) exchange(ctx context.Context, qname string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(qname, qtype)
	m.RecursionDesired = true
	m.SetEdns0(ednsSize, false)
	var lastErr error
	for attempt := 0; attempt < r.cfg.Attempts; attempt++ {
		if err := ctx.Err(); err != nil {
			if lastErr == nil {
				lastErr = err
			}
			break
		}
		m.Id = dns.Id()
		r.queries.Add(1)
		resp, err := r.udpExchange(ctx, m)
		if err == nil && resp.Truncated {
			r.tcpFallbacks.Add(1)
			r.queries.Add(1)
			m.Id = dns.Id()
			resp, err = r.tcpExchange(ctx, m)
		}
		if err == nil && !sameQuestion(resp, qname, qtype) {
			err = errBadResponse
		}
		if err == nil {
			return resp, nil
		}
		if isTimeout(err) {
			r.timeouts.Add(1)
		}
		lastErr = err
	}
	return nil, lastErr
}

// udpExchange sends m over a pooled UDP socket to the server: a socket per
// query costs more than the query (socket, connect, close). A socket that
// saw an error is closed; late answers on a reused one are told apart by
// their IDs.
func (r *Resolver) udpExchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	r.connMu.Lock()
	var co *dns.Conn
	if n := len(r.idle); n > 0 {
		co, r.idle = r.idle[n-1], r.idle[:n-1]
	}
	r.connMu.Unlock()
	if co == nil {
		c, err := r.cfg.Dial(ctx, "udp", r.cfg.Server)
		if err != nil {
			return nil, err
		}
		co = &dns.Conn{Conn: c, UDPSize: ednsSize}
	}
	resp, err := r.sendUDP(ctx, co, m)
	if err != nil {
		co.Close()
		return nil, err
	}
	r.connMu.Lock()
	if len(r.idle) < maxIdleConns {
		r.idle = append(r.idle, co)
		co = nil
	}
	r.connMu.Unlock()
	if co != nil {
		co.Close()
	}
	return resp, nil
}

// tcpExchange sends m over a connection of its own (a truncated answer's
// retry), the dial bounded by the attempt's Timeout.
func (r *Resolver) tcpExchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	dctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	c, err := r.cfg.Dial(dctx, "tcp", r.cfg.Server)
	cancel()
	if err != nil {
		return nil, err
	}
	co := &dns.Conn{Conn: c}
	defer co.Close()
	resp, _, err := r.tcp.ExchangeWithConnContext(ctx, m, co)
	return resp, err
}

// maxIdleConns bounds the pooled UDP sockets.
const maxIdleConns = 64

func sameQuestion(m *dns.Msg, qname string, qtype uint16) bool {
	return len(m.Question) == 1 && m.Question[0].Qtype == qtype && strings.EqualFold(m.Question[0].Name, qname)
}

// normalize returns the lower-case ASCII form of a domain without the
// trailing dot, and whether it is a syntactically valid DNS name. It does not
// allocate for names that are already normalized.
func normalize(s string) (string, bool) {
	s = strings.TrimSuffix(s, ".")
	clean := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_':
		default:
			clean = false
		}
		if !clean {
			break
		}
	}
	if !clean {
		ascii := true
		for i := 0; i < len(s); i++ {
			if s[i] >= 0x80 {
				ascii = false
				break
			}
		}
		if ascii {
			s = strings.ToLower(s)
		} else {
			a, err := idna.Lookup.ToASCII(s)
			if err != nil {
				return strings.ToLower(s), false
			}
			s = strings.ToLower(a)
		}
	}
	return s, validName(s)
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
			continue
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
		label++
		if label > 63 {
			return false
		}
	}
	return label > 0
}
