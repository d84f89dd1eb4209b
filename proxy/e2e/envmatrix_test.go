//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"keyhole.dev/keyhole/cli"
)

// TestRenderedEnvClients runs the real clients of this machine in the
// sidecar pod's network (newNetnsSandbox), each with exactly the
// environment `keyhole render` writes for examples/github-acme (env.json,
// the trust directory moved to where the test wrote it) plus the PATH and
// HOME an image sets, and the trust files the real `keyhole-proxy
// trust-bundle` writes. Each must get the upstream to see the injected
// request: through HTTPS_PROXY where the client honours it, through the
// transparent listener where it does not (Node's built-in fetch and
// https). docs/render.md has the table of runtimes this backs.
func TestRenderedEnvClients(t *testing.T) {
	tools := map[string]string{}
	for _, name := range []string{"curl", "wget", "git", "gh", "node", "java", "python3", "go", "php"} {
		tools[name] = requireTool(t, name)
	}
	n := newNetnsSandbox(t)

	// The trust files, as the init container writes them.
	trustDir := filepath.Join(n.pub, "trust")
	if err := os.Mkdir(trustDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(proxyBin, "trust-bundle", "--ca", n.w.sandboxCA.CertFile, "--roots", n.w.upstreamCA.CertFile,
		"--out", filepath.Join(trustDir, "bundle.pem"), "--truststore", filepath.Join(trustDir, "truststore.p12"),
		"--wgetrc", filepath.Join(trustDir, "wgetrc"), "--php-ini", filepath.Join(trustDir, "php-keyhole.ini"), "--bundle-path", filepath.Join(trustDir, "bundle.pem")).CombinedOutput(); err != nil {
		t.Fatalf("trust-bundle: %v\n%s", err, out)
	}

	// The rendered environment.
	out := filepath.Join(t.TempDir(), "rendered")
	var stdout, stderr bytes.Buffer
	if code := cli.Main([]string{"render", "-o", out, "../../examples/github-acme"}, &stdout, &stderr); code != 0 {
		t.Fatalf("keyhole render: exit %d\n%s", code, stderr.String())
	}
	raw, err := os.ReadFile(filepath.Join(out, "agents", "support-workspace", "env.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rendered map[string]string
	if err := json.Unmarshal(raw, &rendered); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(n.pub, "home")
	os.Mkdir(home, 0o755)
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home}
	for k, v := range rendered {
		env = append(env, k+"="+strings.ReplaceAll(v, "/etc/keyhole/trust", trustDir))
	}
	sort.Strings(env)

	// Programs for the runtimes that need one.
	progs := t.TempDir()
	goMain := filepath.Join(progs, "main.go")
	writeFile(t, goMain, []byte(`package main

import (
	"fmt"
	"net/http"
	"os"
)

func main() {
	resp, err := http.Get(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(resp.Status)
	if resp.StatusCode != 200 {
		os.Exit(1)
	}
}
`))
	goBin := filepath.Join(n.pub, "goget")
	if out, err := exec.Command(tools["go"], "build", "-o", goBin, goMain).CombinedOutput(); err != nil {
		t.Fatalf("building the Go client: %v\n%s", err, out)
	}
	javaMain := filepath.Join(n.pub, "Get.java")
	writeFile(t, javaMain, []byte(`import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class Get {
    public static void main(String[] args) throws Exception {
        HttpResponse<String> r = HttpClient.newHttpClient().send(
            HttpRequest.newBuilder(URI.create(args[0])).build(), HttpResponse.BodyHandlers.ofString());
        System.out.println(r.statusCode());
        if (r.statusCode() != 200) System.exit(1);
    }
}
`))
	// pyenv's shim needs its own variables: run the interpreter itself.
	py, err := exec.Command(tools["python3"], "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatal(err)
	}
	python := strings.TrimSpace(string(py))

	const api = "https://api.github.com/repos/acme/widgets"
	const nodeOK = ".then(r => { if (r.statusCode !== 200 && r.status !== 200) process.exit(1) })"
	tests := map[string]struct {
		argv        []string
		git         bool // the git upstream must see it, not the API
		transparent bool // it ignores HTTPS_PROXY: the transparent listener must carry it
	}{
		"curl":                                {argv: []string{tools["curl"], "-sS", "-f", "-o", "/dev/null", api}},
		"wget (WGETRC)":                       {argv: []string{tools["wget"], "-q", "-O", "/dev/null", api}},
		"git":                                 {argv: []string{tools["git"], "ls-remote", "https://github.com/acme/widgets.git"}, git: true},
		"gh":                                  {argv: []string{tools["gh"], "api", "/repos/acme/widgets"}},
		"python urllib":                       {argv: []string{python, "-c", "import urllib.request as u; assert u.urlopen('" + api + "').status == 200"}},
		"python requests":                     {argv: []string{python, "-c", "import requests; requests.get('" + api + "').raise_for_status()"}},
		"Go net/http":                         {argv: []string{goBin, api}},
		"Node fetch (no proxy)":               {argv: []string{tools["node"], "-e", "fetch('" + api + "')" + nodeOK + ".catch(e => { console.error(e); process.exit(1) })"}, transparent: true},
		"Node https (no proxy)":               {argv: []string{tools["node"], "-e", "require('https').get('" + api + "', r => process.exit(r.statusCode === 200 ? 0 : 1)).on('error', e => { console.error(e); process.exit(1) })"}, transparent: true},
		"Java HttpClient (JAVA_TOOL_OPTIONS)": {argv: []string{tools["java"], javaMain, api}},
		// libcurl reads https_proxy but no CA variable: curl.cainfo, from
		// the ini file PHP_INI_SCAN_DIR adds.
		"PHP curl (PHP_INI_SCAN_DIR)": {argv: []string{tools["php"], "-r", `$c = curl_init("` + api + `"); curl_setopt($c, CURLOPT_RETURNTRANSFER, true); if (curl_exec($c) === false || curl_getinfo($c, CURLINFO_HTTP_CODE) != 200) { fwrite(STDERR, curl_error($c)); exit(1); }`}},
		// PHP's streams read no proxy variable; openssl.cafile, from the
		// same ini file, makes them trust the bundle.
		"PHP file_get_contents (no proxy)": {argv: []string{tools["php"], "-r", `exit(file_get_contents("` + api + `") === false ? 1 : 0);`}, transparent: true},
		// urllib3 alone reads no proxy variable; version 2 loads the
		// default verify paths, which SSL_CERT_FILE names.
		"python urllib3 2 (no proxy)": {argv: []string{python, "-c", "import urllib3; assert urllib3.__version__.startswith('2.'), urllib3.__version__; assert urllib3.PoolManager().request('GET', '" + api + "').status == 200"}, transparent: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			up := n.api
			if tc.git {
				up = n.w.git
			}
			before := len(up.requests())
			tlsBefore := strings.Count(n.logs.String(), `"method":"TLS"`)
			out, err := n.run(env, home, tc.argv[0], tc.argv[1:]...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			n.w.assertNoSecret(t, "client output", out)
			if tls := strings.Count(n.logs.String(), `"method":"TLS"`); tc.transparent != (tls > tlsBefore) {
				t.Errorf("transparent connections %d, want some: %v", tls-tlsBefore, tc.transparent)
			}
			seen := up.requests()[before:]
			if len(seen) == 0 {
				t.Fatal("the upstream saw no request")
			}
			want := "Bearer " + n.w.token
			if tc.git {
				want = "Basic "
			}
			if a := seen[len(seen)-1].Header.Get("Authorization"); !strings.HasPrefix(a, want) {
				t.Errorf("the upstream's last request had Authorization %q, want the injected credential", a)
			}
		})
	}
}
