package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"keyhole.dev/keyhole/proxy/config"
)

// proxyConfigCases are configs whose encoding exercises every field, every
// omitempty, nil against empty lists and the strings JSON escapes.
func proxyConfigCases() map[string]config.Config {
	full := config.Config{
		APIVersion: config.APIVersion,
		Kind:       config.Kind,
		Sandbox:    config.SandboxRef{Namespace: "agents", Name: "support"},
		SecretsDir: config.DefaultSecretsDir,
		CA:         config.CA{CertFile: config.DefaultCACert, KeyFile: config.DefaultCAKey},
		Hosts: []config.Host{
			{
				Name: "api.github.com", Connection: "github",
				Inject: config.Inject{Secret: "gh", Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .token }}"}},
				Rules: []config.Rule{
					{Methods: []string{"GET", "HEAD"}, PathPrefixes: []string{"/repos/acme", "/user"}},
					{Methods: []string{"GET"}, PathPatterns: []string{"/@acme%2F*"}, EncodedSlash: config.EncodedSlashSegment},
					{Methods: []string{"GET"}, PathPrefixes: []string{"/v1/realtime"}, WebSocket: true},
					{Methods: []string{"POST"}, PathPatterns: []string{"/*/*/git-upload-pack", "/a/**"}, Body: map[string][]string{"operation": {"download"}, "a": {"x", "y"}, "z": nil, "e": {}}},
					{Methods: []string{"POST"}, PathPrefixes: []string{"/graphql"}, GraphQL: &config.GraphQL{Operations: []string{"query"}}},
					{Methods: []string{"POST"}, PathPrefixes: []string{"/graphql"}, GraphQL: &config.GraphQL{Operations: []string{"query", "mutation"}, PersistedQueries: true, Batches: true}},
					{Methods: []string{"POST", "GET", "DELETE"}, PathPrefixes: []string{"/mcp"}, MCP: &config.MCP{Methods: []string{"initialize", "tools/call"}, Tools: []string{"get_issue", "list_issues"},
						Arguments: map[string]map[string][]string{"get_issue": {"owner": {"acme"}, "a": {"x", "y"}}, "list_issues": {}}, Resources: []string{"repo://acme/"}, Responses: true}},
					{Methods: []string{"POST"}, PathPrefixes: []string{"/mcp2"}, MCP: &config.MCP{Methods: []string{"ping"}}},
				},
			},
			{
				Name: "gitlab.example.com", Connection: "gitlab",
				Inject: config.Inject{Secret: "gl", Header: &config.HeaderInject{Name: "PRIVATE-TOKEN", Value: "{{ .token }}"}},
				Rules: []config.Rule{
					{Methods: []string{"GET"}, PathPrefixes: []string{"/api/v4"}},
					{Methods: []string{"GET", "POST"}, PathPatterns: []string{"/acme/*/info/refs", "/acme/*/git-upload-pack"}, Inject: &config.Inject{Secret: "gl", Basic: &config.BasicInject{UsernameKey: "user", PasswordKey: "token"}}},
				},
			},
			{Name: "registry.npmjs.org", Connection: "npm", Audit: true, Inject: config.Inject{Secret: "npm", Basic: &config.BasicInject{UsernameKey: "user", PasswordKey: "pass"}}},
			{Name: "api.openai.com", Connection: "openai", Inject: config.Inject{Secret: "oa", Substitute: &config.SubstituteInject{Placeholder: "omnia-injected-openai", Key: "key", Headers: []string{"Authorization", "X-Api-Key"}}}},
			{Name: "x.example.com", Connection: "x", Inject: config.Inject{Secret: "x", Substitute: &config.SubstituteInject{Placeholder: "p", Key: "k", Headers: []string{}}}},
			{Name: "api.github.com", Connection: "gh-app", Inject: config.Inject{Secret: "gh", GitHubApp: &config.GitHubAppInject{AppID: 1234567, InstallationID: 89012345, PrivateKeyKey: "private-key.pem", API: "api.github.com", Scheme: "token",
				Repositories: []string{"gadgets", "widgets"}, Permissions: map[string]string{"pull_requests": "write", "contents": "read", "metadata": "read"}}}},
			{Name: "github.com", Connection: "gh-app", Inject: config.Inject{Secret: "gh", GitHubApp: &config.GitHubAppInject{AppID: 1, Owner: "acme/widgets", PrivateKeyKey: "k", API: "api.github.com", Scheme: "basic"}}},
			{Name: "s3.us-east-1.amazonaws.com", Connection: "aws", Inject: config.Inject{Secret: "aws", AWSSigV4: &config.AWSSigV4Inject{AccessKeyIDKey: "AWS_ACCESS_KEY_ID", SecretAccessKeyKey: "AWS_SECRET_ACCESS_KEY", SessionTokenKey: "AWS_SESSION_TOKEN", Region: "us-east-1", Service: "s3"}}},
			{Name: "bedrock-runtime.us-west-2.amazonaws.com", Connection: "aws", Inject: config.Inject{Secret: "aws", AWSSigV4: &config.AWSSigV4Inject{AccessKeyIDKey: "id", SecretAccessKeyKey: "key", Region: "us-west-2", Service: "bedrock"}}},
			{Name: "api.acme.example", Connection: "acme", Inject: config.Inject{Secret: "acme", OAuth2: &config.OAuth2Inject{TokenURL: "https://auth.acme.example/oauth/token", Grant: "refreshToken",
				ClientIDKey: "client-id", ClientSecretKey: "client-secret", RefreshTokenKey: "refresh-token", Scopes: []string{"read", "write"}, Audience: "https://api.acme.example", Resource: "urn:acme"}}},
			{Name: "m2m.acme.example", Connection: "acme-m2m", Inject: config.Inject{Secret: "acme", OAuth2: &config.OAuth2Inject{TokenURL: "https://auth.acme.example/oauth/token", Grant: "clientCredentials", ClientIDKey: "id", ClientSecretKey: "s"}}},
			{Name: "zero.acme.example", Connection: "acme-zero", Inject: config.Inject{Secret: "acme", OAuth2: &config.OAuth2Inject{}, Google: &config.GoogleInject{}}},
			{Name: "run.example", Connection: "gcp", Inject: config.Inject{Secret: "gsa", Google: &config.GoogleInject{KeyKey: "key.json", TokenURL: config.GoogleTokenURL, Audience: "https://run.example"}}},
			{Name: "s3.eu-west-1.amazonaws.com", Connection: "aws-workload", Inject: config.Inject{AWSSigV4: &config.AWSSigV4Inject{Identity: config.IdentityWorkload, Region: "eu-west-1", Service: "s3"}}},
			{Name: "pubsub.googleapis.com", Connection: "gcp-workload", Inject: config.Inject{Google: &config.GoogleInject{Identity: config.IdentityWorkload, Scopes: []string{"https://www.googleapis.com/auth/pubsub"}}}},
			{Name: "run-workload.example", Connection: "gcp-workload-run", Inject: config.Inject{Google: &config.GoogleInject{Identity: config.IdentityWorkload, Audience: "https://run-workload.example"}}},
			{Name: "storage.googleapis.com", Connection: "gcp-storage", Inject: config.Inject{Secret: "gsa", Google: &config.GoogleInject{KeyKey: "key.json", TokenURL: config.GoogleTokenURL, Scopes: []string{"https://www.googleapis.com/auth/devstorage.read_only"}}}},
		},
		Passthrough:         []string{"proxy.golang.org", "sum.golang.org"},
		InternalHosts:       []string{"api.github.com", "proxy.golang.org"},
		ScrubResponseBodies: true,
		UpstreamProxy: &config.UpstreamProxy{URL: "http://squid.egress:3128", Auth: &config.BasicInjectSecret{Secret: "corp-proxy", UsernameKey: "user", PasswordKey: "pass"},
			NoProxy: []string{".corp.example", "10.0.0.0/8"}, Resolve: config.ResolveUpstream, AllowInternalAddress: true},
	}
	escapes := full
	escapes.Hosts = []config.Host{{
		Name: "a<b>&c", Connection: `q"uo\te`,
		Inject: config.Inject{Secret: "\x00\x01\x1f\x7f", Header: &config.HeaderInject{Name: "\b\f\n\r\t", Value: "line\u2028para\u2029 é ☃ 😀 \ufffd ${X}"}},
		Rules:  []config.Rule{{Methods: nil}, {Methods: []string{}}, {Methods: []string{""}, Body: map[string][]string{"<&>": {"\u2028"}, "é": {"\"\\"}}}},
	}}
	return map[string]config.Config{
		"every field":       full,
		"escaped strings":   escapes,
		"zero":              {},
		"upstream url only": {UpstreamProxy: &config.UpstreamProxy{URL: "http://proxy:3128"}},
		"empty lists":       {Hosts: []config.Host{}, Passthrough: []string{}, InternalHosts: []string{}},
		"empty nested":      {Hosts: []config.Host{{Rules: []config.Rule{}}}},
		"CA cert only":      {CA: config.CA{CertFile: "c"}},
		"no namespace":      {Sandbox: config.SandboxRef{Name: "n"}},
		"rule without body": {Hosts: []config.Host{{Rules: []config.Rule{{Methods: []string{"GET"}, Body: map[string][]string{}}}}}},
		"mcp nil and empty": {Hosts: []config.Host{{Rules: []config.Rule{
			{Methods: []string{"POST"}, MCP: &config.MCP{}},
			{Methods: []string{"POST"}, MCP: &config.MCP{Methods: []string{}, Tools: []string{}, Resources: []string{}, Arguments: map[string]map[string][]string{}}},
			{Methods: []string{"POST"}, MCP: &config.MCP{Methods: []string{"<&>\u2028"}, Arguments: map[string]map[string][]string{"é": {"\"\\": nil}}}},
		}}}},
		"graphql nil and empty": {Hosts: []config.Host{{Rules: []config.Rule{
			{Methods: []string{"POST"}, GraphQL: &config.GraphQL{}},
			{Methods: []string{"POST"}, GraphQL: &config.GraphQL{Operations: []string{}}},
			{Methods: []string{"POST"}, GraphQL: &config.GraphQL{Operations: []string{"<&>\u2028"}, Batches: true}},
		}}}},
	}
}

// TestAppendProxyConfig: the direct writer produces, byte for byte, what
// the generic path through encoding/json does, and flags invalid UTF-8.
func TestAppendProxyConfig(t *testing.T) {
	for name, c := range proxyConfigCases() {
		t.Run(name, func(t *testing.T) {
			_, want, err := encodeGeneric(c)
			if err != nil {
				t.Fatal(err)
			}
			got, valid := appendProxyConfig(nil, &c)
			if !valid {
				t.Fatal("valid UTF-8 reported invalid")
			}
			if !bytes.Equal(got, want) {
				t.Errorf("appendProxyConfig wrote\n%s\nthe generic path writes\n%s", got, want)
			}
		})
	}
	invalid := map[string]config.Config{
		"host name":  {Hosts: []config.Host{{Name: "a\xffb"}}},
		"body field": {Hosts: []config.Host{{Rules: []config.Rule{{Body: map[string][]string{"\xfe": {"v"}}}}}}},
		"truncated":  {Sandbox: config.SandboxRef{Name: "\xe2\x80"}},
	}
	for name, c := range invalid {
		t.Run("invalid UTF-8 in "+name, func(t *testing.T) {
			if _, valid := appendProxyConfig(nil, &c); valid {
				t.Error("invalid UTF-8 reported valid")
			}
		})
	}
}

// TestAppendProxyConfigFields: appendProxyConfig writes each field of
// config.Config and the types within it; a field added there must be
// added to it (and to proxyConfigCases), or a config would lose it on the
// way to the proxy. The check after decoding compares what this writer
// writes, so it would not notice.
func TestAppendProxyConfigFields(t *testing.T) {
	written := map[string][]string{
		"Config":            {"apiVersion", "kind", "sandbox", "secretsDir", "ca", "hosts", "passthrough", "internalHosts", "scrubResponseBodies", "upstreamProxy"},
		"UpstreamProxy":     {"url", "auth", "noProxy", "resolve", "allowInternalAddress"},
		"BasicInjectSecret": {"secret", "usernameKey", "passwordKey"},
		"SandboxRef":        {"namespace", "name"},
		"CA":                {"certFile", "keyFile"},
		"Host":              {"name", "connection", "inject", "rules", "audit"},
		"Inject":            {"secret", "header", "basic", "substitute", "githubApp", "awsSigV4", "oauth2", "googleServiceAccount"},
		"AWSSigV4Inject":    {"accessKeyIdKey", "secretAccessKeyKey", "sessionTokenKey", "identity", "region", "service"},
		"OAuth2Inject":      {"tokenUrl", "grant", "clientIdKey", "clientSecretKey", "refreshTokenKey", "scopes", "audience", "resource"},
		"GoogleInject":      {"identity", "keyKey", "tokenUrl", "scopes", "audience"},
		"GitHubAppInject":   {"appId", "installationId", "owner", "privateKeyKey", "api", "scheme", "repositories", "permissions"},
		"HeaderInject":      {"name", "value"},
		"BasicInject":       {"usernameKey", "passwordKey"},
		"SubstituteInject":  {"placeholder", "key", "headers"},
		"Rule":              {"methods", "pathPrefixes", "pathPatterns", "body", "graphql", "mcp", "encodedSlash", "websocket", "inject"},
		"GraphQL":           {"operations", "persistedQueries", "batches"},
		"MCP":               {"methods", "tools", "arguments", "resources", "responses"},
	}
	seen := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ.Name()] {
			return
		}
		seen[typ.Name()] = true
		var tags []string
		for f := range typ.Fields() {
			tags = append(tags, strings.Split(f.Tag.Get("json"), ",")[0])
			walk(f.Type)
		}
		want, ok := written[typ.Name()]
		if !ok {
			t.Errorf("config.%s is not written by appendProxyConfig", typ.Name())
			return
		}
		if !slices.Equal(slices.Sorted(slices.Values(tags)), slices.Sorted(slices.Values(want))) {
			t.Errorf("config.%s has the fields %v; appendProxyConfig writes %v", typ.Name(), tags, want)
		}
	}
	walk(reflect.TypeFor[config.Config]())
	if len(seen) != len(written) {
		t.Errorf("appendProxyConfig writes %d types, config.Config holds %d", len(written), len(seen))
	}
}

// FuzzAppendProxyConfig: for any strings, the direct writer and the
// generic path write the same bytes, or the writer reports invalid UTF-8.
func FuzzAppendProxyConfig(f *testing.F) {
	f.Add("api.github.com", "Bearer {{ .token }}", "/repos", "operation", "GET", true)
	f.Add("a<b>", "\u2028\x00\"\\", "", "", "", false)
	f.Add("\xff", "é", "\t", "\xfe", "\x7f", true)
	f.Fuzz(func(t *testing.T, host, value, path, field, method string, scrub bool) {
		c := config.Config{
			APIVersion: config.APIVersion, Kind: config.Kind,
			Sandbox: config.SandboxRef{Name: host, Namespace: value},
			Hosts: []config.Host{{
				Name: host, Connection: method,
				Inject: config.Inject{Secret: field, Header: &config.HeaderInject{Name: method, Value: value}},
				Rules:  []config.Rule{{Methods: []string{method}, PathPrefixes: []string{path}, Body: map[string][]string{field: {value, path}}}},
			}},
			Passthrough:         []string{path, host},
			ScrubResponseBodies: scrub,
		}
		got, valid := appendProxyConfig(nil, &c)
		_, want, err := encodeGeneric(c)
		if err != nil {
			t.Fatal(err)
		}
		if valid && !bytes.Equal(got, want) {
			t.Fatalf("appendProxyConfig wrote\n%s\nthe generic path writes\n%s", got, want)
		}
		// Each string on its own: two halves of a character are each
		// invalid, though valid put together.
		allValid := true
		for _, s := range []string{host, value, path, field, method} {
			allValid = allValid && utf8.ValidString(s)
		}
		if !valid && allValid {
			t.Fatal("valid UTF-8 reported invalid")
		}
		checkReadBack(t, c)
	})
}

// TestProxyConfigReadBack: what appendProxyConfig writes is what the
// proxy loads (see checkReadBack), for configs the proxy accepts and for
// configs it refuses.
func TestProxyConfigReadBack(t *testing.T) {
	cases := proxyConfigCases()
	valid := cases["every field"]
	valid.Hosts = slices.Clone(valid.Hosts[:3])
	valid.Hosts[0].Rules = []config.Rule{
		{Methods: []string{"GET", "HEAD"}, PathPrefixes: []string{"/repos/acme", "/user"}},
		{Methods: []string{"POST"}, PathPatterns: []string{"/*/*/git-upload-pack", "/a/**"}, Body: map[string][]string{"operation": {"download"}}},
		{Methods: []string{"POST"}, PathPrefixes: []string{"/graphql"}, GraphQL: &config.GraphQL{Operations: []string{"query"}, Batches: true}},
	}
	cases["valid"] = valid
	if err := valid.Validate(); err != nil {
		t.Fatalf("the valid case is invalid: %v", err)
	}
	nilAndEmpty := valid
	nilAndEmpty.Hosts = slices.Clone(valid.Hosts)
	nilAndEmpty.Hosts[2].Inject.Substitute = &config.SubstituteInject{Placeholder: "omnia-injected-openai", Key: "key", Headers: []string{}}
	nilAndEmpty.Hosts[0].Rules = []config.Rule{{Methods: []string{"GET"}, PathPrefixes: []string{}, PathPatterns: []string{"/a"}, Body: map[string][]string{}}}
	cases["empty lists the proxy reads as nil"] = nilAndEmpty
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { checkReadBack(t, c) })
	}
}

// checkReadBack holds appendProxyConfig to what a render relies on when
// it validates the config it wrote rather than reading the bytes back:
// config.Decode decodes what was written, accepts it exactly when
// c.Validate does, with the same errors, and what it reads writes the same
// bytes again, so no field is lost or changed on the way to the proxy.
func checkReadBack(t *testing.T, c config.Config) {
	t.Helper()
	out, valid := appendProxyConfig(nil, &c)
	if !valid {
		return
	}
	loaded, err := config.Decode(out)
	if errors.Is(err, config.ErrDecode) {
		t.Fatalf("the proxy cannot decode what was written: %v\n%s", err, out)
	}
	if want := c.Validate(); fmt.Sprint(err) != fmt.Sprint(want) {
		t.Fatalf("the proxy loading what was written says\n%v\nvalidating the config says\n%v", err, want)
	}
	if err != nil {
		// Refused: read the bytes as Decode does before it validates.
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.DisallowUnknownFields()
		loaded = &config.Config{}
		if err := dec.Decode(loaded); err != nil {
			t.Fatalf("decoding what was written: %v", err)
		}
	}
	if back, _ := appendProxyConfig(nil, loaded); !bytes.Equal(back, out) {
		t.Fatalf("what the proxy reads back writes\n%s\nwhat was written is\n%s", back, out)
	}
}

// TestEncodeEnvJSON: env.json written directly is what encoding/json
// writes for the same variables as a map, whatever the names and values
// hold, sorted or not.
func TestEncodeEnvJSON(t *testing.T) {
	tests := map[string][]envVar{
		"none":          {},
		"sorted":        {{"A", "1"}, {"HTTPS_PROXY", "http://127.0.0.1:3128"}, {"a", "x"}},
		"escapes":       {{"A", `q"b\s`}, {"B", "<&>"}, {"C", "\u2028é\x01\t"}},
		"invalid UTF-8": {{"A", "a\xffb"}, {"B", "\xe2\x80"}},
		"unsorted":      {{"B", "1"}, {"A", "2"}},
		"twice":         {{"A", "1"}, {"A", "2"}},
	}
	for name, env := range tests {
		t.Run(name, func(t *testing.T) {
			m := map[string]string{}
			for _, e := range env {
				m[e.Name] = e.Value
			}
			want, err := encodeJSON(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := encodeEnvJSON(env)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("encodeEnvJSON wrote\n%s\nencoding/json writes\n%s", got, want)
			}
		})
	}
}
