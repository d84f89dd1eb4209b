package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadExample(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "github-acme.json"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Sandbox.Name != "support" || len(c.Hosts) != 3 || len(c.Passthrough) != 1 {
		t.Fatalf("Load = %+v, want the support sandbox with 3 hosts and 1 passthrough", c)
	}
	if got := c.Hosts[1].Inject.Basic.PasswordKey; got != "token" {
		t.Errorf("github.com passwordKey = %q, want token", got)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, MaxFileSize+2), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		path string
		want error
	}{
		"missing":   {path: filepath.Join(dir, "nope.json"), want: ErrRead},
		"directory": {path: dir, want: ErrRead},
		"too big":   {path: big, want: ErrRead},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Load(tc.path); !errors.Is(err, tc.want) {
				t.Fatalf("Load(%s) = %v, want %v", tc.path, err, tc.want)
			}
		})
	}
}

// valid is the smallest valid config; cases edit a copy of it.
const valid = `{"apiVersion":"proxy.keyhole.dev/v1alpha1","kind":"ProxyConfig","sandbox":{"name":"s"},
"hosts":[{"name":"api.example.com","connection":"c","inject":{"secret":"sec","header":{"name":"Authorization","value":"Bearer {{ .token }}"}},
"rules":[{"methods":["GET"],"pathPrefixes":["/a/b"],"pathPatterns":["/*/x/**"]}]}],
"passthrough":["pypi.org"]}`

func TestDecode(t *testing.T) {
	tests := map[string]struct {
		old, new string // replace old by new in valid
		want     error  // nil: decodes
		msg      string // substring of the error
	}{
		"valid":                 {},
		"unknown field":         {old: `"rules"`, new: `"rulez"`, want: ErrDecode, msg: "rulez"},
		"trailing data":         {old: `["pypi.org"]}`, new: `["pypi.org"]} {}`, want: ErrDecode, msg: "after"},
		"not json":              {old: `{"apiVersion"`, new: `apiVersion`, want: ErrDecode},
		"wrong version":         {old: `v1alpha1`, new: `v9`, want: ErrInvalid, msg: "apiVersion"},
		"wrong kind":            {old: `"ProxyConfig"`, new: `"Config"`, want: ErrInvalid, msg: "kind"},
		"no sandbox":            {old: `{"name":"s"}`, new: `{}`, want: ErrInvalid, msg: "sandbox.name"},
		"upper-case host":       {old: `api.example.com`, new: `API.example.com`, want: ErrInvalid, msg: "hosts[0].name"},
		"host with port":        {old: `api.example.com`, new: `api.example.com:443`, want: ErrInvalid, msg: "hosts[0].name"},
		"trailing dot":          {old: `api.example.com`, new: `api.example.com.`, want: ErrInvalid, msg: "hosts[0].name"},
		"wildcard host":         {old: `api.example.com`, new: `*.example.com`, want: ErrInvalid, msg: "hosts[0].name"},
		"host both ways":        {old: `"pypi.org"`, new: `"api.example.com"`, want: ErrInvalid, msg: "either injected or passed through"},
		"duplicate passthrough": {old: `"pypi.org"`, new: `"pypi.org","pypi.org"`, want: ErrInvalid, msg: "already listed"},
		"bad passthrough":       {old: `"pypi.org"`, new: `"pypi.org/x"`, want: ErrInvalid, msg: "passthrough[0]"},
		"no connection":         {old: `"connection":"c"`, new: `"connection":""`, want: ErrInvalid, msg: "connection"},
		"secret path":           {old: `"secret":"sec"`, new: `"secret":"../etc"`, want: ErrInvalid, msg: "inject.secret"},
		"two forms":             {old: `"header":`, new: `"basic":{"usernameKey":"u","passwordKey":"p"},"header":`, want: ErrInvalid, msg: "exactly one"},
		"no form":               {old: `,"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: ``, want: ErrInvalid, msg: "exactly one"},
		"githubApp ok":          {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: `"githubApp":{"appId":1,"installationId":2,"privateKeyKey":"private-key.pem","api":"api.github.com","scheme":"token","repositories":["widgets"],"permissions":{"contents":"read"}}`},
		"githubApp owner ok":    {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: strings.Replace(`"githubApp":{"appId":1,"installationId":2,"privateKeyKey":"private-key.pem","api":"api.github.com","scheme":"token","repositories":["widgets"],"permissions":{"contents":"read"}}`, `"installationId":2`, `"owner":"acme/widgets"`, 1)},
		"githubApp no install":  {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: strings.Replace(`"githubApp":{"appId":1,"installationId":2,"privateKeyKey":"private-key.pem","api":"api.github.com","scheme":"token","repositories":["widgets"],"permissions":{"contents":"read"}}`, `"installationId":2,`, ``, 1), want: ErrInvalid, msg: "neither installationId nor owner"},
		"githubApp both":        {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: strings.Replace(`"githubApp":{"appId":1,"installationId":2,"privateKeyKey":"private-key.pem","api":"api.github.com","scheme":"token","repositories":["widgets"],"permissions":{"contents":"read"}}`, `"installationId":2`, `"installationId":2,"owner":"acme"`, 1), want: ErrInvalid, msg: "both installationId and owner"},
		"githubApp bad owner":   {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: strings.Replace(`"githubApp":{"appId":1,"installationId":2,"privateKeyKey":"private-key.pem","api":"api.github.com","scheme":"token","repositories":["widgets"],"permissions":{"contents":"read"}}`, `"installationId":2`, `"owner":"acme/../x"`, 1), want: ErrInvalid, msg: "githubApp.owner"},
		"githubApp no app":      {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: strings.Replace(`"githubApp":{"appId":1,"installationId":2,"privateKeyKey":"private-key.pem","api":"api.github.com","scheme":"token","repositories":["widgets"],"permissions":{"contents":"read"}}`, `"appId":1`, `"appId":0`, 1), want: ErrInvalid, msg: "githubApp.appId"},
		"githubApp scheme":      {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: strings.Replace(`"githubApp":{"appId":1,"installationId":2,"privateKeyKey":"private-key.pem","api":"api.github.com","scheme":"token","repositories":["widgets"],"permissions":{"contents":"read"}}`, `"token"`, `"bearer"`, 1), want: ErrInvalid, msg: "githubApp.scheme"},
		"githubApp level":       {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: strings.Replace(`"githubApp":{"appId":1,"installationId":2,"privateKeyKey":"private-key.pem","api":"api.github.com","scheme":"token","repositories":["widgets"],"permissions":{"contents":"read"}}`, `"read"`, `"admin"`, 1), want: ErrInvalid, msg: "permissions.contents"},
		"githubApp repo order":  {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: strings.Replace(`"githubApp":{"appId":1,"installationId":2,"privateKeyKey":"private-key.pem","api":"api.github.com","scheme":"token","repositories":["widgets"],"permissions":{"contents":"read"}}`, `["widgets"]`, `["widgets","gadgets"]`, 1), want: ErrInvalid, msg: "not sorted"},
		"githubApp key":         {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: strings.Replace(`"githubApp":{"appId":1,"installationId":2,"privateKeyKey":"private-key.pem","api":"api.github.com","scheme":"token","repositories":["widgets"],"permissions":{"contents":"read"}}`, `"private-key.pem"`, `"../key"`, 1), want: ErrInvalid, msg: "privateKeyKey"},
		"githubApp and header":  {old: `"header":`, new: `"githubApp":{"appId":1,"installationId":2,"privateKeyKey":"private-key.pem","api":"api.github.com","scheme":"token","repositories":["widgets"],"permissions":{"contents":"read"}}` + `,"header":`, want: ErrInvalid, msg: "exactly one"},
		"bad template":          {old: `{{ .token }}`, new: `{{ .token | html }}`, want: ErrTemplate},
		"template key path":     {old: `{{ .token }}`, new: `{{ .to..ken }}`, want: ErrInvalid},
		"header newline":        {old: `Bearer {{`, new: `Bearer\n{{`, want: ErrInvalid, msg: "line break"},
		"forbidden header":      {old: `"Authorization"`, new: `"Host"`, want: ErrInvalid, msg: "hop-by-hop"},
		"bad header name":       {old: `"Authorization"`, new: `"Auth orization"`, want: ErrInvalid, msg: "header name"},
		"basic bad key":         {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: `"basic":{"usernameKey":"../u","passwordKey":"p"}`, want: ErrInvalid, msg: "usernameKey"},
		"short placeholder":     {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: `"substitute":{"placeholder":"abc","key":"token"}`, want: ErrInvalid, msg: "placeholder"},
		"substitute ok":         {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: `"substitute":{"placeholder":"omnia-injected-c","key":"token"}`},
		"substitute headers ok": {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: `"substitute":{"placeholder":"omnia-injected-c","key":"token","headers":["PRIVATE-TOKEN","Authorization"]}`},
		"substitute into Host": {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: `"substitute":{"placeholder":"omnia-injected-c","key":"token","headers":["Host"]}`,
			want: ErrInvalid, msg: "substitute.headers[0]: Host cannot carry"},
		"substitute bad header name": {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: `"substitute":{"placeholder":"omnia-injected-c","key":"token","headers":["X Token"]}`,
			want: ErrInvalid, msg: "not a valid header name"},
		"substitute header twice": {old: `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`, new: `"substitute":{"placeholder":"omnia-injected-c","key":"token","headers":["Authorization","authorization"]}`,
			want: ErrInvalid, msg: "already listed at headers[0]"},
		"scrub response bodies": {old: `"passthrough"`, new: `"scrubResponseBodies":true,"passthrough"`},
		"internal hosts":        {old: `["pypi.org"]}`, new: `["pypi.org"],"internalHosts":["api.example.com","pypi.org"]}`},
		"internal host unknown": {old: `["pypi.org"]}`, new: `["pypi.org"],"internalHosts":["metadata.internal"]}`, want: ErrInvalid, msg: "internalHosts[0]"},
		"internal host twice":   {old: `["pypi.org"]}`, new: `["pypi.org"],"internalHosts":["pypi.org","pypi.org"]}`, want: ErrInvalid, msg: "listed twice"},
		"websocket":             {old: `"methods":["GET"]`, new: `"methods":["GET"],"websocket":true`},
		"websocket without GET": {old: `"methods":["GET"]`, new: `"methods":["POST"],"websocket":true`, want: ErrInvalid, msg: "needs GET"},
		"no methods":            {old: `"methods":["GET"]`, new: `"methods":[]`, want: ErrInvalid, msg: "methods"},
		"lower-case method":     {old: `"methods":["GET"]`, new: `"methods":["get"]`, want: ErrInvalid, msg: "upper-case"},
		"no paths":              {old: `"pathPrefixes":["/a/b"],"pathPatterns":["/*/x/**"]`, new: `"pathPrefixes":[]`, want: ErrInvalid, msg: "matches nothing"},
		"relative prefix":       {old: `"/a/b"`, new: `"a/b"`, want: ErrInvalid, msg: "start with"},
		"trailing slash":        {old: `"/a/b"`, new: `"/a/b/"`, want: ErrInvalid, msg: "empty segment"},
		"dot segment":           {old: `"/a/b"`, new: `"/a/../b"`, want: ErrInvalid, msg: "dot segment"},
		"encoded prefix":        {old: `"/a/b"`, new: `"/a%2Fb"`, want: ErrInvalid, msg: "encodedSlash: segment"},
		"segment prefix":        {old: `"pathPrefixes":["/a/b"]`, new: `"encodedSlash":"segment","pathPrefixes":["/a%2Fb","/c%2fd"]`},
		"segment pattern":       {old: `"pathPatterns":["/*/x/**"]`, new: `"encodedSlash":"segment","pathPatterns":["/@acme%2F*","/p/*%2F*/x/**"]`},
		"segment mode unknown":  {old: `"pathPrefixes":["/a/b"]`, new: `"encodedSlash":"separator","pathPrefixes":["/a/b"]`, want: ErrInvalid, msg: "not an encodedSlash mode"},
		"segment empty piece":   {old: `"pathPrefixes":["/a/b"]`, new: `"encodedSlash":"segment","pathPrefixes":["/a%2F%2Fb"]`, want: ErrInvalid, msg: "beside another"},
		"segment leading piece": {old: `"pathPrefixes":["/a/b"]`, new: `"encodedSlash":"segment","pathPrefixes":["/%2Fb"]`, want: ErrInvalid, msg: "start or end"},
		"segment dot piece":     {old: `"pathPrefixes":["/a/b"]`, new: `"encodedSlash":"segment","pathPrefixes":["/a%2F..%2Fb"]`, want: ErrInvalid, msg: "dot segment"},
		"segment other escape":  {old: `"pathPrefixes":["/a/b"]`, new: `"encodedSlash":"segment","pathPrefixes":["/a%2Fb%2e"]`, want: ErrInvalid, msg: "literally"},
		"segment double escape": {old: `"pathPrefixes":["/a/b"]`, new: `"encodedSlash":"segment","pathPrefixes":["/a%252Fb"]`, want: ErrInvalid, msg: "literally"},
		"segment star prefix":   {old: `"pathPrefixes":["/a/b"]`, new: `"encodedSlash":"segment","pathPrefixes":["/a%2F*"]`, want: ErrInvalid, msg: "pathPatterns"},
		"segment double star":   {old: `"pathPatterns":["/*/x/**"]`, new: `"encodedSlash":"segment","pathPatterns":["/a%2F**"]`, want: ErrInvalid, msg: "last segments"},
		"segment partial star":  {old: `"pathPatterns":["/*/x/**"]`, new: `"encodedSlash":"segment","pathPatterns":["/a%2Fb*"]`, want: ErrInvalid, msg: "whole segment"},
		"wildcard prefix":       {old: `"/a/b"`, new: `"/a/*"`, want: ErrInvalid, msg: "pathPatterns"},
		"inner double star":     {old: `"/*/x/**"`, new: `"/**/x"`, want: ErrInvalid, msg: "last segment"},
		"partial star":          {old: `"/*/x/**"`, new: `"/a*/x"`, want: ErrInvalid, msg: "whole segment"},
		"empty body values":     {old: `"methods":["GET"]`, new: `"methods":["GET"],"body":{"operation":[]}`, want: ErrInvalid, msg: "no values"},
		"root prefix":           {old: `"/a/b"`, new: `"/"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := valid
			if tc.old != "" {
				if !strings.Contains(in, tc.old) {
					t.Fatalf("test case: %q not in the valid config", tc.old)
				}
				in = strings.Replace(in, tc.old, tc.new, 1)
			}
			c, err := Decode([]byte(in))
			if tc.want == nil {
				if err != nil || c == nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not mention %q", err, tc.msg)
			}
			if c != nil {
				t.Errorf("Decode returned a config with an error")
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(valid))
	if b, err := os.ReadFile(filepath.Join("testdata", "github-acme.json")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"hosts":[{"inject":{"header":{"value":"{{"}}}]}`))
	f.Add([]byte(strings.Replace(valid, `"pathPrefixes":["/a/b"]`, `"encodedSlash":"segment","pathPrefixes":["/@acme%2Fwidgets","/a%2f..%2Fb"]`, 1)))
	f.Add([]byte(strings.Replace(valid, `"header":{"name":"Authorization","value":"Bearer {{ .token }}"}`,
		`"githubApp":{"appId":1,"owner":"acme/widgets","privateKeyKey":"k","api":"api.github.com","scheme":"basic","repositories":["widgets"],"permissions":{"contents":"read"}}`, 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			if c != nil {
				t.Fatal("config returned with an error")
			}
			if !errors.Is(err, ErrDecode) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTemplate) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		// A config that validates must validate again unchanged.
		if err := c.Validate(); err != nil {
			t.Fatalf("re-Validate: %v", err)
		}
		for _, h := range c.Hosts {
			if CheckHostName(h.Name) != nil {
				t.Fatalf("accepted host %q", h.Name)
			}
			// Whatever the proxy will read is a file the kubelet can
			// have written: a Secret name and keys the API server takes.
			if CheckSecretName(h.Inject.Secret) != nil {
				t.Fatalf("accepted Secret name %q", h.Inject.Secret)
			}
			var keys []string
			switch in := h.Inject; {
			case in.Header != nil:
				tmpl, err := ParseTemplate(in.Header.Value)
				if err != nil {
					t.Fatalf("accepted template %q: %v", in.Header.Value, err)
				}
				keys = tmpl.Keys()
			case in.Basic != nil:
				keys = []string{in.Basic.UsernameKey, in.Basic.PasswordKey}
			case in.Substitute != nil:
				keys = []string{in.Substitute.Key}
			case in.GitHubApp != nil:
				// The owner goes into an API path as is: it must be
				// names GitHub allows, never a path of its own.
				for part := range strings.SplitSeq(in.GitHubApp.Owner, "/") {
					if in.GitHubApp.InstallationID == 0 && CheckGitHubName(part) != nil {
						t.Fatalf("accepted owner %q", in.GitHubApp.Owner)
					}
				}
				keys = []string{in.GitHubApp.PrivateKeyKey}
			}
			for _, k := range keys {
				if CheckSecretKey(k) != nil {
					t.Fatalf("accepted Secret key %q", k)
				}
			}
		}
	})
}
