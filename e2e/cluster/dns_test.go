//go:build e2e

package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer is the cluster's DNS: it answers A queries for
// <service>.<namespace>.svc.cluster.local with the Service's cluster IP,
// read from the API server, and NXDOMAIN for every other name, so a pod
// resolves nothing outside the cluster. It stands in for CoreDNS, which
// this machine would have to build; what it answers is what CoreDNS's
// kubernetes plugin answers for a ClusterIP Service.
type dnsServer struct {
	conn   net.PacketConn
	client *http.Client
	server string
	token  string
}

func startDNS(addr string, c *cluster) (*dnsServer, error) {
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.pki.caPEM)
	s := &dnsServer{
		conn:   conn,
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
		server: "https://127.0.0.1:" + apiPort,
		token:  c.pki.adminToken,
	}
	go s.serve()
	return s, nil
}

func (s *dnsServer) close() { s.conn.Close() }

func (s *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := s.answer(buf[:n]); resp != nil {
			s.conn.WriteTo(resp, from)
		}
	}
}

func (s *dnsServer) answer(q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil
	}
	question, err := p.Question()
	if err != nil {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: dnsmessage.RCodeNameError}
	var answers []dnsmessage.AResource
	if ip, ok := s.lookup(question.Name.String()); ok {
		rh.RCode = dnsmessage.RCodeSuccess
		if question.Type == dnsmessage.TypeA {
			answers = append(answers, dnsmessage.AResource{A: ip.As4()})
		}
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(question) != nil || b.StartAnswers() != nil {
		return nil
	}
	for _, a := range answers {
		if b.AResource(dnsmessage.ResourceHeader{Name: question.Name, Class: dnsmessage.ClassINET, TTL: 5}, a) != nil {
			return nil
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// lookup resolves <service>.<namespace>.svc.cluster.local. to the
// Service's cluster IP.
func (s *dnsServer) lookup(name string) (netip.Addr, bool) {
	rest, ok := strings.CutSuffix(strings.ToLower(name), ".svc."+dnsDomain+".")
	if !ok {
		return netip.Addr{}, false
	}
	svc, ns, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(ns, ".") {
		return netip.Addr{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.server+"/api/v1/namespaces/"+ns+"/services/"+svc, nil)
	if err != nil {
		return netip.Addr{}, false
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		return netip.Addr{}, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return netip.Addr{}, false
	}
	var obj struct {
		Spec struct {
			ClusterIP string `json:"clusterIP"`
		} `json:"spec"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&obj); err != nil {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(obj.Spec.ClusterIP)
	if err != nil || !ip.Is4() {
		return netip.Addr{}, false
	}
	return ip, true
}
