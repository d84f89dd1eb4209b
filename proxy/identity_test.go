package proxy

import (
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// workloadSigV4Config signs S3 requests with the proxy's own AWS
// identity: no Secret.
const workloadSigV4Config = configHead + `
  "scrubResponseBodies": true,
  "hosts": [
    {"name": "s3.us-east-1.amazonaws.com", "connection": "aws-s3",
     "inject": {"awsSigV4": {"identity": "workload", "region": "us-east-1", "service": "s3"}},
     "rules": [{"methods": ["GET", "PUT"], "pathPrefixes": ["/bucket"]}]}
  ]
}`

// awsIdentityStandIn is both of the places a pod's AWS identity comes
// from, on loopback: STS's AssumeRoleWithWebIdentity (the Query API's
// form and XML answer, as the SDK's serializers read them) and the
// container credentials endpoint of EKS Pod Identity (its JSON answer).
// Each checks the proxy's proof (the web identity token, the
// authorization token), hands out temporary credentials that live
// lifetime, and makes the S3 stand-in accept only those.
type awsIdentityStandIn struct {
	t        testing.TB
	s3       *s3Objects
	proof    string // the web identity or authorization token
	role     string
	lifetime time.Duration

	mu     sync.Mutex
	fail   bool
	issued []string // secret access keys and session tokens handed out
	calls  int
}

func (a *awsIdentityStandIn) issue() (id, secret, token string, exp time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	n := len(a.issued) / 2
	id, secret, token = fmt.Sprintf("ASIAKEYHOLE%09d", n), fmt.Sprintf("TMP-SECRET-%d-%s", n, canary), fmt.Sprintf("TMP-SESSION-%d-%s", n, canary)
	a.issued = append(a.issued, secret, token)
	a.s3.accept(secret, token)
	return id, secret, token, time.Now().Add(a.lifetime)
}

func (a *awsIdentityStandIn) failing() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail {
		a.calls++
	}
	return a.fail
}

// sts answers AssumeRoleWithWebIdentity.
func (a *awsIdentityStandIn) sts(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "AssumeRoleWithWebIdentity" ||
		r.Form.Get("WebIdentityToken") != a.proof || r.Form.Get("RoleArn") != a.role || r.Form.Get("RoleSessionName") == "" || a.failing() {
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not authorized: %s</Message></Error><RequestId>r</RequestId></ErrorResponse>`, r.Form.Get("WebIdentityToken"))
		return
	}
	id, secret, token, exp := a.issue()
	w.Header().Set("Content-Type", "text/xml")
	var b strings.Builder
	xml.EscapeText(&b, []byte(secret))
	fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>
<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey><SessionToken>%s</SessionToken><Expiration>%s</Expiration></Credentials>
<AssumedRoleUser><Arn>arn:aws:sts::111122223333:assumed-role/agent/keyhole-proxy</Arn><AssumedRoleId>AROA:keyhole-proxy</AssumedRoleId></AssumedRoleUser>
<SubjectFromWebIdentityToken>system:serviceaccount:agents:support-egress</SubjectFromWebIdentityToken>
</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`,
		id, b.String(), token, exp.UTC().Format(time.RFC3339))
}

// container answers the container credentials endpoint.
func (a *awsIdentityStandIn) container(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != a.proof || a.failing() {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"code":"AccessDenied","message":"you sent %s"}`, r.Header.Get("Authorization"))
		return
	}
	id, secret, token, exp := a.issue()
	json.NewEncoder(w).Encode(map[string]string{"AccessKeyId": id, "SecretAccessKey": secret, "Token": token, "Expiration": exp.UTC().Format(time.RFC3339)})
}

// s3Objects is an S3 bucket that verifies SigV4 as AWS does, with the
// temporary credentials the identity stand-in handed out last: PUT
// keeps an object, GET returns it; a request signed with anything else
// gets 403, its Authorization echoed back as an error page might.
type s3Objects struct {
	mu      sync.Mutex
	secret  string
	token   string
	objects map[string]string
	refused int
}

func (s *s3Objects) accept(secret, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secret, s.token = secret, token
}

func (s *s3Objects) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := verifySigV4(r, body, s.secret)
	if err == nil && (s.token == "" || r.Header.Get("X-Amz-Security-Token") != s.token) {
		err = fmt.Errorf("the security token is not the one handed out last")
	}
	if err != nil {
		s.refused++
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "<Error><Code>InvalidAccessKeyId</Code><Message>%s</Message><Authorization>%s</Authorization></Error>", err, r.Header.Get("Authorization"))
		return
	}
	switch r.Method {
	case http.MethodPut:
		s.objects[r.URL.Path] = string(data)
	case http.MethodGet:
		v, ok := s.objects[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, v)
	}
}

// TestServerSigV4WorkloadIdentity signs with the proxy's own AWS
// identity, from each of the environments EKS gives a pod: a web
// identity token for a role (IRSA), exchanged with STS, and the
// container credentials endpoint (Pod Identity). Objects are put and
// got with the temporary credentials; once half their life is gone
// they are renewed, and the S3 stand-in, which then accepts only the
// new ones, still answers. When the identity refuses, the request is
// refused with credential-unavailable and sent nowhere; the STS call is
// then not repeated for each request. No output holds a temporary
// secret, session token or the pod's token.
func TestServerSigV4WorkloadIdentity(t *testing.T) {
	for _, kind := range []string{"web identity", "container credentials"} {
		t.Run(kind, func(t *testing.T) {
			upCA := newTestCA(t, "aws stand-in CA")
			s3 := &s3Objects{objects: map[string]string{}}
			s3srv := upCA.serve(t, s3, "s3.us-east-1.amazonaws.com")
			id := &awsIdentityStandIn{t: t, s3: s3, proof: "eyJ.pod-token." + canary, role: "arn:aws:iam::111122223333:role/agent", lifetime: 3 * time.Second}
			dir := t.TempDir()
			tokenFile := filepath.Join(dir, "token")
			if err := os.WriteFile(tokenFile, []byte(id.proof), 0o600); err != nil {
				t.Fatal(err)
			}
			var idsrv *httptest.Server
			env := map[string]string{}
			if kind == "web identity" {
				idsrv = httptest.NewTLSServer(http.HandlerFunc(id.sts))
				env = map[string]string{"AWS_ROLE_ARN": id.role, "AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile, "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL_STS": idsrv.URL}
			} else {
				idsrv = httptest.NewServer(http.HandlerFunc(id.container))
				env = map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": idsrv.URL + "/v1/credentials", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokenFile}
			}
			t.Cleanup(idsrv.Close)
			h := newHarnessConfig(t, workloadSigV4Config, resolveTo(upCA, s3srv.Listener.Addr().String(), "s3.us-east-1.amazonaws.com"))
			client := idsrv.Client()
			client.Timeout = 5 * time.Second
			h.srv.oauth.identity.Store(&workloadIdentity{getenv: func(k string) string { return env[k] }, client: client})

			var outs []string
			do := func(method, path, body string, want int) string {
				t.Helper()
				resp, err := h.client().Do(sandboxSigned(t, method, "https://s3.us-east-1.amazonaws.com"+path, "", []byte(body), "s3", "us-east-1", false, nil))
				if err != nil {
					t.Fatal(err)
				}
				b := readBody(t, resp)
				outs = append(outs, b, resp.Header.Get(policy.RefusedHeader))
				if resp.StatusCode != want {
					t.Fatalf("%s %s: %s (%s), want %d: %s", method, path, resp.Status, resp.Header.Get(policy.RefusedHeader), want, b)
				}
				return b
			}
			do("PUT", "/bucket/a.txt", "first object", http.StatusOK)
			if got := do("GET", "/bucket/a.txt", "", http.StatusOK); got != "first object" {
				t.Fatalf("GET /bucket/a.txt: %q", got)
			}
			id.mu.Lock()
			calls := id.calls
			id.mu.Unlock()
			if calls != 1 {
				t.Fatalf("%d identity calls for two requests within the credentials' life, want 1", calls)
			}
			time.Sleep(id.lifetime/2 + 200*time.Millisecond)
			do("PUT", "/bucket/b.txt", "second object", http.StatusOK)
			if got := do("GET", "/bucket/b.txt", "", http.StatusOK); got != "second object" {
				t.Fatalf("GET /bucket/b.txt: %q", got)
			}
			id.mu.Lock()
			calls = id.calls
			id.mu.Unlock()
			if calls != 2 {
				t.Fatalf("%d identity calls after half the credentials' life, want 2", calls)
			}

			// The identity stops answering; the credentials expire.
			id.mu.Lock()
			id.fail = true
			id.mu.Unlock()
			time.Sleep(id.lifetime + 200*time.Millisecond)
			s3.mu.Lock()
			before := len(s3.objects) + s3.refused
			s3.mu.Unlock()
			for range 5 {
				do("GET", "/bucket/a.txt", "", http.StatusBadGateway)
				if r := outs[len(outs)-1]; r != string(policy.ReasonCredentialUnavailable) {
					t.Fatalf("refused with %q, want credential-unavailable", r)
				}
			}
			s3.mu.Lock()
			after := len(s3.objects) + s3.refused
			s3.mu.Unlock()
			if after != before {
				t.Errorf("a request the identity could not sign reached S3")
			}
			id.mu.Lock()
			calls = id.calls
			id.mu.Unlock()
			if calls != 3 {
				t.Errorf("%d identity calls, want 3: a refusal is held, not asked again for each request", calls)
			}
			outs = append(outs, h.logs.String(), h.get("/metrics"))
			id.mu.Lock()
			leaks := append([]string{id.proof}, id.issued...)
			id.mu.Unlock()
			noLeak(t, outs, leaks...)
		})
	}
}

// workloadGoogleConfig has the proxy ask its metadata server for an
// access token for api.example and an ID token for run.example.
const workloadGoogleConfig = configHead + `
  "scrubResponseBodies": true,
  "hosts": [
    {"name": "api.example", "connection": "gcp",
     "inject": {"googleServiceAccount": {"identity": "workload", "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}},
     "rules": [{"methods": ["GET", "POST"], "pathPrefixes": ["/v1"]}]},
    {"name": "run.example", "connection": "gcp-run",
     "inject": {"googleServiceAccount": {"identity": "workload", "audience": "https://run.example"}},
     "rules": [{"methods": ["GET"], "pathPrefixes": ["/run"]}]}
  ]
}`

// metadataStandIn is GKE's metadata server on loopback: it answers only
// requests with Metadata-Flavor: Google, hands out the default service
// account's access tokens (for the scopes asked) and ID tokens (for the
// audience asked, as JWTs with an exp), and counts every request it
// gets. The API behind it accepts only the tokens it handed out last.
type metadataStandIn struct {
	lifetime time.Duration

	mu       sync.Mutex
	requests int
	asked    []string
	access   string // the access token the API accepts
	id       string // the ID token the API accepts
	minted   []string
	fail     bool
}

func (m *metadataStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests++
	if r.Header.Get("Metadata-Flavor") != "Google" || m.fail {
		http.Error(w, "Missing Metadata-Flavor:Google header", http.StatusForbidden)
		return
	}
	n := len(m.minted)
	switch r.URL.Path {
	case "/computeMetadata/v1/instance/service-accounts/default/token":
		m.asked = append(m.asked, "scopes="+r.URL.Query().Get("scopes"))
		m.access = fmt.Sprintf("ya29.%d-%s", n, canary)
		m.minted = append(m.minted, m.access)
		w.Header().Set("Metadata-Flavor", "Google")
		json.NewEncoder(w).Encode(map[string]any{"access_token": m.access, "expires_in": int(m.lifetime.Seconds()), "token_type": "Bearer"})
	case "/computeMetadata/v1/instance/service-accounts/default/identity":
		m.asked = append(m.asked, "audience="+r.URL.Query().Get("audience")+" format="+r.URL.Query().Get("format"))
		claims, _ := json.Marshal(map[string]any{"aud": r.URL.Query().Get("audience"), "exp": time.Now().Add(m.lifetime).Unix(), "n": n})
		m.id = "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString(claims) + ".c2ln" + strings.ReplaceAll(canary, "-", "")
		m.minted = append(m.minted, m.id)
		io.WriteString(w, m.id)
	default:
		http.NotFound(w, r)
	}
}

// api answers a request carrying the token handed out last, and 401
// otherwise, echoing the Authorization it got.
func (m *metadataStandIn) api(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	want := m.access
	if r.Host == "run.example" {
		want = m.id
	}
	m.mu.Unlock()
	w.Header().Set("X-Echo", r.Header.Get("Authorization"))
	if r.Header.Get("Authorization") != "Bearer "+want {
		w.WriteHeader(http.StatusUnauthorized)
	}
	fmt.Fprintf(w, "you sent %s\n", r.Header.Get("Authorization"))
}

func (m *metadataStandIn) revoke() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.access, m.id = "revoked", "revoked"
}

// TestServerGoogleWorkloadIdentity has the proxy ask its metadata server
// (GCE_METADATA_HOST) for an access token of the Connection's scopes
// and an ID token for its audience: the API gets them, the proxy keeps
// each for half its life, renews one an upstream refused with a 401, and
// refuses with credential-unavailable when the metadata server does.
// The metadata server is the proxy's to ask, never the sandbox's: its
// address, its name and the link-local metadata address stay refused to
// the sandbox, and the stand-in sees no request but the proxy's.
func TestServerGoogleWorkloadIdentity(t *testing.T) {
	md := &metadataStandIn{lifetime: time.Hour}
	mdsrv := httptest.NewServer(md)
	t.Cleanup(mdsrv.Close)
	t.Setenv("GCE_METADATA_HOST", mdsrv.Listener.Addr().String())
	upCA := newTestCA(t, "api stand-in CA")
	api := upCA.serve(t, http.HandlerFunc(md.api), "api.example", "run.example")
	h := newHarnessConfig(t, workloadGoogleConfig, resolveTo(upCA, api.Listener.Addr().String(), "api.example", "run.example"))
	var outs []string
	get := func(url string, want int) {
		t.Helper()
		resp, body := h.bearer("GET", url, "")
		outs = append(outs, body, resp.Header.Get("X-Echo"))
		if resp.StatusCode != want {
			t.Fatalf("GET %s: %s (%s), want %d: %s", url, resp.Status, resp.Header.Get(policy.RefusedHeader), want, body)
		}
	}
	get("https://api.example/v1/things", http.StatusOK)
	get("https://api.example/v1/things", http.StatusOK)
	get("https://run.example/run", http.StatusOK)
	md.mu.Lock()
	asked := strings.Join(md.asked, "; ")
	md.mu.Unlock()
	if want := "scopes=https://www.googleapis.com/auth/cloud-platform; audience=https://run.example format=full"; asked != want {
		t.Fatalf("the metadata server was asked %q, want %q", asked, want)
	}
	md.revoke()
	get("https://api.example/v1/things", http.StatusOK)
	get("https://run.example/run", http.StatusOK)
	md.mu.Lock()
	n := len(md.minted)
	md.mu.Unlock()
	if n != 4 {
		t.Fatalf("%d tokens handed out, want 4: one of each, and each again after the 401", n)
	}

	// The sandbox cannot reach the metadata server, by any name.
	md.mu.Lock()
	before := md.requests
	md.mu.Unlock()
	for _, target := range []string{"169.254.169.254:80", "169.254.169.254:443", "metadata.google.internal:80", mdsrv.Listener.Addr().String()} {
		c, _, resp := h.connect(target)
		c.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonHostNotAllowed) {
			t.Errorf("CONNECT %s = %s %q, want 403 host-not-allowed", target, resp.Status, resp.Header.Get(policy.RefusedHeader))
		}
	}
	req, _ := http.NewRequest("GET", "http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token", nil)
	req.Header.Set("Metadata-Flavor", "Google")
	mdResp, err := h.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, readBody(t, mdResp))
	if mdResp.StatusCode != http.StatusForbidden {
		t.Errorf("GET http://169.254.169.254/... through the proxy = %s, want 403", mdResp.Status)
	}
	md.mu.Lock()
	after := md.requests
	md.fail = true
	md.mu.Unlock()
	if after != before {
		t.Errorf("the sandbox's requests reached the metadata server")
	}

	// The metadata server refuses: the request is refused, not sent
	// without a token.
	md.revoke()
	time.Sleep(staleGap)
	resp, body := h.bearer("GET", "https://api.example/v1/things", "")
	outs = append(outs, body)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a 401 the metadata server cannot renew: %s, want the API's 401 as it came", resp.Status)
	}
	h2 := newHarnessConfig(t, workloadGoogleConfig, resolveTo(upCA, api.Listener.Addr().String(), "api.example"))
	resp, body = h2.bearer("GET", "https://api.example/v1/things", "")
	outs = append(outs, body)
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(policy.RefusedHeader) != string(policy.ReasonCredentialUnavailable) {
		t.Fatalf("with the metadata server refusing: %s %q, want 502 credential-unavailable", resp.Status, resp.Header.Get(policy.RefusedHeader))
	}
	md.mu.Lock()
	minted := append([]string(nil), md.minted...)
	md.mu.Unlock()
	noLeak(t, append(outs, h.logs.String(), h2.logs.String(), h.get("/metrics")), minted...)
}
