//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"keyhole.dev/keyhole/internal/proxylog"
)

// The AWS SigV4 test runs the aws CLI in a sandbox environment that
// holds only placeholder keys (docs/spec.md §2) against versitygw, an S3
// server that verifies every signature with the real key, through the
// proxy: an S3 Connection that allows GET, HEAD and PUT under /bucket.

// sigv4Placeholder is the placeholder both of the sandbox's AWS keys
// hold: the Connection is aws-s3.
const sigv4Placeholder = "omnia-injected-aws-s3"

// sigv4Config is the proxy config render writes for that Connection.
// It leaves response bodies unscrubbed, as render does by default:
// versitygw keeps an upload's Content-Encoding: aws-chunked on the object
// (AWS drops it), a coding a scrubbing proxy refuses to pass on.
const sigv4Config = `{
  "apiVersion": "proxy.keyhole.dev/v1alpha1", "kind": "ProxyConfig",
  "sandbox": {"namespace": "agents", "name": "support"},
  "hosts": [
    {"name": "s3.us-east-1.amazonaws.com", "connection": "aws-s3",
     "inject": {"secret": "aws-key", "awsSigV4": {"accessKeyIdKey": "AWS_ACCESS_KEY_ID", "secretAccessKeyKey": "AWS_SECRET_ACCESS_KEY", "region": "us-east-1", "service": "s3"}},
     "rules": [{"methods": ["GET", "HEAD", "PUT"], "pathPrefixes": ["/bucket"]}]}
  ]
}`

// requireVersityGW returns the path of versitygw as scripts/versitygw.sh
// builds it, failing the test, never skipping it, when it is missing.
func requireVersityGW(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("KEYHOLE_CACHE")
	if cache == "" {
		cache = filepath.Join("..", "..", ".cache")
	}
	p, err := filepath.Abs(filepath.Join(cache, "bin", "versitygw"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("versitygw is not built: run scripts/versitygw.sh (make test-deps runs it): %v", err)
	}
	return p
}

// awsCLIs are the aws CLIs the test runs: Debian's (/usr/bin/aws, the
// awscli package), and the one first on PATH when that is another (a pip
// install, whose newer botocore sends aws-chunked uploads with checksum
// trailers).
func awsCLIs(t *testing.T) map[string]string {
	t.Helper()
	const debian = "/usr/bin/aws"
	if _, err := os.Stat(debian); err != nil {
		t.Fatalf("aws is not installed: run apt-get install -y awscli")
	}
	clis := map[string]string{"debian": debian}
	if p, err := exec.LookPath("aws"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && real != debian {
			clis["path"] = p
		}
	}
	return clis
}

// versity is a running versitygw: TLS on a Unix socket, reached through
// a TCP listener of the test's that relays connections to it.
type versity struct {
	addr   string // the relay's
	root   string // the posix backend's directory
	stdout *proxylog.Buffer
}

func startVersity(t *testing.T, bin string, ca *testCA, keyID, secret string) *versity {
	t.Helper()
	dir := t.TempDir()
	v := &versity{root: filepath.Join(dir, "root"), stdout: &proxylog.Buffer{}}
	if err := os.Mkdir(v.root, 0o755); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.LeafPEM("s3.us-east-1.amazonaws.com")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeFile(t, certFile, certPEM)
	writeFile(t, keyFile, keyPEM)
	sock := filepath.Join(dir, "s3.sock")
	cmd := exec.Command(bin, "--port", sock, "--cert", certFile, "--key", keyFile,
		"--region", "us-east-1", "posix", "--sidecar", filepath.Join(dir, "meta"), v.root)
	// The key is the root account's, given in the environment, never on
	// a command line.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "ROOT_ACCESS_KEY_ID=" + keyID, "ROOT_SECRET_ACCESS_KEY=" + secret}
	cmd.Stdout, cmd.Stderr = v.stdout, v.stdout
	if err := os.Mkdir(filepath.Join(dir, "meta"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting versitygw: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			t.Fatalf("versitygw exited: %s", v.stdout.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw not listening after 15s: %s", v.stdout.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	v.addr = ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relay(c, sock)
		}
	}()
	return v
}

// relay copies one connection to the Unix socket and back.
func relay(c net.Conn, sock string) {
	defer c.Close()
	u, err := net.Dial("unix", sock)
	if err != nil {
		return
	}
	defer u.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(u, c)
		u.(*net.UnixConn).CloseWrite()
	}()
	io.Copy(c, u)
	wg.Wait()
}

// TestAWSCLIThroughProxy: the aws CLI, holding placeholder keys, puts and
// gets objects on versitygw through the proxy, which signs each request
// with the real key; versitygw, verifying every signature, accepts them.
// aws s3 rm is refused by the Connection's rules, never signed: the
// object stays, and versitygw never sees a DELETE. Nothing the CLI or
// the proxy prints holds the secret access key.
func TestAWSCLIThroughProxy(t *testing.T) {
	gw := requireVersityGW(t)
	clis := awsCLIs(t)
	b := make([]byte, 16)
	rand.Read(b)
	keyID, secret := "AKIAKEYHOLEE2E000001", "wJalrCANARY"+hex.EncodeToString(b)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.json")
	writeFile(t, cfg, []byte(sigv4Config))
	// versitygw's CA is the one bundle the proxy verifies upstreams
	// with (the last --upstream-ca wins): this test reaches no other.
	awsCA := newCA(t, filepath.Join(dir, "aws-ca"), "keyhole-e2e-aws-ca")
	v := startVersity(t, gw, awsCA, keyID, secret)
	w := newWorld(t, cfg, "--resolve", "s3.us-east-1.amazonaws.com:443:"+v.addr, "--upstream-ca", awsCA.CertFile)
	w.plantSecret(secret)
	newSecretVolume(t, w.secretsDir, "aws-key", map[string]string{"AWS_ACCESS_KEY_ID": keyID, "AWS_SECRET_ACCESS_KEY": secret + "\n"})

	home := t.TempDir()
	awsConfig := filepath.Join(home, "config")
	writeFile(t, awsConfig, []byte("[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n"))
	env := w.sandboxEnv(t,
		"AWS_ACCESS_KEY_ID="+sigv4Placeholder,
		"AWS_SECRET_ACCESS_KEY="+sigv4Placeholder,
		"AWS_CA_BUNDLE="+w.bundle,
		"AWS_CONFIG_FILE="+awsConfig,
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "none"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_PAGER=",
	)
	endpoint := "https://s3.us-east-1.amazonaws.com"
	run := func(t *testing.T, cli string, args ...string) clientResult {
		t.Helper()
		return w.runClient(t, home, env, cli, append([]string{"--endpoint-url", endpoint}, args...)...)
	}
	if r := run(t, clis["debian"], "s3api", "create-bucket", "--bucket", "bucket"); r.err != nil {
		t.Fatalf("create-bucket: %v\n%s", r.err, r.stderr)
	}
	for name, cli := range clis {
		t.Run(name, func(t *testing.T) {
			data := bytes.Repeat([]byte("keyhole signs for the sandbox\n"), 40000) // 1.2 MB: more than one part's hash read whole
			src := filepath.Join(home, name+"-report.csv")
			writeFile(t, src, data)
			for _, c := range []struct{ what, src, key string }{
				{"a large object", src, name + "/report.csv"},
				{"a small one without a type", writeSmall(t, home, name), name + "/notes"},
			} {
				if r := run(t, cli, "s3", "cp", c.src, "s3://bucket/"+c.key); r.err != nil {
					t.Fatalf("aws s3 cp (put, %s): %v\n%s", c.what, r.err, r.stderr)
				}
				back := filepath.Join(home, name+"-back")
				if r := run(t, cli, "s3", "cp", "s3://bucket/"+c.key, back); r.err != nil {
					t.Fatalf("aws s3 cp (get, %s): %v\n%s", c.what, r.err, r.stderr)
				}
				want, _ := os.ReadFile(c.src)
				if got, _ := os.ReadFile(back); !bytes.Equal(got, want) {
					t.Fatalf("%s came back as %d bytes, want %d", c.what, len(got), len(want))
				}
				if got, err := os.ReadFile(filepath.Join(v.root, "bucket", c.key)); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("versitygw holds %d bytes of %s (%v), want %d", len(got), c.what, err, len(want))
				}
			}
			r := run(t, cli, "s3", "rm", "s3://bucket/"+name+"/report.csv")
			if r.err == nil {
				t.Fatalf("aws s3 rm succeeded: the rules allow no DELETE")
			}
			if !strings.Contains(r.stderr, "403") && !strings.Contains(r.stderr, "Forbidden") {
				t.Errorf("aws s3 rm failed otherwise than with the proxy's 403: %s", r.stderr)
			}
			if _, err := os.Stat(filepath.Join(v.root, "bucket", name, "report.csv")); err != nil {
				t.Errorf("the object is gone after a refused rm: %v", err)
			}
		})
	}
	t.Run("signed aws-chunked and presigned", func(t *testing.T) {
		sigv4GoClient(t, w, v)
	})
	if out := v.stdout.String(); strings.Contains(out, "DELETE") {
		t.Errorf("versitygw saw a DELETE the rules refuse:\n%s", out)
	}
	if !strings.Contains(v.stdout.String(), "PUT") {
		t.Errorf("versitygw logged no request; the DELETE check above means nothing:\n%s", v.stdout.String())
	}
}

// writeSmall writes a short object with no extension, which the CLI
// sends with no Content-Type.
func writeSmall(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name+"-notes")
	writeFile(t, p, []byte("a short note\n"))
	return p
}

// sigv4GoClient sends what the aws CLI does not: an aws-chunked upload
// signed chunk by chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD), whose chunk
// signatures the proxy must re-sign as versitygw verifies them, and a GET
// of a presigned URL (the query form), both signed with the placeholder.
func sigv4GoClient(t *testing.T, w *world, v *versity) {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(w.sandboxCA.CertPEM)
	proxyURL, _ := url.Parse(w.proxy.url())
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: roots}}}
	creds := aws.Credentials{AccessKeyID: sigv4Placeholder, SecretAccessKey: sigv4Placeholder}
	data := bytes.Repeat([]byte("chunked and signed\n"), 10000)
	var body bytes.Buffer
	bogus := strings.Repeat("0", 64)
	for rest := data; ; {
		n := min(64<<10, len(rest))
		fmt.Fprintf(&body, "%x;chunk-signature=%s\r\n", n, bogus)
		body.Write(rest[:n])
		body.WriteString("\r\n")
		rest = rest[n:]
		if n == 0 {
			break
		}
	}
	const object = "https://s3.us-east-1.amazonaws.com/bucket/go/chunked.txt"
	req, _ := http.NewRequest("PUT", object, bytes.NewReader(body.Bytes()))
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(len(data)))
	req.Header.Set("X-Amz-Content-Sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	w.assertNoSecret(t, "versitygw's answer", string(out))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("signed aws-chunked PUT: %s %s", resp.Status, out)
	}
	if got, err := os.ReadFile(filepath.Join(v.root, "bucket", "go", "chunked.txt")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("versitygw holds %d bytes (%v), want %d", len(got), err, len(data))
	}
	get, _ := http.NewRequest("GET", object, nil)
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, get, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	resp, err = client.Get(signed)
	if err != nil {
		t.Fatal(err)
	}
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(out, data) {
		t.Fatalf("presigned GET: %s, %d bytes, want %d", resp.Status, len(out), len(data))
	}
}
