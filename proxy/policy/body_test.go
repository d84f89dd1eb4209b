package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode"
)

// stateRule is the body condition the adversarial table and the fuzz
// target attack: "state" may only be "open". The field has an 's', which
// Go's encoding/json folds with U+017F (ſ).
var stateRule = map[string][]string{"state": {"open"}}

// jsonBody is a complete body declared as JSON.
func jsonBody(s string) Body {
	return Body{Data: []byte(s), Complete: true, ContentType: []string{"application/json"}}
}

func TestCheckBody(t *testing.T) {
	tests := map[string]struct {
		body Body
		ok   bool
	}{
		"plain":                     {body: jsonBody(`{"state":"open","title":"x"}`), ok: true},
		"escaped value":             {body: jsonBody(`{"state":"\u006fpen"}`), ok: true},
		"escaped key":               {body: jsonBody(`{"\u0073tate":"open"}`), ok: true},
		"whitespace around":         {body: jsonBody(" \r\n\t{ \"state\" : \"open\" }\n"), ok: true},
		"nested same name":          {body: jsonBody(`{"state":"open","head":{"state":"closed","State":"x"}}`), ok: true},
		"charset utf-8":             {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"application/json; charset=UTF-8"}}, ok: true},
		"vendor json type":          {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"application/vnd.git-lfs+json; charset=utf-8"}}, ok: true},
		"identity encoding":         {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"application/json"}, ContentEncoding: []string{"identity"}}, ok: true},
		"wrong value":               {body: jsonBody(`{"state":"closed"}`)},
		"value differs in case":     {body: jsonBody(`{"state":"Open"}`)},
		"value with NUL":            {body: jsonBody(`{"state":"open\u0000closed"}`)},
		"missing":                   {body: jsonBody(`{"title":"x"}`)},
		"number":                    {body: jsonBody(`{"state":1}`)},
		"null":                      {body: jsonBody(`{"state":null}`)},
		"array value":               {body: jsonBody(`{"state":["open"]}`)},
		"object value":              {body: jsonBody(`{"state":{"open":true}}`)},
		"duplicate last wins":       {body: jsonBody(`{"state":"open","state":"closed"}`)},
		"duplicate first wins":      {body: jsonBody(`{"state":"closed","state":"open"}`)},
		"duplicate escaped":         {body: jsonBody(`{"state":"open","\u0073tate":"closed"}`)},
		"ascii case":                {body: jsonBody(`{"state":"open","STATE":"closed"}`)},
		"only other case":           {body: jsonBody(`{"State":"open"}`)},
		"long s":                    {body: jsonBody(`{"state":"open","ſtate":"closed"}`)},
		"long s escaped":            {body: jsonBody(`{"state":"open","\u017ftate":"closed"}`)},
		"long s alone":              {body: jsonBody(`{"ſtate":"open"}`)},
		"kelvin sign":               {body: jsonBody(`{"state":"open","\u212astate":"closed"}`)},
		"dotless i":                 {body: jsonBody(`{"state":"open","ıd":"1"}`)},
		"fullwidth":                 {body: jsonBody(`{"state":"open","ｓｔａｔｅ":"closed"}`)},
		"snake and camel":           {body: jsonBody(`{"state":"open","sta_te":"closed"}`)},
		"hyphenated":                {body: jsonBody(`{"state":"open","sta-te":"closed"}`)},
		"NUL in key":                {body: jsonBody(`{"state":"open","state\u0000x":"closed"}`)},
		"control in key":            {body: jsonBody(`{"state":"open","state\n":"closed"}`)},
		"lone surrogate key":        {body: jsonBody(`{"state":"open","\ud800state":"closed"}`)},
		"invalid UTF-8 in key":      {body: jsonBody("{\"state\":\"open\",\"st\xc0\xa1te\":\"closed\"}")},
		"invalid UTF-8 in value":    {body: jsonBody("{\"state\":\"open\",\"title\":\"\xff\"}")},
		"overlong quote in value":   {body: jsonBody("{\"title\":\"x\xc0\xa2,\\\"state\\\":\\\"closed\",\"state\":\"open\"}")},
		"byte order mark":           {body: jsonBody("\xef\xbb\xbf{\"state\":\"open\"}")},
		"comment":                   {body: jsonBody(`{"state":"open" /*,"state":"closed"*/}`)},
		"trailing object":           {body: jsonBody(`{"state":"open"}{"state":"closed"}`)},
		"trailing garbage":          {body: jsonBody(`{"state":"open"} x`)},
		"trailing NUL":              {body: jsonBody("{\"state\":\"open\"}\x00")},
		"trailing comma":            {body: jsonBody(`{"state":"open",}`)},
		"single quotes":             {body: jsonBody(`{'state':'open'}`)},
		"bare key":                  {body: jsonBody(`{state:"open"}`)},
		"top-level array":           {body: jsonBody(`[{"state":"open"}]`)},
		"top-level string":          {body: jsonBody(`"open"`)},
		"top-level null":            {body: jsonBody(`null`)},
		"empty":                     {body: jsonBody(``)},
		"truncated":                 {body: jsonBody(`{"state":"open"`)},
		"deep nesting":              {body: jsonBody(`{"state":"open","x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`)},
		"incomplete":                {body: Body{Data: []byte(`{"state":"open"}`), ContentType: []string{"application/json"}}},
		"no content type":           {body: Body{Data: []byte(`{"state":"open"}`), Complete: true}},
		"form content type":         {body: Body{Data: []byte(`{"state":"open","x":"&state=closed&"}`), Complete: true, ContentType: []string{"application/x-www-form-urlencoded"}}},
		"text content type":         {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"text/plain"}}},
		"two content types":         {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"application/json", "application/x-www-form-urlencoded"}}},
		"content type list":         {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"application/json, application/x-www-form-urlencoded"}}},
		"utf-16 charset":            {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"application/json; charset=utf-16"}}},
		"other parameter":           {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"application/json; boundary=x"}}},
		"bare +json":                {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"application/+json"}}},
		"gzip encoding":             {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"application/json"}, ContentEncoding: []string{"gzip"}}},
		"brotli encoding":           {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"application/json"}, ContentEncoding: []string{"br"}}},
		"encoding after identity":   {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"application/json"}, ContentEncoding: []string{"identity", "gzip"}}},
		"multipart":                 {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"multipart/form-data; boundary=x"}}},
		"json type in other family": {body: Body{Data: []byte(`{"state":"open"}`), Complete: true, ContentType: []string{"text/json"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := CheckBody(stateRule, tc.body)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckBody = %v, want ok %v", err, tc.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrBody) {
					t.Errorf("error %v does not wrap ErrBody", err)
				}
				if strings.Contains(err.Error(), "closed") {
					t.Errorf("error %q quotes a value", err)
				}
				return
			}
			assertReadersAgree(t, tc.body.Data)
		})
	}
}

// TestCheckBodyGoReadsRefused shows why the Unicode rows above are
// refused: Go's encoding/json, which many upstreams use, reads them as the
// value the rule forbids.
func TestCheckBodyGoReadsRefused(t *testing.T) {
	for name, body := range map[string]string{
		"long s":         `{"state":"open","ſtate":"closed"}`,
		"long s escaped": `{"state":"open","\u017ftate":"closed"}`,
		"ascii case":     `{"state":"open","STATE":"closed"}`,
	} {
		t.Run(name, func(t *testing.T) {
			var v struct {
				State string `json:"state"`
			}
			if err := json.Unmarshal([]byte(body), &v); err != nil || v.State != "closed" {
				t.Fatalf("encoding/json read state %q, %v: the premise no longer holds", v.State, err)
			}
			if err := CheckBody(stateRule, jsonBody(body)); err == nil {
				t.Fatal("CheckBody accepted a body Go reads as closed")
			}
		})
	}
}

func TestCheckBodyMessages(t *testing.T) {
	tests := map[string]struct {
		body Body
		want string
	}{
		"long s":     {body: jsonBody(`{"state":"open","ſtate":"closed"}`), want: "not printable ASCII"},
		"duplicate":  {body: jsonBody(`{"state":"open","state":"closed"}`), want: `gives the field "state" twice`},
		"two cases":  {body: jsonBody(`{"state":"open","State":"closed"}`), want: `the fields "state" and "State"`},
		"spelled":    {body: jsonBody(`{"State":"open"}`), want: `spells the field "state" as "State"`},
		"value":      {body: jsonBody(`{"state":"closed"}`), want: "a value the rule does not allow"},
		"untyped":    {body: Body{Data: []byte(`{}`), Complete: true}, want: "needs Content-Type: application/json"},
		"form":       {body: Body{Data: []byte(`{}`), Complete: true, ContentType: []string{"application/x-www-form-urlencoded"}}, want: "not \"application/x-www-form-urlencoded\""},
		"not object": {body: jsonBody(`[]`), want: "not one JSON object"},
		"too long":   {body: Body{Data: []byte(`{}`), ContentType: []string{"application/json"}}, want: "longer than"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := CheckBody(stateRule, tc.body)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckBody = %v, want a message with %q", err, tc.want)
			}
		})
	}
}

// FuzzCheckBody attacks the body check with arbitrary bytes and content
// types. A body the check accepts must read as state "open" to every
// JSON reader model below, and must have been declared as JSON.
func FuzzCheckBody(f *testing.F) {
	for _, s := range []string{
		`{"state":"open"}`, `{"state":"open","ſtate":"closed"}`, `{"state":"open","\u017ftate":"closed"}`,
		`{"State":"open"}`, `{"state":"open","state_":"x"}`, `{"state":"open","head":{"state":"closed"}}`,
		"\xef\xbb\xbf{\"state\":\"open\"}", `{"state":"open","\u212astate":"closed"}`, `{"state":"open","state\u0000":"closed"}`,
	} {
		f.Add([]byte(s), "application/json")
	}
	f.Add([]byte(`{"state":"open","x":"&state=closed"}`), "application/x-www-form-urlencoded")
	f.Add([]byte(`{"state":"open"}`), "application/vnd.x+json; charset=utf-8")
	f.Fuzz(func(t *testing.T, data []byte, contentType string) {
		err := CheckBody(stateRule, Body{Data: data, Complete: true, ContentType: []string{contentType}})
		if !allowedJSONBody(t, err, data, contentType) {
			return
		}
		assertReadersAgree(t, data)
	})
}

// assertReadersAgree fails unless every reader model finds exactly the
// string "open" in the field "state" of data.
func assertReadersAgree(t *testing.T, data []byte) {
	t.Helper()
	assertReadersFind(t, data, "state", "open")
}

// assertReadersFind fails unless every reader model finds exactly the
// string want in the top-level field of data.
func assertReadersFind(t *testing.T, data []byte, field, want string) {
	t.Helper()
	for _, r := range jsonReaders() {
		v, ok := r.read(data, field)
		if !ok || v != want {
			t.Fatalf("reader %s finds %s %v (found %v) in the accepted body %q", r.name, field, v, ok, data)
		}
	}
}

// jsonReader is a model of how an upstream finds a top-level field.
type jsonReader struct {
	name string
	read func(data []byte, field string) (any, bool)
}

// jsonReaders are the ways upstream JSON readers are known to look up a
// top-level field: exactly or folding case in the ways of Go, .NET, Java
// (Turkish locale included) and Unicode case folding, the first or the
// last copy winning, mapping camelCase to snake_case or ignoring '_' and
// '-' (relaxed binding), or stopping a name at NUL as C readers do.
func jsonReaders() []jsonReader {
	goStruct := func(data []byte, field string) (any, bool) {
		// struct { F *any `json:"<field>"` }, matched as Go matches
		// names: exactly, else folding case.
		typ := reflect.StructOf([]reflect.StructField{{
			Name: "F", Type: reflect.TypeFor[*any](), Tag: reflect.StructTag(`json:"` + field + `"`),
		}})
		v := reflect.New(typ)
		if json.Unmarshal(data, v.Interface()) != nil || v.Elem().Field(0).IsNil() {
			return nil, false
		}
		return v.Elem().Field(0).Elem().Interface(), true
	}
	goMap := func(data []byte, field string) (any, bool) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			return nil, false
		}
		v, ok := m[field]
		return v, ok
	}
	readers := []jsonReader{{"encoding/json struct", goStruct}, {"encoding/json map", goMap}}
	folds := map[string]func(string) string{
		"exact":           func(s string) string { return s },
		"strings.ToLower": strings.ToLower,
		"strings.ToUpper": strings.ToUpper,
		"per-rune upper":  func(s string) string { return strings.Map(unicode.ToUpper, s) },
		"turkish lower":   func(s string) string { return strings.ToLowerSpecial(unicode.TurkishCase, s) },
		"turkish upper":   func(s string) string { return strings.ToUpperSpecial(unicode.TurkishCase, s) },
		"simple fold":     simpleFold,
		"snake case":      snakeCase,
		"relaxed":         func(s string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s)) },
		"C string":        func(s string) string { s, _, _ = strings.Cut(s, "\x00"); return s },
	}
	for name, fold := range folds {
		readers = append(readers,
			jsonReader{name + ", first wins", tokenReader(fold, true)},
			jsonReader{name + ", last wins", tokenReader(fold, false)})
	}
	return readers
}

// tokenReader reads the top-level object with encoding/json's tokenizer
// and matches names by fold.
func tokenReader(fold func(string) string, firstWins bool) func([]byte, string) (any, bool) {
	return func(data []byte, field string) (any, bool) {
		dec := json.NewDecoder(bytes.NewReader(data))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return nil, false
		}
		var got any
		found := false
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, false
			}
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, false
			}
			if fold(tok.(string)) == fold(field) && !(found && firstWins) {
				got, found = v, true
			}
		}
		return got, found
	}
}

// simpleFold maps each rune to the smallest rune of its Unicode simple
// folding orbit, so two strings map alike exactly when strings.EqualFold
// holds.
func simpleFold(s string) string {
	return strings.Map(func(r rune) rune {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		return m
	}, s)
}

// snakeCase is what Rails' underscore and similar key transforms do:
// camelCase to snake_case, '-' to '_', lower case.
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('_')
		}
		if r == '-' {
			r = '_'
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
