package proxy

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// The DNS listener answers the sandbox's name lookups in sidecar mode,
// where the pod's rules redirect its port 53 here (docs/proxy.md, "DNS").
// It answers only the names the config allows, each with DNSAnswerAddr,
// and forwards nothing: a lookup of <data>.exfil.example never leaves
// the pod, so names cannot carry data out.

// DNSAnswerAddr is the one address an allowed name resolves to for the
// sandbox: TEST-NET-1, never a real host. Any address outside the pod
// works, since the rules redirect every TCP connection to it to the
// transparent listener, which dials by the TLS server name (or Host),
// never by the address.
const DNSAnswerAddr = "192.0.2.1"

// Bounds of the DNS listener. A query is a header and one question of
// at most 255 bytes of name, and the answers fit in 512 bytes, so
// nothing longer than maxDNSMessage is read or needed.
const (
	// maxDNSMessage bounds a query read, over UDP or TCP.
	maxDNSMessage = 4096
	// maxDNSUDPReply is the classic UDP limit; replies never pass it
	// (the answer's name is compressed), and one that did would be
	// sent truncated.
	maxDNSUDPReply = 512
	// maxDNSConns caps the TCP connections open at once; more wait to
	// be accepted.
	maxDNSConns = 32
	// maxDNSTCPQueries ends a TCP connection after that many queries.
	maxDNSTCPQueries = 64
	// dnsTCPTimeout bounds the wait for each query on a TCP connection
	// and the writing of its answer.
	dnsTCPTimeout = 5 * time.Second
	// dnsTTL is the answers' time to live: short, so a reload that
	// removes a host takes effect soon in the sandbox's caches too.
	dnsTTL = 5
)

// DNSAction is what the DNS listener did with a message.
type DNSAction string

// The DNS actions.
const (
	// DNSAnswer answers with the allowed name's records.
	DNSAnswer DNSAction = "answer"
	// DNSRefuse answers with an error code and no records.
	DNSRefuse DNSAction = "refuse"
	// DNSDrop sends nothing: the datagram is not a DNS query.
	DNSDrop DNSAction = "drop"
)

// DNSReason says why, one per outcome.
type DNSReason string

// The DNS reasons.
const (
	// DNSReasonAllowed: an A query for an allowed name, answered with
	// DNSAnswerAddr.
	DNSReasonAllowed DNSReason = "allowed"
	// DNSReasonNoData: an allowed name, another type (AAAA among them:
	// the pod's IPv6 egress is refused), answered NOERROR with no
	// records.
	DNSReasonNoData DNSReason = "allowed-no-data"
	// DNSReasonNameNotAllowed: a name the config does not name,
	// answered NXDOMAIN.
	DNSReasonNameNotAllowed DNSReason = "name-not-allowed"
	// DNSReasonMalformed: a header that parses and a body that does not
	// (FORMERR).
	DNSReasonMalformed DNSReason = "malformed"
	// DNSReasonQuestions: not exactly one question (FORMERR).
	DNSReasonQuestions DNSReason = "question-count"
	// DNSReasonOpcode: an opcode other than QUERY (NOTIMP).
	DNSReasonOpcode DNSReason = "not-a-query"
	// DNSReasonClass: a class other than IN (REFUSED).
	DNSReasonClass DNSReason = "class-not-in"
	// DNSReasonNotDNS: shorter than a header, or a response: dropped.
	DNSReasonNotDNS DNSReason = "not-dns"
)

// DNSDecision is the decision on one message: what to do, why, and the
// response code to answer with.
type DNSDecision struct {
	Action DNSAction
	Reason DNSReason
	Rcode  int    // dns.Rcode*; meaningless for DNSDrop
	Name   string // the question's name, lowercase, as the message gave it
	Type   string // the question's type, "" when there is none
}

// decideDNS decides a parsed query. allowed reports whether a name
// (lowercase, no trailing dot) may be resolved.
func decideDNS(q *dns.Msg, allowed func(string) bool) DNSDecision {
	d := DNSDecision{Action: DNSRefuse, Rcode: dns.RcodeFormatError}
	if q.Opcode != dns.OpcodeQuery {
		d.Reason, d.Rcode = DNSReasonOpcode, dns.RcodeNotImplemented
		return d
	}
	if len(q.Question) != 1 {
		d.Reason = DNSReasonQuestions
		return d
	}
	qq := q.Question[0]
	d.Name = strings.ToLower(qq.Name)
	d.Type = dns.Type(qq.Qtype).String()
	switch {
	case qq.Qclass != dns.ClassINET:
		d.Reason, d.Rcode = DNSReasonClass, dns.RcodeRefused
	case !allowed(strings.TrimSuffix(d.Name, ".")):
		// NXDOMAIN, not REFUSED: a stub resolver walking its search
		// list (ndots:5 in a pod) moves on to the next candidate after
		// NXDOMAIN, while glibc gives up the whole lookup on REFUSED.
		d.Reason, d.Rcode = DNSReasonNameNotAllowed, dns.RcodeNameError
	case qq.Qtype == dns.TypeA:
		d.Action, d.Reason, d.Rcode = DNSAnswer, DNSReasonAllowed, dns.RcodeSuccess
	default:
		d.Action, d.Reason, d.Rcode = DNSAnswer, DNSReasonNoData, dns.RcodeSuccess
	}
	return d
}

// answerDNS parses a message, decides it and packs the reply, at most
// maxReply bytes; a nil reply sends nothing. It never panics on what
// the sandbox sends (FuzzAnswerDNS).
func answerDNS(raw []byte, allowed func(string) bool, maxReply int) ([]byte, DNSDecision) {
	// A header is 12 bytes; the QR bit marks a response, which a
	// server answering it could be made to loop with another.
	if len(raw) < 12 || raw[2]&0x80 != 0 {
		return nil, DNSDecision{Action: DNSDrop, Reason: DNSReasonNotDNS}
	}
	q := new(dns.Msg)
	var d DNSDecision
	if err := q.Unpack(raw); err != nil {
		d = DNSDecision{Action: DNSRefuse, Reason: DNSReasonMalformed, Rcode: dns.RcodeFormatError}
		var h dns.MsgHdr
		h.Id = binary.BigEndian.Uint16(raw)
		h.Opcode = int(raw[2]>>3) & 0xF
		q = &dns.Msg{MsgHdr: h}
	} else {
		d = decideDNS(q, allowed)
	}
	r := new(dns.Msg)
	r.SetRcode(q, d.Rcode)
	r.Authoritative = d.Action == DNSAnswer
	r.RecursionAvailable = false
	r.Compress = true
	if d.Reason == DNSReasonMalformed || d.Reason == DNSReasonQuestions || d.Reason == DNSReasonOpcode {
		r.Question = nil // not echoed: it did not parse, or is not one
	}
	if d.Reason == DNSReasonAllowed {
		r.Answer = []dns.RR{&dns.A{
			Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: dnsTTL},
			A:   net.IPv4(192, 0, 2, 1).To4(), // DNSAnswerAddr
		}}
	}
	out, err := r.Pack()
	if err == nil && len(out) > maxReply {
		r.Answer, r.Truncated = nil, true
		out, err = r.Pack()
	}
	if err != nil || len(out) > maxReply {
		return nil, DNSDecision{Action: DNSDrop, Reason: DNSReasonMalformed, Name: d.Name, Type: d.Type}
	}
	return out, d
}

// dnsAllowed is the current config's name check.
func (s *Server) dnsAllowed(name string) bool {
	return s.state.Load().policy.NameAllowed(name)
}

// logDNS writes the one log line of a DNS message and counts it.
func (s *Server) logDNS(d DNSDecision, transport string, start time.Time) {
	s.metrics.dns(d)
	sb := s.state.Load().cfg.Sandbox
	sandbox := sb.Name
	if sb.Namespace != "" {
		sandbox = sb.Namespace + "/" + sb.Name
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "dns",
		slog.String("sandbox", sandbox),
		slog.String("name", logText(d.Name)),
		slog.String("type", d.Type),
		slog.String("decision", string(d.Action)),
		slog.String("reason", string(d.Reason)),
		slog.String("rcode", dnsRcodeName(d)),
		slog.String("transport", transport),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
	)
}

// dnsRcodeName is the reply's response code by name, "" when none was
// sent.
func dnsRcodeName(d DNSDecision) string {
	if d.Action == DNSDrop {
		return ""
	}
	return dns.RcodeToString[d.Rcode]
}

// serveDNSUDP answers datagrams on pc until it is closed. One goroutine
// answers them in turn: an answer needs no upstream, so the work per
// datagram is bounded and nothing queues but in the socket's buffer.
func (s *Server) serveDNSUDP(pc net.PacketConn) error {
	buf := make([]byte, maxDNSMessage)
	var backoff time.Duration
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			if s.retryListener(&backoff, "dns read", err) {
				return http.ErrServerClosed
			}
			continue
		}
		backoff = 0
		start := time.Now()
		reply, d := answerDNS(buf[:n], s.dnsAllowed, maxDNSUDPReply)
		if reply != nil {
			pc.SetWriteDeadline(time.Now().Add(time.Second))
			pc.WriteTo(reply, addr)
		}
		s.logDNS(d, "udp", start)
	}
}

// dnsTCP tracks the DNS listener's TCP connections so that shutdown
// closes them.
type dnsTCP struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// serveDNSTCP answers length-prefixed queries on ln's connections until
// ln is closed, at most maxDNSConns at once, then closes those open.
func (s *Server) serveDNSTCP(ln net.Listener) error {
	sl := newSlotListener(ln, maxDNSConns)
	t := &dnsTCP{conns: map[net.Conn]struct{}{}}
	defer func() {
		t.mu.Lock()
		t.closed = true
		for c := range t.conns {
			c.Close()
		}
		t.mu.Unlock()
		t.wg.Wait()
	}()
	for {
		c, err := s.accept(sl, "dns accept")
		if err != nil {
			return err
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			c.Close()
			return http.ErrServerClosed
		}
		t.conns[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go func() {
			defer t.wg.Done()
			s.handleDNSTCP(c)
			t.mu.Lock()
			delete(t.conns, c)
			t.mu.Unlock()
		}()
	}
}

// handleDNSTCP answers the queries of one connection, each within
// dnsTCPTimeout, until the client closes it, sends a length over
// maxDNSMessage or something that gets no answer, or has asked
// maxDNSTCPQueries.
func (s *Server) handleDNSTCP(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 2+maxDNSMessage)
	for range maxDNSTCPQueries {
		c.SetDeadline(time.Now().Add(dnsTCPTimeout))
		if _, err := io.ReadFull(c, buf[:2]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(buf))
		if n > maxDNSMessage {
			s.logDNS(DNSDecision{Action: DNSDrop, Reason: DNSReasonNotDNS}, "tcp", time.Now())
			return
		}
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			return
		}
		start := time.Now()
		reply, d := answerDNS(buf[:n], s.dnsAllowed, 65535)
		s.logDNS(d, "tcp", start)
		if reply == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(reply)), uint16(len(reply)))
		if _, err := c.Write(append(out, reply...)); err != nil {
			return
		}
	}
}
