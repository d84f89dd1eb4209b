package render

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"keyhole.dev/keyhole/compiler"
)

// envVar is one variable of a sandbox's rendered environment.
type envVar struct {
	Name  string
	Value string
}

// caBundleVars point the common clients at the sandbox's bundle.pem: the
// compiler's list, which a placeholder may not take.
func caBundleVars() []string { return compiler.CABundleEnvNames() }

// javaToolOptions makes every JVM started in the sandbox use the proxy and
// trust the bundle: Java's HTTP clients read no proxy variable and no PEM
// bundle. The JVM prints "Picked up JAVA_TOOL_OPTIONS" on stderr.
func javaToolOptions(proxyHost string, noProxy []string) string {
	non := []string{"localhost", "127.*", "[::1]"}
	for _, n := range noProxy {
		if strings.HasPrefix(n, ".") {
			n = "*" + n
		}
		non = append(non, n)
	}
	port := strconv.Itoa(ProxyPort)
	return strings.Join([]string{
		"-Dhttps.proxyHost=" + proxyHost, "-Dhttps.proxyPort=" + port,
		"-Dhttp.proxyHost=" + proxyHost, "-Dhttp.proxyPort=" + port,
		"-Dhttp.nonProxyHosts=" + strings.Join(non, "|"),
		"-Djavax.net.ssl.trustStore=" + TrustDir + "/" + TrustStoreName,
		"-Djavax.net.ssl.trustStoreType=PKCS12",
	}, " ")
}

// envName is a portable environment variable name: what a shell, a .env
// reader and a Kubernetes container env all accept.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// proxyURL is where the sandbox sends its traffic: the sidecar on loopback,
// or the proxy's Service at its cluster IP (proxyHost).
func proxyURL(sb compiler.Sandbox, opts Options) string {
	return fmt.Sprintf("http://%s:%d", proxyHost(sb, opts), ProxyPort)
}

// proxyHost is the proxy's address as the sandbox's variables give it:
// loopback for the sidecar; in deployment mode a reference to the
// variable Kubernetes sets in each container of the namespace to the
// proxy Service's cluster IP, which the kubelet expands in the
// container's env. The sandbox then needs no DNS to reach its proxy, so
// its NetworkPolicy admits no DNS: a lookup is a channel out of the pod
// (names under a domain of the sandbox's own, or port 53 to a server of
// its own), which no NetworkPolicy can narrow to one name.
func proxyHost(sb compiler.Sandbox, opts Options) string {
	if opts.ProxyMode == ModeDeployment {
		return "$(" + serviceHostVar(sb.Name+longestSuffix) + ")"
	}
	return "127.0.0.1"
}

// serviceHostVar is the variable Kubernetes sets, in each container of
// the Service's namespace started after the Service, to the cluster IP of
// the Service named name: SUPPORT_EGRESS_PROXY_SERVICE_HOST.
func serviceHostVar(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_SERVICE_HOST"
}

// envVars is the sandbox's whole environment, sorted by name: the Plan's
// placeholders, the proxy variables in both cases (curl and others read
// only the lower-case ones), and the CA bundle variables.
func envVars(sb compiler.Sandbox, opts Options) ([]envVar, error) {
	proxy := proxyURL(sb, opts)
	noProxy := strings.Join(append([]string{"localhost", "127.0.0.1", "::1"}, opts.NoProxy...), ",")
	cas := caBundleVars()
	out := make([]envVar, 0, 10+len(cas)+len(sb.Env))
	out = append(out,
		envVar{"HTTPS_PROXY", proxy}, envVar{"https_proxy", proxy},
		envVar{"HTTP_PROXY", proxy}, envVar{"http_proxy", proxy},
		envVar{"NO_PROXY", noProxy}, envVar{"no_proxy", noProxy},
		envVar{"JAVA_TOOL_OPTIONS", javaToolOptions(proxyHost(sb, opts), opts.NoProxy)},
		envVar{"WGETRC", TrustDir + "/" + WgetRCName},
		// The leading separator keeps the directories PHP was built to
		// scan and adds the trust directory, whose one ini file names
		// the bundle: PHP's curl and openssl read no CA variable.
		envVar{"PHP_INI_SCAN_DIR", ":" + TrustDir},
		// Node 22.21+ and 24.5+ route fetch and https through
		// HTTPS_PROXY only when asked; older versions ignore the
		// variable.
		envVar{"NODE_USE_ENV_PROXY", "1"},
	)
	for _, n := range cas {
		out = append(out, envVar{n, BundleFile})
	}
	added := len(out)
	slices.SortFunc(out, compareEnv)
	// The Plan's variables go after the renderer's, each name once;
	// found looks a name up among the ones so far.
	found := func(name string) (envVar, bool) {
		if i, ok := slices.BinarySearchFunc(out[:added], name, compareEnvName); ok {
			return out[i], true
		}
		for _, v := range out[added:] {
			if v.Name == name {
				return v, true
			}
		}
		return envVar{}, false
	}
	for _, e := range sb.Env {
		if !envName.MatchString(e.Name) {
			return nil, fmt.Errorf("%w: placeholder variable name %q is not a portable variable name", ErrInvalidPlan, e.Name)
		}
		if _, ok := slices.BinarySearchFunc(out[:added], e.Name, compareEnvName); ok {
			return nil, fmt.Errorf("%w: placeholder variable %s would override the variable the renderer sets", ErrInvalidPlan, e.Name)
		}
		if err := checkEnvValue(e.Value); err != nil {
			return nil, fmt.Errorf("%w: placeholder variable %s: %w", ErrInvalidPlan, e.Name, err)
		}
		if prev, ok := found(e.Name); ok {
			if prev.Value != e.Value {
				return nil, fmt.Errorf("%w: placeholder variable %s is set twice, for two different connections", ErrInvalidPlan, e.Name)
			}
			continue
		}
		out = append(out, envVar{Name: e.Name, Value: e.Value})
	}
	slices.SortFunc(out, compareEnv)
	return out, nil
}

func compareEnv(a, b envVar) int { return strings.Compare(a.Name, b.Name) }

func compareEnvName(v envVar, name string) int { return strings.Compare(v.Name, name) }

// checkEnvValue accepts what a single-quoted .env value can hold: printable
// text without a single quote. Placeholders, URLs and paths all qualify.
// The value is a placeholder, never a secret, so naming the offending
// character is safe.
func checkEnvValue(v string) error {
	for _, r := range v {
		if r == '\'' || r < 0x20 || r == 0x7f {
			return fmt.Errorf("value holds %s, which a .env file cannot quote portably", strconv.QuoteRune(r))
		}
	}
	return nil
}

// encodeEnvJSON is env.json: one object, name to value, sorted. env is
// sorted by name, each once, and is written as it is; otherwise, or when
// a string is not valid UTF-8, it goes by way of a map and encoding/json,
// which write the same bytes for a sorted env (TestEncodeEnvJSON).
func encodeEnvJSON(env []envVar) ([]byte, error) {
	w := jsonWriter{b: make([]byte, 0, 64*len(env)+4), valid: true}
	n := w.open('{')
	for i, e := range env {
		if i > 0 && env[i-1].Name >= e.Name {
			w.valid = false
			break
		}
		w.key(&n, 1, e.Name)
		w.str(e.Value)
	}
	if w.valid {
		w.close(n, 0, '}')
		return append(w.b, '\n'), nil
	}
	m := make(map[string]string, len(env))
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return encodeJSON(m)
}

// encodeDotEnv is .env: NAME='value' lines. Single quotes make the file
// safe to source from a POSIX shell (no expansion of $, ` or \) and are
// read literally by docker compose and the dotenv libraries; checkEnvValue
// has already refused the one character single quotes cannot hold.
func encodeDotEnv(env []envVar) []byte {
	const header = "# Rendered by keyhole; placeholders only, never a credential.\n"
	n := len(header)
	for _, e := range env {
		n += len(e.Name) + len(e.Value) + len("=''\n")
	}
	b := make([]byte, 0, n)
	b = append(b, header...)
	for _, e := range env {
		b = append(b, e.Name...)
		b = append(b, '=', '\'')
		b = append(b, e.Value...)
		b = append(b, '\'', '\n')
	}
	return b
}

// Runtime is one client runtime and what in the rendered environment
// makes it reach the proxy and trust the sandbox CA.
type Runtime struct {
	// Name names the runtime or client.
	Name string
	// Via is what makes it work: the variables it reads, or how the
	// proxy mode carries a client that reads none.
	Via string
	// Proxy is false for a client that ignores the proxy variables: the
	// sidecar's transparent listener carries it, deployment mode's
	// NetworkPolicy stops it.
	Proxy bool
}

// Runtimes lists the runtimes the rendered environment covers, for
// `keyhole explain` and docs/render.md.
func Runtimes() []Runtime {
	return []Runtime{
		{Name: "curl", Via: "https_proxy, CURL_CA_BUNDLE", Proxy: true},
		{Name: "wget", Via: "https_proxy, WGETRC (ca_certificate)", Proxy: true},
		{Name: "git", Via: "https_proxy, GIT_SSL_CAINFO", Proxy: true},
		{Name: "gh, Go net/http", Via: "HTTPS_PROXY, SSL_CERT_FILE", Proxy: true},
		{Name: "Python urllib, httpx", Via: "HTTPS_PROXY, SSL_CERT_FILE", Proxy: true},
		{Name: "Python requests, pip", Via: "HTTPS_PROXY, REQUESTS_CA_BUNDLE", Proxy: true},
		{Name: "Python aiohttp (trust_env=False, the default)", Via: "SSL_CERT_FILE; ignores the proxy variables"},
		{Name: "Node.js >= 22.21 / 24.5 fetch and https", Via: "NODE_USE_ENV_PROXY, HTTPS_PROXY, NODE_EXTRA_CA_CERTS", Proxy: true},
		{Name: "Node.js 20 fetch and https, plain undici", Via: "NODE_EXTRA_CA_CERTS; ignore the proxy variables"},
		{Name: "undici EnvHttpProxyAgent, axios >= 1.16.1", Via: "HTTPS_PROXY, NODE_EXTRA_CA_CERTS", Proxy: true},
		{Name: "axios <= 1.16.0", Via: "sends GET https://... in clear to the proxy, which refuses it (host-not-allowed): upgrade axios, or pass proxy: false", Proxy: true},
		{Name: "npm", Via: "HTTPS_PROXY, NPM_CONFIG_CAFILE (over an npmrc cafile)", Proxy: true},
		{Name: "Java HttpClient, HttpURLConnection", Via: "JAVA_TOOL_OPTIONS (proxy properties, PKCS#12 trust store)", Proxy: true},
		{Name: ".NET HttpClient, Ruby Net::HTTP", Via: "HTTPS_PROXY, SSL_CERT_FILE", Proxy: true},
		{Name: "PHP curl extension", Via: "https_proxy (libcurl), PHP_INI_SCAN_DIR (curl.cainfo)", Proxy: true},
		{Name: "PHP streams (file_get_contents), Python urllib3 alone, Go got, node-fetch 2", Via: "PHP_INI_SCAN_DIR (openssl.cafile) for PHP, SSL_CERT_FILE for the others; ignore the proxy variables"},
		{Name: "Rust reqwest (native-tls or rustls with native roots), cargo", Via: "HTTPS_PROXY, SSL_CERT_FILE, CARGO_HTTP_CAINFO", Proxy: true},
		{Name: "AWS CLI and SDKs, gcloud, gRPC, Deno", Via: "HTTPS_PROXY, AWS_CA_BUNDLE, CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, DENO_CERT", Proxy: true},
	}
}
