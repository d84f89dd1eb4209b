package policy

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzOverrideParam: whatever the target, overrideParam is at least as
// strict as Go's own query parser, a stand-in for the frameworks that
// read _method: a query it passes holds no _method those would see.
func FuzzOverrideParam(f *testing.F) {
	for _, s := range []string{"/x?_method=DELETE", "/x?a=1;%5Fmethod=PUT", "/x?q=_method", "/x?.method=1", "/x?_method[]=1", "/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		if overrideParam(target) {
			return
		}
		_, query, _ := strings.Cut(target, "?")
		for _, part := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
			v, err := url.ParseQuery(part)
			if err != nil {
				continue
			}
			for k := range v {
				if strings.EqualFold(strings.TrimLeft(k, " "), OverrideParam) {
					t.Fatalf("%q passed, but Go reads the parameter %q", target, k)
				}
			}
		}
	})
}

func TestSameHeaderName(t *testing.T) {
	tests := map[string]struct {
		a, b string
		same bool
	}{
		"exact":          {a: "X-HTTP-Method-Override", b: "X-HTTP-Method-Override", same: true},
		"case":           {a: "x-http-method-override", b: "X-HTTP-Method-Override", same: true},
		"underscores":    {a: "X_HTTP_METHOD_OVERRIDE", b: "X-HTTP-Method-Override", same: true},
		"mixed":          {a: "x-Http_method-OVERRIDE", b: "X-HTTP-Method-Override", same: true},
		"longer":         {a: "X-HTTP-Method-Overrides", b: "X-HTTP-Method-Override"},
		"another letter": {a: "X-HTTP-Method-Overridf", b: "X-HTTP-Method-Override"},
		"dash for dot":   {a: "X.HTTP-Method-Override", b: "X-HTTP-Method-Override"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := SameHeaderName(tc.a, tc.b); got != tc.same {
				t.Fatalf("SameHeaderName(%q, %q) = %v", tc.a, tc.b, got)
			}
		})
	}
}
