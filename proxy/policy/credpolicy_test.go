package policy

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/url"
	"strings"
	"testing"
)

// refusedAs reports whether name, as a reader that trims leading spaces
// and compares in any case with '_' and '-' equal reads it, is a refused
// override where in says.
func refusedAs(name string, in Where) bool {
	name = strings.TrimLeft(name, " ")
	for _, o := range Overrides() {
		if o.In&in != 0 && SameHeaderName(name, o.Name) {
			return true
		}
	}
	return false
}

// FuzzOverrideParam: whatever the target, overrideParam is at least as
// strict as Go's own query parser, a stand-in for the frameworks that
// read an override from the query: a query it passes holds no override
// those would see.
func FuzzOverrideParam(f *testing.F) {
	for _, s := range []string{"/x?_method=DELETE", "/x?a=1;%5Fmethod=PUT", "/x?q=_method", "/x?.method=1", "/x?_method[]=1", "/x",
		"/x?_HttpMethod=DELETE", "/x?x-http-method-override=PUT", "/x?X_HTTP_METHOD=PUT", "/x?%5fhttpmethod%00=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		if _, ok := overrideParam(target); ok {
			return
		}
		_, query, _ := strings.Cut(target, "?")
		for _, part := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
			v, err := url.ParseQuery(part)
			if err != nil {
				continue
			}
			for k := range v {
				if refusedAs(k, InQuery) {
					t.Fatalf("%q passed, but Go reads the parameter %q", target, k)
				}
			}
		}
	})
}

// FuzzOverrideBody: whatever the body and its Content-Type, overrideInBody
// never panics, and a body it passes holds no override that Go's form,
// JSON or multipart readers see, wherever the Content-Type lets servers
// read fields.
func FuzzOverrideBody(f *testing.F) {
	for _, s := range []struct{ ct, body string }{
		{"application/x-www-form-urlencoded", "a=1&_method=DELETE"},
		{"", "_method=DELETE"},
		{"application/json", `{"operation":"download","_method":"DELETE"}`},
		{"application/json", `{"\u005fmethod":"DELETE"}`},
		{"application/vnd.git-lfs+json", `{"operation":"download"}`},
		{"multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n"},
		{"text/plain", "_method=DELETE"},
	} {
		f.Add(s.ct, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		var cts []string
		if ct != "" {
			cts = []string{ct}
		}
		name, err := overrideInBody(Body{Data: body, Complete: true, ContentType: cts})
		if name != "" || err != nil {
			return
		}
		form, multi, isJSON, _, boundaries := bodyKinds(cts)
		if form {
			for _, part := range strings.FieldsFunc(string(body), func(r rune) bool { return r == '&' || r == ';' }) {
				v, err := url.ParseQuery(part)
				if err != nil {
					continue
				}
				for k := range v {
					if refusedAs(k, InForm) {
						t.Fatalf("%q (%q) passed, but Go reads the form field %q", body, ct, k)
					}
				}
			}
		}
		if isJSON {
			var m map[string]json.RawMessage
			if json.Unmarshal(body, &m) == nil {
				for k := range m {
					if refusedAs(k, InJSON) {
						t.Fatalf("%q (%q) passed, but Go reads the JSON field %q", body, ct, k)
					}
				}
			}
		}
		if multi {
			for _, b := range boundaries {
				mr := multipart.NewReader(bytes.NewReader(body), b)
				for {
					p, err := mr.NextRawPart()
					if err != nil {
						break
					}
					if refusedAs(p.FormName(), InForm) {
						t.Fatalf("%q (%q) passed, but Go reads the multipart field %q", body, ct, p.FormName())
					}
				}
			}
		}
	})
}

// TestOverrides: the override table, looked for in each place it names,
// in the spellings servers read; and what it leaves alone.
func TestOverrides(t *testing.T) {
	form := []string{"application/x-www-form-urlencoded"}
	jsonCT := []string{"application/json"}
	tests := map[string]struct {
		target string
		body   string
		ct     []string
		ce     []string
		long   bool   // the body was cut at the read limit
		want   string // the name refused; "" for none
		err    string // or the error's words
	}{
		"query _method":                    {target: "/x?_method=DELETE", want: "_method"},
		"query _HttpMethod":                {target: "/x?_HttpMethod=DELETE", want: "_HttpMethod"},
		"query _httpmethod, lower case":    {target: "/x?_httpmethod=DELETE", want: "_HttpMethod"},
		"query X-HTTP-Method-Override":     {target: "/x?X-HTTP-Method-Override=DELETE", want: "X-HTTP-Method-Override"},
		"query x_http_method_override":     {target: "/x?a=1&x_http_method_override=DELETE", want: "X-HTTP-Method-Override"},
		"query X-HTTP-Method":              {target: "/x?X-HTTP-Method=MERGE", want: "X-HTTP-Method"},
		"query encoded":                    {target: "/x?%5F%48ttpMethod=DELETE", want: "_HttpMethod"},
		"query PHP array":                  {target: "/x?_HttpMethod[]=DELETE", want: "_HttpMethod"},
		"query PHP dot":                    {target: "/x?X.HTTP.Method=PUT", want: "X-HTTP-Method"},
		"query NUL":                        {target: "/x?_method%00x=PUT", want: "_method"},
		"query ; separated":                {target: "/x?a=1;_method=PUT", want: "_method"},
		"query value only":                 {target: "/x?q=_method"},
		"query path header name":           {target: "/x?X-Original-URL=/admin"},
		"query method":                     {target: "/x?method=DELETE"},
		"form _method":                     {body: "title=x&_method=DELETE", ct: form, want: "_method"},
		"form without a type":              {body: "_method=DELETE", want: "_method"},
		"form _HttpMethod":                 {body: "_HttpMethod=DELETE", ct: form, want: "_HttpMethod"},
		"form with charset":                {body: "_method=PATCH", ct: []string{"application/x-www-form-urlencoded; charset=utf-8"}, want: "_method"},
		"form, type unparseable":           {body: "_method=PATCH", ct: []string{"application/x-www-form-urlencoded; ;;"}, want: "_method"},
		"form, two types":                  {body: "_method=PATCH", ct: []string{"application/json", "application/x-www-form-urlencoded"}, want: "_method"},
		"JSON and form types, JSON body":   {body: `{"a":"_method=x"}`, ct: []string{"application/json", "application/x-www-form-urlencoded"}},
		"JSON _method":                     {body: `{"operation":"download","_method":"DELETE"}`, ct: jsonCT, want: "_method"},
		"JSON escaped":                     {body: `{"\u005fmethod":"DELETE"}`, ct: jsonCT, want: "_method"},
		"JSON upper case":                  {body: `{"_METHOD":"DELETE"}`, ct: jsonCT, want: "_method"},
		"JSON +json type":                  {body: `{"_method":"DELETE"}`, ct: []string{"application/vnd.git-lfs+json"}, want: "_method"},
		"JSON without a type":              {body: `{"_method":"DELETE"}`, want: "_method"},
		"JSON X-HTTP-Method-Override":      {body: `{"x-http-method-override":"DELETE"}`, ct: jsonCT, want: "X-HTTP-Method-Override"},
		"JSON NUL in name":                 {body: `{"_method\u0000x":"DELETE"}`, ct: jsonCT, want: "_method"},
		"JSON nested":                      {body: `{"data":{"_method":"DELETE"}}`, ct: jsonCT},
		"JSON as a value":                  {body: `{"note":"_method"}`, ct: jsonCT},
		"JSON method field":                {body: `{"jsonrpc":"2.0","method":"tools/call"}`, ct: jsonCT},
		"JSON array":                       {body: `[{"_method":"DELETE"}]`, ct: jsonCT},
		"JSON invalid":                     {body: `{"_method":"DELETE",}`, ct: jsonCT, err: "not valid JSON"},
		"JSON invalid, no type":            {body: `{"a":1,}`},
		"multipart _method":                {body: "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n", ct: []string{"multipart/form-data; boundary=b"}, want: "_method"},
		"multipart RFC 2231 name":          {body: "--b\r\nContent-Disposition: form-data; name*=UTF-8''%5Fmethod\r\n\r\nDELETE\r\n--b--\r\n", ct: []string{"multipart/form-data; boundary=b"}, want: "_method"},
		"multipart unquoted, stray quote":  {body: "--b\r\nContent-Disposition: form-data; name=_method; x=\"\r\n\r\nDELETE\r\n--b--\r\n", ct: []string{"multipart/form-data; boundary=b"}, want: "_method"},
		"multipart other field":            {body: "--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n_method=DELETE\r\n--b--\r\n", ct: []string{"multipart/form-data; boundary=b"}},
		"multipart without boundary":       {body: "--b\r\n\r\n", ct: []string{"multipart/form-data"}, err: "does not parse"},
		"multipart broken":                 {body: "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx", ct: []string{"multipart/form-data; boundary=b"}, err: "does not parse"},
		"form too long to read first":      {body: "_method=DELETE", ct: form, long: true},
		"JSON gzip":                        {body: "\x1f\x8b", ct: jsonCT, ce: []string{"gzip"}, err: "Content-Encoding"},
		"octet-stream holding one":         {body: "_method=DELETE", ct: []string{"application/octet-stream"}},
		"git pack holding one":             {body: "_method=DELETE", ct: []string{"application/x-git-receive-pack-request"}},
		"octet-stream too long, gzip":      {body: "x", ct: []string{"application/octet-stream"}, ce: []string{"gzip"}, long: true},
		"plain text holding one":           {body: `{"_method":"DELETE"}`, ct: []string{"text/plain"}},
		"no body, form type":               {ct: form},
		"short names pass":                 {body: "a=1&b=2", ct: form},
		"header names are not form fields": {body: "X-Original-URL=/admin", ct: form},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got string
			var err error
			if tc.target != "" {
				got, _ = overrideParam(tc.target)
			} else {
				got, err = overrideInBody(Body{Data: []byte(tc.body), Complete: !tc.long, ContentType: tc.ct, ContentEncoding: tc.ce})
			}
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want an error saying %q", got, err, tc.err)
				}
			case err != nil || got != tc.want:
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
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

// scanAll runs an OverrideScanner over body, in writes of the given size.
func scanAll(ct, ce []string, body []byte, size int) (string, error, bool) {
	sc := NewOverrideScanner(ct, ce)
	if sc == nil {
		return "", nil, false
	}
	for len(body) > 0 {
		n := min(size, len(body))
		sc.Write(body[:n])
		body = body[n:]
	}
	name, err := sc.Close()
	return name, err, true
}

// TestOverrideScanner: the streaming scan finds what overrideInBody
// finds, in every case of TestOverrides' kind, whatever the writes'
// sizes; and a name or a body too long to keep whole is still judged.
func TestOverrideScanner(t *testing.T) {
	form := []string{"application/x-www-form-urlencoded"}
	jsonCT := []string{"application/json"}
	multi := []string{"multipart/form-data; boundary=b"}
	pad := strings.Repeat("x", 3<<20)
	tests := map[string]struct {
		ct, ce []string
		body   string
		want   string
		err    string
	}{
		"form _method":                  {ct: form, body: "a=1&_method=DELETE", want: "_method"},
		"form _method last, no value":   {ct: form, body: "a=" + pad + "&_method", want: "_method"},
		"form, long value then _method": {ct: form, body: "a=" + pad + "&%5FHttpMethod=DELETE", want: "_HttpMethod"},
		"form, long leading spaces":     {ct: form, body: strings.Repeat("+", 10000) + "_method=x", want: "_method"},
		"form, long name with a NUL":    {ct: form, body: "_method%00" + pad + "=x", want: "_method"},
		"form, long array name":         {ct: form, body: "_method[" + pad + "]=x", want: "_method"},
		"form, long plain name":         {ct: form, body: pad + "=x"},
		"form, none":                    {ct: form, body: "a=1&b=" + pad},
		"no type, form":                 {body: "_method=DELETE", want: "_method"},
		"no type, JSON":                 {body: `{"a":"` + pad + `","_method":"DELETE"}`, want: "_method"},
		"JSON, long value then _method": {ct: jsonCT, body: `{"a":"` + pad + `","_method":"DELETE"}`, want: "_method"},
		"JSON, escaped":                 {ct: jsonCT, body: `{"a":1,"\u005f\u006Dethod":"DELETE"}`, want: "_method"},
		"JSON, upper case":              {ct: jsonCT, body: `{"X-HTTP-METHOD-OVERRIDE":"PUT"}`, want: "X-HTTP-Method-Override"},
		"JSON, NUL":                     {ct: jsonCT, body: `{"_method\u0000` + pad + `":1}`, want: "_method"},
		"JSON, leading spaces":          {ct: jsonCT, body: `{"` + strings.Repeat(" ", 10000) + `_method":1}`, want: "_method"},
		"JSON, missing comma":           {ct: jsonCT, body: `{"a":1 "_method":"DELETE"}`, want: "_method"},
		"JSON, nested":                  {ct: jsonCT, body: `{"a":{"_method":"DELETE"},"b":[{"_method":1}]}`},
		"JSON, a value":                 {ct: jsonCT, body: `{"a":"_method","b":["_method"]}`},
		"JSON, array at the top":        {ct: jsonCT, body: `[{"_method":1}]`},
		"JSON, long and clean":          {ct: jsonCT, body: `{"model":"m","messages":[{"role":"user","content":"` + pad + `"}],"n":-1.5e3,"t":true,"f":false,"z":null}`},
		"JSON, non-ASCII name":          {ct: jsonCT, body: `{"_méthod":1,"\u017ftate":2}`},
		"JSON, comment":                 {ct: jsonCT, body: `{"a":1 /* c */}`, err: "not valid JSON"},
		"JSON, single quotes":           {ct: jsonCT, body: `{'_method':'DELETE'}`, err: "not valid JSON"},
		"JSON, unquoted name":           {ct: jsonCT, body: `{_method: "DELETE"}`, err: "not valid JSON"},
		"JSON, cut short":               {ct: jsonCT, body: `{"a":"` + pad, err: "not valid JSON"},
		"JSON, two texts":               {ct: jsonCT, body: `{"a":1}{"b":2}`, err: "not valid JSON"},
		"JSON, gzip":                    {ct: jsonCT, ce: []string{"gzip"}, body: "\x1f\x8b", err: "content coding"},
		"multipart, _method last":       {ct: multi, body: "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n" + pad + "\r\n--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n", want: "_method"},
		"multipart, clean":              {ct: multi, body: "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.png\"\r\n\r\n" + pad + "\r\n--b--\r\n"},
		"multipart, broken":             {ct: multi, body: "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n" + pad, err: "does not parse"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, size := range []int{1 << 20, 4093, 1} {
				if size == 1 && len(tc.body) > 1<<16 {
					continue
				}
				got, err, ok := scanAll(tc.ct, tc.ce, []byte(tc.body), size)
				if !ok {
					t.Fatal("no scanner for a type servers read fields from")
				}
				switch {
				case tc.err != "":
					if err == nil || !strings.Contains(err.Error(), tc.err) {
						t.Fatalf("writes of %d: %q, %v; want an error saying %q", size, got, err, tc.err)
					}
				case err != nil || got != tc.want:
					t.Fatalf("writes of %d: %q, %v; want %q", size, got, err, tc.want)
				}
			}
		})
	}
	if sc := NewOverrideScanner([]string{"application/octet-stream"}, nil); sc != nil {
		t.Error("a scanner for a body no server reads fields from")
	}
}

// FuzzOverrideScanner: on every body overrideInBody can judge whole, the
// streaming scan, in writes of any size, refuses whatever it refuses, and
// never panics or hangs.
func FuzzOverrideScanner(f *testing.F) {
	for _, s := range []struct {
		ct, body string
		size     int
	}{
		{"application/x-www-form-urlencoded", "a=1&_method=DELETE", 3},
		{"", "_method=DELETE", 1},
		{"application/json", `{"operation":"download","_method":"DELETE"}`, 5},
		{"application/json", `{"\u005fmethod":"DELETE"}`, 2},
		{"application/json", `{"a":[1,{"b":"c"}],"d":"\ud83d\ude00"}`, 7},
		{"multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n", 4},
	} {
		f.Add(s.ct, []byte(s.body), s.size)
	}
	f.Fuzz(func(t *testing.T, ct string, body []byte, size int) {
		var cts []string
		if ct != "" {
			cts = []string{ct}
		}
		size = max(1, size%4096)
		got, gotErr, ok := scanAll(cts, nil, body, size)
		if !ok {
			if OverrideBodyType(cts) {
				t.Fatalf("no scanner for %q", ct)
			}
			return
		}
		whole, _ := overrideInBody(Body{Data: body, Complete: true, ContentType: cts})
		if whole != "" && got == "" && gotErr == nil {
			t.Fatalf("%q (%q): the whole body holds %s, the scan passed it", body, ct, whole)
		}
	})
}
