package policy

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"keyhole.dev/keyhole/proxy/config"
)

func TestTargetPath(t *testing.T) {
	tests := map[string]struct {
		target string
		path   string // "" means refused
	}{
		"root":                {target: "/", path: "/"},
		"root query":          {target: "/?a=b", path: "/"},
		"plain":               {target: "/repos/acme/widgets", path: "/repos/acme/widgets"},
		"query kept out":      {target: "/a/b?x=/../y", path: "/a/b"},
		"encoded letter":      {target: "/a/%77idgets", path: "/a/%77idgets"},
		"dot in name":         {target: "/a/widgets.git", path: "/a/widgets.git"},
		"triple dot":          {target: "/a/.../b", path: "/a/.../b"},
		"dot segment":         {target: "/a/./b"},
		"dotdot segment":      {target: "/a/../b"},
		"final dotdot":        {target: "/a/.."},
		"encoded dot":         {target: "/a/%2e/b"},
		"mixed encoded dots":  {target: "/a/.%2E/b"},
		"encoded slash":       {target: "/a%2Fb"},
		"encoded slash lower": {target: "/a%2fb"},
		"encoded backslash":   {target: "/a%5Cb"},
		"encoded backslash l": {target: "/a%5cb"},
		"backslash":           {target: "/a\\b"},
		"empty segment":       {target: "/a//b"},
		"trailing slash":      {target: "/a/b/", path: "/a/b/"},
		"trailing slashes":    {target: "/a/b//"},
		"empty then trailing": {target: "/a//"},
		"semicolon":           {target: "/a;b=c"},
		"encoded semicolon":   {target: "/a%3Bb"},
		"control":             {target: "/a\x00b"},
		"encoded control":     {target: "/a%00b"},
		"encoded newline":     {target: "/a%0d%0ab"},
		"overlong dotdot":     {target: "/repos/acme/widgets/%c0%ae%c0%ae/x"},
		"overlong slash":      {target: "/a%c0%afb"},
		"lone high byte":      {target: "/a%ffb"},
		"encoded utf-8":       {target: "/a/caf%C3%A9", path: "/a/caf%C3%A9"},
		// Raw bytes are percent-encoded by the proxy's HTTP client on the
		// way out: raw non-UTF-8 would reach the upstream as the escapes
		// refused above.
		"raw overlong dotdot":    {target: "/repos/acme/widgets/\xc0\xae\xc0\xae/x"},
		"raw overlong slash":     {target: "/a\xc0\xafb"},
		"raw lone high byte":     {target: "/a\xffb"},
		"raw truncated utf-8":    {target: "/a/caf\xc3"},
		"raw beside an escape":   {target: "/a/%41\xc0\xae"},
		"raw utf-8":              {target: "/a/caf\xc3\xa9", path: "/a/caf\xc3\xa9"},
		"raw high byte in query": {target: "/a?q=\xff", path: "/a"},
		// An upstream that normalizes paths by compatibility (NFKC) reads
		// these as '.', '/', '\\', ';', '%', '?' or '#'.
		"fullwidth dotdot":          {target: "/repos/acme/widgets/%EF%BC%8E%EF%BC%8E/user"},
		"raw fullwidth dotdot":      {target: "/repos/acme/widgets/\uff0e\uff0e/user"},
		"fullwidth dot":             {target: "/a/%EF%BC%8E/b"},
		"two dot leader":            {target: "/a/%E2%80%A5/b"},
		"one dot leaders":           {target: "/a/\u2024\u2024/b"},
		"small full stops":          {target: "/a/\ufe52\ufe52/b"},
		"fullwidth solidus":         {target: "/a/x%EF%BC%8Fy"},
		"fullwidth reverse solidus": {target: "/a/x\uff3cy"},
		"fullwidth semicolon":       {target: "/a/x\uff1by"},
		"fullwidth percent":         {target: "/a/x\uff05" + "2e"},
		"fullwidth question mark":   {target: "/a/x\uff1fy"},
		"fullwidth number sign":     {target: "/a/x\uff03y"},
		"fullwidth dots in a name":  {target: "/a/x\uff0ey", path: "/a/x\uff0ey"},
		"other letters":             {target: "/a/\u00fcber/\u65e5\u672c", path: "/a/\u00fcber/\u65e5\u672c"},
		"ligature":                  {target: "/a/\ufb01le", path: "/a/\ufb01le"},
		"space":                     {target: "/a b"},
		"del":                       {target: "/a\x7fb"},
		"fragment":                  {target: "/a#b"},
		"bad escape":                {target: "/a%zz"},
		"short escape":              {target: "/a%2"},
		"absolute form":             {target: "https://api.github.com/a"},
		"asterisk":                  {target: "*"},
		"empty":                     {target: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := TargetPath(tc.target)
			if tc.path == "" {
				if !errors.Is(err, ErrTarget) {
					t.Fatalf("TargetPath(%q) = %q, %v; want ErrTarget", tc.target, got, err)
				}
				return
			}
			if err != nil || got != tc.path {
				t.Fatalf("TargetPath(%q) = %q, %v; want %q", tc.target, got, err, tc.path)
			}
		})
	}
}

func TestMatchPrefix(t *testing.T) {
	tests := map[string]struct {
		prefix, path string
		want         bool
	}{
		"exact":          {prefix: "/repos/acme/widgets", path: "/repos/acme/widgets", want: true},
		"below":          {prefix: "/repos/acme/widgets", path: "/repos/acme/widgets/pulls", want: true},
		"sibling":        {prefix: "/repos/acme/widgets", path: "/repos/acme/widgets-old", want: false},
		"parent":         {prefix: "/repos/acme/widgets", path: "/repos/acme", want: false},
		"root all":       {prefix: "/", path: "/x/y", want: true},
		"root root":      {prefix: "/", path: "/", want: true},
		"case sensitive": {prefix: "/repos/acme", path: "/Repos/acme", want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := MatchPrefix(tc.prefix, tc.path); got != tc.want {
				t.Fatalf("MatchPrefix(%q, %q) = %v", tc.prefix, tc.path, got)
			}
		})
	}
}

func TestMatchPattern(t *testing.T) {
	tests := map[string]struct {
		pattern, path string
		want          bool
	}{
		"stars":             {pattern: "/*/*/git-upload-pack", path: "/acme/w.git/git-upload-pack", want: true},
		"star one segment":  {pattern: "/*/*/git-upload-pack", path: "/acme/x/w.git/git-upload-pack", want: false},
		"too short":         {pattern: "/*/*/git-upload-pack", path: "/acme/git-upload-pack", want: false},
		"too long":          {pattern: "/*/x", path: "/a/x/y", want: false},
		"double star rest":  {pattern: "/repos/**", path: "/repos/a/b/c", want: true},
		"double star one":   {pattern: "/repos/**", path: "/repos/a", want: true},
		"double star none":  {pattern: "/repos/**", path: "/repos", want: false},
		"literal":           {pattern: "/user", path: "/user", want: true},
		"literal differs":   {pattern: "/user", path: "/users", want: false},
		"root pattern":      {pattern: "/", path: "/", want: true},
		"root pattern deep": {pattern: "/", path: "/a", want: false},
		"root path":         {pattern: "/*", path: "/", want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := MatchPattern(tc.pattern, tc.path); got != tc.want {
				t.Fatalf("MatchPattern(%q, %q) = %v", tc.pattern, tc.path, got)
			}
		})
	}
}

func TestMatchRule(t *testing.T) {
	r := config.Rule{Methods: []string{"GET", "HEAD"}, PathPrefixes: []string{"/a"}, PathPatterns: []string{"/x/*/y"}}
	body := config.Rule{Methods: []string{"POST"}, PathPrefixes: []string{"/b"}, Body: map[string][]string{"op": {"read"}}}
	json := []string{"application/json"}
	tests := map[string]struct {
		rule   config.Rule
		method string
		path   string
		body   Body
		want   bool
	}{
		"prefix":                          {rule: r, method: "GET", path: "/a/b", want: true},
		"pattern":                         {rule: r, method: "HEAD", path: "/x/z/y", want: true},
		"prefix, trailing slash":          {rule: r, method: "GET", path: "/a/b/", want: true},
		"pattern, trailing slash":         {rule: r, method: "GET", path: "/x/z/y/", want: true},
		"pattern, slash is not a segment": {rule: r, method: "GET", path: "/x/z/", want: false},
		"sibling, trailing slash":         {rule: r, method: "GET", path: "/ab/", want: false},
		"wrong method":                    {rule: r, method: "POST", path: "/a", want: false},
		"no path":                         {rule: r, method: "GET", path: "/b", want: false},
		"body ok":                         {rule: body, method: "POST", path: "/b", body: Body{Data: []byte(`{"op":"read"}`), Complete: true, ContentType: json}, want: true},
		"body wrong":                      {rule: body, method: "POST", path: "/b", body: Body{Data: []byte(`{"op":"write"}`), Complete: true, ContentType: json}, want: false},
		"body incomplete":                 {rule: body, method: "POST", path: "/b", body: Body{Data: []byte(`{"op":"read"}`), ContentType: json}, want: false},
		"body untyped":                    {rule: body, method: "POST", path: "/b", body: Body{Data: []byte(`{"op":"read"}`), Complete: true}, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := MatchRule(tc.rule, tc.method, tc.path, tc.body); got != tc.want {
				t.Fatalf("MatchRule = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCanonicalHost(t *testing.T) {
	tests := map[string]struct {
		in, port, want string
		bad            bool
	}{
		"plain":           {in: "api.github.com", port: "443", want: "api.github.com"},
		"upper":           {in: "API.GitHub.COM", port: "443", want: "api.github.com"},
		"trailing dot":    {in: "api.github.com.", port: "443", want: "api.github.com"},
		"default port":    {in: "api.github.com:443", port: "443", want: "api.github.com"},
		"dot and port":    {in: "api.github.com.:443", port: "443", want: "api.github.com"},
		"other port":      {in: "api.github.com:8443", port: "443", want: "api.github.com:8443"},
		"http default":    {in: "pypi.org:80", port: "80", want: "pypi.org"},
		"ipv6":            {in: "[::1]:443", port: "443", want: "::1"},
		"ipv6 port":       {in: "[::1]:8443", port: "443", want: "[::1]:8443"},
		"empty":           {in: "", port: "443", bad: true},
		"only dot":        {in: ".", port: "443", bad: true},
		"two colons":      {in: "a:b:c", port: "443", bad: true},
		"bad port":        {in: "a.com:x", port: "443", bad: true},
		"userinfo":        {in: "u@a.com:443", port: "443", bad: true},
		"slash":           {in: "a.com/x", port: "443", bad: true},
		"percent":         {in: "a%2ecom", port: "443", bad: true},
		"control":         {in: "a\x00.com", port: "443", bad: true},
		"long input clip": {in: strings.Repeat("a", 300) + "/", port: "443", bad: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := CanonicalHost(tc.in, tc.port)
			if tc.bad {
				if err == nil {
					t.Fatalf("CanonicalHost(%q) = %q, want an error", tc.in, got)
				}
				if len(err.Error()) > 120 {
					t.Errorf("error quotes too much input: %d bytes", len(err.Error()))
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("CanonicalHost(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func FuzzTargetPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b?c", "/a/%2e%2E/b", "/a;b", "/a%2Fb", "//", "/a/b/", "/a/\xc0\xae", "/a|%3A"} {
		f.Add(s, "/a")
	}
	f.Add("/@acme%2fwidgets", "/")
	f.Add("/a%2F..%2Fb", "/a")
	f.Fuzz(func(t *testing.T, target, prefix string) {
		// With an encoded '/' let through, each part it delimits is a
		// segment to an upstream that reads it as a separator: the path
		// read so is one TargetPath accepts, the same but for the '/'.
		if path, err := targetPath(target, true); err == nil {
			if _, err1 := TargetPath(target); err1 == nil && decodeSlashes(path) != path {
				t.Fatalf("TargetPath(%q) accepted an encoded '/'", target)
			}
			dec := decodeSlashes(path)
			if got, err := TargetPath(dec); err != nil || got != dec {
				t.Fatalf("targetPath(%q, true) = %q, which read with its '/' decoded is %q: %q, %v", target, path, dec, got, err)
			}
		}
		path, err := TargetPath(target)
		if err != nil {
			return
		}
		// An accepted path has no segment that any upstream could read as
		// a separator, a dot segment or a parameter.
		// One trailing slash is allowed; the segments before it are not empty.
		if trimmed := strings.TrimSuffix(path, "/"); trimmed != "" {
			for _, seg := range strings.Split(trimmed[1:], "/") {
				dec, err := url.PathUnescape(seg)
				if err != nil || seg == "" || dec == "." || dec == ".." || strings.ContainsAny(dec, "/\\;") || strings.ContainsAny(seg, "\\;?#") {
					t.Fatalf("TargetPath(%q) accepted segment %q", target, seg)
				}
				for _, c := range []byte(dec) {
					if c < 0x20 || c == 0x7f {
						t.Fatalf("TargetPath(%q) accepted a control character", target)
					}
				}
				if !utf8.ValidString(dec) {
					t.Fatalf("TargetPath(%q) accepted bytes that are not UTF-8", target)
				}
			}
		}
		// What Go's HTTP client sends upstream for an accepted target
		// (re-encoded where the raw form is not a valid encoding) reads
		// as the same path.
		if u, err := url.ParseRequestURI(target); err == nil {
			sent, err1 := url.PathUnescape(u.EscapedPath())
			checked, err2 := url.PathUnescape(path)
			if err1 != nil || err2 != nil || sent != checked {
				t.Fatalf("TargetPath(%q) checked %q, the upstream would read %q", target, checked, sent)
			}
		}
		if config.CheckPathPrefix(prefix) == nil && MatchPrefix(prefix, path) && prefix != "/" {
			if !strings.HasPrefix(path, prefix) {
				t.Fatalf("MatchPrefix(%q, %q) without a textual prefix", prefix, path)
			}
		}
	})
}
