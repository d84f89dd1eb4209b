package proxy

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// testAllowed is the names of testConfig, as Policy.NameAllowed gives
// them.
func testAllowed(name string) bool {
	switch name {
	case "api.github.com", "github.com", "uploads.github.com", "pypi.org", "files.example":
		return true
	}
	return false
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 0x4b48
	return m
}

func pack(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAnswerDNS: each kind of message gets its decision and reply, apart
// from the network.
func TestAnswerDNS(t *testing.T) {
	long := strings.Repeat(strings.Repeat("a", 63)+".", 3) + strings.Repeat("b", 61) + "."
	withFlags := func(m *dns.Msg, f func(*dns.Msg)) *dns.Msg { f(m); return m }
	tests := map[string]struct {
		raw        []byte
		want       DNSDecision
		wantAnswer bool // one A record, DNSAnswerAddr
		wantQ      bool // the question echoed
	}{
		"allowed name, A": {raw: pack(t, query("api.github.com.", dns.TypeA)),
			want:       DNSDecision{Action: DNSAnswer, Reason: DNSReasonAllowed, Rcode: dns.RcodeSuccess, Name: "api.github.com.", Type: "A"},
			wantAnswer: true, wantQ: true},
		"allowed name in capitals": {raw: pack(t, query("API.GitHub.COM.", dns.TypeA)),
			want:       DNSDecision{Action: DNSAnswer, Reason: DNSReasonAllowed, Rcode: dns.RcodeSuccess, Name: "api.github.com.", Type: "A"},
			wantAnswer: true, wantQ: true},
		"passthrough name": {raw: pack(t, query("pypi.org.", dns.TypeA)),
			want:       DNSDecision{Action: DNSAnswer, Reason: DNSReasonAllowed, Rcode: dns.RcodeSuccess, Name: "pypi.org.", Type: "A"},
			wantAnswer: true, wantQ: true},
		"allowed name, AAAA": {raw: pack(t, query("api.github.com.", dns.TypeAAAA)),
			want:  DNSDecision{Action: DNSAnswer, Reason: DNSReasonNoData, Rcode: dns.RcodeSuccess, Name: "api.github.com.", Type: "AAAA"},
			wantQ: true},
		"allowed name, TXT": {raw: pack(t, query("github.com.", dns.TypeTXT)),
			want:  DNSDecision{Action: DNSAnswer, Reason: DNSReasonNoData, Rcode: dns.RcodeSuccess, Name: "github.com.", Type: "TXT"},
			wantQ: true},
		"data in a name": {raw: pack(t, query("c2VjcmV0.exfil.example.", dns.TypeA)),
			want:  DNSDecision{Action: DNSRefuse, Reason: DNSReasonNameNotAllowed, Rcode: dns.RcodeNameError, Name: "c2vjcmv0.exfil.example.", Type: "A"},
			wantQ: true},
		"data under an allowed name": {raw: pack(t, query("c2VjcmV0.api.github.com.", dns.TypeA)),
			want:  DNSDecision{Action: DNSRefuse, Reason: DNSReasonNameNotAllowed, Rcode: dns.RcodeNameError, Name: "c2vjcmv0.api.github.com.", Type: "A"},
			wantQ: true},
		"search-list candidate": {raw: pack(t, query("api.github.com.agents.svc.cluster.local.", dns.TypeA)),
			want:  DNSDecision{Action: DNSRefuse, Reason: DNSReasonNameNotAllowed, Rcode: dns.RcodeNameError, Name: "api.github.com.agents.svc.cluster.local.", Type: "A"},
			wantQ: true},
		"longest name": {raw: pack(t, query(long, dns.TypeTXT)),
			want:  DNSDecision{Action: DNSRefuse, Reason: DNSReasonNameNotAllowed, Rcode: dns.RcodeNameError, Name: long, Type: "TXT"},
			wantQ: true},
		"class CHAOS": {raw: pack(t, withFlags(query("api.github.com.", dns.TypeTXT), func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS })),
			want:  DNSDecision{Action: DNSRefuse, Reason: DNSReasonClass, Rcode: dns.RcodeRefused, Name: "api.github.com.", Type: "TXT"},
			wantQ: true},
		"an UPDATE": {raw: pack(t, withFlags(query("api.github.com.", dns.TypeA), func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate })),
			want: DNSDecision{Action: DNSRefuse, Reason: DNSReasonOpcode, Rcode: dns.RcodeNotImplemented}},
		"two questions": {raw: pack(t, withFlags(query("api.github.com.", dns.TypeA), func(m *dns.Msg) {
			m.Question = append(m.Question, dns.Question{Name: "leak.exfil.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
		})),
			want: DNSDecision{Action: DNSRefuse, Reason: DNSReasonQuestions, Rcode: dns.RcodeFormatError}},
		"no question": {raw: pack(t, &dns.Msg{MsgHdr: dns.MsgHdr{Id: 0x4b48}}),
			want: DNSDecision{Action: DNSRefuse, Reason: DNSReasonQuestions, Rcode: dns.RcodeFormatError}},
		"a header and garbage": {raw: append(pack(t, &dns.Msg{MsgHdr: dns.MsgHdr{Id: 0x4b48}})[:4], 0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff),
			want: DNSDecision{Action: DNSRefuse, Reason: DNSReasonMalformed, Rcode: dns.RcodeFormatError}},
		"a compression loop": {raw: []byte{0x4b, 0x48, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1},
			want: DNSDecision{Action: DNSRefuse, Reason: DNSReasonMalformed, Rcode: dns.RcodeFormatError}},
		"shorter than a header": {raw: []byte("udp escape"),
			want: DNSDecision{Action: DNSDrop, Reason: DNSReasonNotDNS}},
		"a response": {raw: pack(t, withFlags(query("api.github.com.", dns.TypeA), func(m *dns.Msg) { m.Response = true })),
			want: DNSDecision{Action: DNSDrop, Reason: DNSReasonNotDNS}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			reply, d := answerDNS(tc.raw, testAllowed, maxDNSUDPReply)
			if d != tc.want {
				t.Fatalf("decision %+v, want %+v", d, tc.want)
			}
			if d.Action == DNSDrop {
				if reply != nil {
					t.Fatalf("a reply to a dropped message: %x", reply)
				}
				return
			}
			r := unpackUDPReply(t, reply)
			if r.Id != 0x4b48 || !r.Response || r.Rcode != tc.want.Rcode || r.RecursionAvailable {
				t.Errorf("reply header %+v", r.MsgHdr)
			}
			if gotQ := len(r.Question) == 1; gotQ != tc.wantQ {
				t.Errorf("reply questions %v, want echoed %v", r.Question, tc.wantQ)
			}
			if tc.wantAnswer {
				if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != DNSAnswerAddr || r.Answer[0].Header().Ttl != dnsTTL {
					t.Errorf("answers %v, want one A %s", r.Answer, DNSAnswerAddr)
				}
			} else if len(r.Answer)+len(r.Ns)+len(r.Extra) != 0 {
				t.Errorf("records in a reply that has none: %v", r)
			}
		})
	}
}

// unpackUDPReply fails t unless reply fits a UDP reply and parses as a
// DNS message, and returns the message.
func unpackUDPReply(t *testing.T, reply []byte) *dns.Msg {
	t.Helper()
	if len(reply) > maxDNSUDPReply {
		t.Fatalf("reply of %d bytes", len(reply))
	}
	r := new(dns.Msg)
	if err := r.Unpack(reply); err != nil {
		t.Fatalf("reply does not parse: %v", err)
	}
	return r
}

// TestDNSListener: on real sockets, over UDP and TCP, an allowed name
// resolves to DNSAnswerAddr and a name that carries data gets NXDOMAIN,
// each with one log line and counted.
func TestDNSListener(t *testing.T) {
	h := newHarness(t)
	tests := map[string]struct {
		net, addr, name string
		rcode           int
		answer          bool
		logged          map[string]string
	}{
		"udp, allowed": {net: "udp", addr: h.dnsUDP, name: "api.github.com.", rcode: dns.RcodeSuccess, answer: true,
			logged: map[string]string{"name": "api.github.com.", "type": "A", "decision": "answer", "reason": "allowed", "rcode": "NOERROR", "transport": "udp", "sandbox": "agents/support"}},
		"udp, data in the name": {net: "udp", addr: h.dnsUDP, name: "6b657968.exfil.example.", rcode: dns.RcodeNameError,
			logged: map[string]string{"name": "6b657968.exfil.example.", "type": "A", "decision": "refuse", "reason": "name-not-allowed", "rcode": "NXDOMAIN", "transport": "udp"}},
		"tcp, allowed": {net: "tcp", addr: h.dnsTCP, name: "files.example.", rcode: dns.RcodeSuccess, answer: true,
			logged: map[string]string{"name": "files.example.", "decision": "answer", "reason": "allowed", "transport": "tcp"}},
		"tcp, data in the name": {net: "tcp", addr: h.dnsTCP, name: "74637000.exfil.example.", rcode: dns.RcodeNameError,
			logged: map[string]string{"name": "74637000.exfil.example.", "decision": "refuse", "reason": "name-not-allowed", "rcode": "NXDOMAIN", "transport": "tcp"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := &dns.Client{Net: tc.net, Timeout: 5 * time.Second}
			r, _, err := c.Exchange(query(tc.name, dns.TypeA), tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			if r.Rcode != tc.rcode || (len(r.Answer) == 1) != tc.answer {
				t.Fatalf("reply %v, want rcode %s and answer %v", r, dns.RcodeToString[tc.rcode], tc.answer)
			}
			if tc.answer && r.Answer[0].(*dns.A).A.String() != DNSAnswerAddr {
				t.Errorf("answer %v", r.Answer[0])
			}
			var lines []map[string]any
			eventually(t, "the DNS log line", func() bool {
				lines = dnsLines(t, h.logs.String(), tc.name)
				return len(lines) > 0
			})
			if len(lines) != 1 {
				t.Fatalf("%d log lines for %s, want 1", len(lines), tc.name)
			}
			for k, v := range tc.logged {
				if lines[0][k] != v {
					t.Errorf("log %s = %v, want %q: %v", k, lines[0][k], v, lines[0])
				}
			}
		})
	}
	m := h.get("/metrics")
	for _, want := range []string{
		`keyhole_proxy_dns_queries_total{decision="refuse",reason="name-not-allowed"} 2`,
		`keyhole_proxy_dns_queries_total{decision="answer",reason="allowed"} 2`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %s:\n%s", want, m)
		}
	}
}

// dnsLines returns the "dns" log lines for name.
func dnsLines(t testing.TB, logs, name string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "dns" && m["name"] == name {
			out = append(out, m)
		}
	}
	return out
}

// TestDNSTCPBounds: a TCP client that announces a message longer than
// the listener reads, or sends one that is not DNS, is disconnected
// without an answer; several queries on one connection are answered in
// turn.
func TestDNSTCPBounds(t *testing.T) {
	h := newHarness(t)
	frame := func(b []byte) []byte { return append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...) }
	tests := map[string]struct {
		send    []byte
		answers int // replies before the server closes
	}{
		"length over the bound":  {send: []byte{0xff, 0xff, 1, 2, 3}},
		"not DNS":                {send: frame([]byte("udp escape"))},
		"a response":             {send: frame(pack(t, withResponse(query("api.github.com.", dns.TypeA))))},
		"two queries, then junk": {send: append(append(frame(pack(t, query("api.github.com.", dns.TypeA))), frame(pack(t, query("x.exfil.example.", dns.TypeA)))...), frame([]byte("junk"))...), answers: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", h.dnsTCP)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			// Closed with bytes unread, the connection may end in a
			// reset: closed all the same. A timeout is not.
			got, err := io.ReadAll(c)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the server did not close the connection: %v", err)
			}
			n := 0
			for len(got) >= 2 {
				l := int(binary.BigEndian.Uint16(got))
				if len(got) < 2+l {
					t.Fatalf("a cut reply: %x", got)
				}
				r := new(dns.Msg)
				if err := r.Unpack(got[2 : 2+l]); err != nil {
					t.Fatalf("reply %d: %v", n, err)
				}
				got = got[2+l:]
				n++
			}
			if n != tc.answers || len(got) != 0 {
				t.Fatalf("%d replies (%d bytes left), want %d", n, len(got), tc.answers)
			}
		})
	}
}

func withResponse(m *dns.Msg) *dns.Msg { m.Response = true; return m }

// FuzzAnswerDNS: whatever the sandbox sends, the answer is bounded,
// parses, keeps the query's ID, and holds a record only for a name the
// config allows.
func FuzzAnswerDNS(f *testing.F) {
	for _, m := range []*dns.Msg{
		query("api.github.com.", dns.TypeA), query("x.exfil.example.", dns.TypeA), query("pypi.org.", dns.TypeAAAA),
		withResponse(query("github.com.", dns.TypeA)),
	} {
		b, _ := m.Pack()
		f.Add(b)
	}
	f.Add([]byte{0x4b, 0x48, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1})
	f.Add([]byte("udp escape"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		reply, d := answerDNS(raw, testAllowed, maxDNSUDPReply)
		if reply == nil {
			if d.Action != DNSDrop {
				t.Fatalf("no reply for %+v", d)
			}
			return
		}
		r := unpackUDPReply(t, reply)
		if r.Id != binary.BigEndian.Uint16(raw) || r.Rcode != d.Rcode {
			t.Fatalf("reply %v for decision %+v", r.MsgHdr, d)
		}
		for _, rr := range r.Answer {
			a, ok := rr.(*dns.A)
			if !ok || a.A.String() != DNSAnswerAddr || !testAllowed(strings.TrimSuffix(strings.ToLower(a.Hdr.Name), ".")) {
				t.Fatalf("answer %v", rr)
			}
		}
	})
}

// TestDNSFollowsReload: a host the config drops stops resolving at the
// next reload, as it stops being allowed.
func TestDNSFollowsReload(t *testing.T) {
	h := newHarness(t)
	rcode := func() int {
		r, _, err := (&dns.Client{Net: "udp", Timeout: 5 * time.Second}).Exchange(query("files.example.", dns.TypeA), h.dnsUDP)
		if err != nil {
			t.Fatal(err)
		}
		return r.Rcode
	}
	if got := rcode(); got != dns.RcodeSuccess {
		t.Fatalf("files.example before the reload: %s", dns.RcodeToString[got])
	}
	writeAtomic(t, h.cfgPath, []byte(strings.Replace(testConfig, `"pypi.org", "files.example"`, `"pypi.org"`, 1)))
	eventually(t, "the reload", func() bool { return strings.Contains(h.logs.String(), "config reloaded") })
	if got := rcode(); got != dns.RcodeNameError {
		t.Fatalf("files.example after the reload: %s, want NXDOMAIN", dns.RcodeToString[got])
	}
}
