package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestDerivedFormsMasked(t *testing.T) {
	const secret = `p@ss w/rd&<x>"q"+é`
	r := New()
	r.Add(secret)
	jsonDefault, _ := json.Marshal(secret)
	var noHTML bytes.Buffer
	enc := json.NewEncoder(&noHTML)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(secret)
	quoted := strconv.Quote(secret)

	tests := []struct {
		name, in string
	}{
		{"raw", secret},
		{"json", string(jsonDefault)},
		{"json-no-html", strings.TrimSpace(noHTML.String())},
		{"go-quoted", quoted},
		{"fmt-q", fmt.Sprintf("bad value %q", secret)},
		{"query-escaped", url.QueryEscape(secret)},
		{"path-escaped", url.PathEscape(secret)},
		{"b64-std", base64.StdEncoding.EncodeToString([]byte(secret))},
		{"b64-std-raw", base64.RawStdEncoding.EncodeToString([]byte(secret))},
		{"b64-url", base64.URLEncoding.EncodeToString([]byte(secret))},
		{"b64-url-raw", base64.RawURLEncoding.EncodeToString([]byte(secret))},
		{"b64-basic-auth-offset-0", base64.StdEncoding.EncodeToString([]byte(secret + ":user"))},
		{"b64-basic-auth-offset-1", base64.StdEncoding.EncodeToString([]byte("u:" + secret))},
		{"b64-basic-auth-offset-2", base64.StdEncoding.EncodeToString([]byte("AWS:" + secret))},
		{"b64-basic-auth-offset-3", base64.StdEncoding.EncodeToString([]byte("abc" + secret))},
		{"b64-url-offset-2", base64.RawURLEncoding.EncodeToString([]byte("ab" + secret + "tail"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := "before " + tt.in + " after"
			got := r.String(in)
			if !strings.Contains(got, Mask) {
				t.Fatalf("String(%q) = %q: nothing masked", in, got)
			}
			if tt.in != "" && strings.Contains(got, tt.in) {
				t.Fatalf("String(%q) = %q: form still present", in, got)
			}
			if !strings.HasPrefix(got, "before ") || !strings.HasSuffix(got, " after") {
				t.Fatalf("String(%q) = %q: surrounding text damaged", in, got)
			}
			if gb := string(r.Bytes([]byte(in))); gb != got {
				t.Fatalf("Bytes = %q, String = %q", gb, got)
			}
		})
	}
}

func TestMultiLineSecretLines(t *testing.T) {
	key := "-----BEGIN PRIVATE KEY-----\r\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n  bktbMAoGCCqGSM49AwEH\nab\n-----END PRIVATE KEY-----\n"
	r := New()
	r.Add(key)
	for _, line := range []string{
		"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
		"bktbMAoGCCqGSM49AwEH",
		"-----BEGIN PRIVATE KEY-----",
	} {
		in := "    " + line + "\n"
		if got := r.String(in); strings.Contains(got, line) {
			t.Errorf("line %q not masked: %q", line, got)
		}
	}
	// Lines shorter than 6 characters are not registered on their own.
	if got := r.String("ab"); got != "ab" {
		t.Errorf("short line masked: %q", got)
	}
	// The whole key, and its JSON form, are masked as one unit.
	if got := r.String("k=" + key); got != "k="+Mask {
		t.Errorf("whole key: %q", got)
	}
	j, _ := json.Marshal(key)
	if got := r.String(string(j)); got != `"`+Mask+`"` {
		t.Errorf("json key: %q", got)
	}
}

func TestLongestFirstAndOverlaps(t *testing.T) {
	tests := []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"prefix loses to longer", []string{"abc", "abcdef"}, "x abcdef y", "x *** y"},
		{"prefix registered last", []string{"abcdef", "abc"}, "x abcdef abc y", "x *** *** y"},
		{"overlap merged", []string{"abc", "cdef"}, "abcdefg", "***g"},
		{"nested merged", []string{"abcdefgh", "cde"}, "abcdefgh cde", "*** ***"},
		{"adjacent", []string{"ab", "cd"}, "abcd", "******"},
		{"no match", []string{"secret"}, "nothing here", "nothing here"},
		{"short secret masks everywhere", []string{"a"}, "banana", "b***n***n***"},
		{"repeated", []string{"tok"}, "toktoktok", "*********"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New()
			for _, s := range tt.secrets {
				r.Add(s)
			}
			if got := r.String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := string(r.Bytes([]byte(tt.in))); got != tt.want {
				t.Errorf("Bytes(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestAddIdempotentAndLen(t *testing.T) {
	r := New()
	r.Add("")
	if r.Len() != 0 {
		t.Fatalf("Len after Add(\"\") = %d", r.Len())
	}
	r.Add("s3cr3t")
	r.Add("s3cr3t")
	if r.Len() != 1 {
		t.Fatalf("Len = %d, want 1", r.Len())
	}
	gen := r.gen.Load()
	r.Add("s3cr3t")
	if r.gen.Load() != gen {
		t.Fatal("re-adding a value changed the matcher generation")
	}
	r.Add("other")
	if r.Len() != 2 {
		t.Fatalf("Len = %d, want 2", r.Len())
	}
	// Values added after a first String call are picked up.
	if got := r.String("s3cr3t other"); got != Mask+" "+Mask {
		t.Fatalf("got %q", got)
	}
	r.Add("late")
	if got := r.String("late"); got != Mask {
		t.Fatalf("late value: %q", got)
	}
}

func TestStripURLUserinfo(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://u:p@host/x", "https://***@host/x"},
		{"http://user:pass@example.com", "http://***@example.com"},
		{"oci://AWS:tok@123.dkr.ecr.us-east-1.amazonaws.com/charts/app:1.2.3", "oci://***@123.dkr.ecr.us-east-1.amazonaws.com/charts/app:1.2.3"},
		{"https://u:p@host:8443/path?q=1#f", "https://***@host:8443/path?q=1#f"},
		{"https://u:p@host?x", "https://***@host?x"},
		{"https://u:p@host#x", "https://***@host#x"},
		{"ssh://git@github.com/org/repo", "ssh://***@github.com/org/repo"},
		{"git+https://u:p@h/r.git", "git+https://***@h/r.git"},
		{"a https://a:b@one/x and oci://c:d@two:5000/y end", "a https://***@one/x and oci://***@two:5000/y end"},
		{"https://u%40corp:p%2F%3Aq@host/x", "https://***@host/x"},
		{"https://user@mail.com:p@ss@host/x", "https://***@host/x"},
		{`repo "https://u:p@h" failed`, `repo "https://***@h" failed`},
		{`<https://u:p@h>`, `<https://***@h>`},
		{"(https://u:p@h)", "(https://***@h)"},
		{"https://***@host", "https://***@host"},
		{"https://host/path@v1", "https://host/path@v1"},
		{"https://host/x?email=a@b.c", "https://host/x?email=a@b.c"},
		{"https://@host", "https://@host"},
		{"mail me@example.com", "mail me@example.com"},
		{"no url", "no url"},
		{"https://host a@b", "https://host a@b"},
		{"https://u:p@", "https://***@"},
		{"://u:p@h", "://***@h"},
		{"line1 https://u:p@h\nline2 http://v:q@g", "line1 https://***@h\nline2 http://***@g"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := StripURLUserinfo(tt.in); got != tt.want {
			t.Errorf("StripURLUserinfo(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := string(stripURLUserinfoBytes([]byte(tt.in))); got != tt.want {
			t.Errorf("stripURLUserinfoBytes(%q) = %q, want %q", tt.in, got, tt.want)
		}
		var nilR *Redactor
		if got := nilR.String(tt.in); got != tt.want {
			t.Errorf("nil.String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNilRedactor(t *testing.T) {
	var r *Redactor
	r.Add("x")
	if r.Len() != 0 {
		t.Fatal("nil Len")
	}
	if got := r.String("plain x"); got != "plain x" {
		t.Fatalf("String = %q", got)
	}
	if got := string(r.Bytes([]byte("https://u:p@h"))); got != "https://***@h" {
		t.Fatalf("Bytes = %q", got)
	}
	if r.Error(nil) != nil {
		t.Fatal("Error(nil) != nil")
	}
	err := r.Error(fmt.Errorf("get https://u:p@h: %w", fs.ErrNotExist))
	if err.Error() != "get https://***@h: file does not exist" || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Error = %v", err)
	}
	var buf bytes.Buffer
	w := r.Writer(&buf)
	_, _ = w.Write([]byte("https://u:p@h\n"))
	if buf.String() != "https://***@h\n" {
		t.Fatalf("Writer = %q", buf.String())
	}
}

func TestError(t *testing.T) {
	r := New()
	r.Add("hunter2")
	if r.Error(nil) != nil {
		t.Fatal("Error(nil) != nil")
	}
	pathErr := &fs.PathError{Op: "open", Path: "/tmp/hunter2", Err: fs.ErrNotExist}
	base := fmt.Errorf("load token %q from https://bob:hunter2@vault: %w", "hunter2", pathErr)
	err := r.Error(base)
	want := `load token "***" from https://***@vault: open /tmp/***: file does not exist`
	if err.Error() != want {
		t.Fatalf("Error() = %q, want %q", err.Error(), want)
	}
	if fmt.Sprintf("%v|%s|%+v", err, err, err) != want+"|"+want+"|"+want {
		t.Fatalf("formatted: %v", err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("errors.Is lost the chain")
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe != pathErr {
		t.Fatal("errors.As lost the chain")
	}
	if errors.Unwrap(err) != base {
		t.Fatal("Unwrap does not return the original")
	}
	if r.Error(err) != err {
		t.Fatal("re-wrapping with the same redactor should be a no-op")
	}
	// Values registered after wrapping are masked too.
	r.Add("vault")
	if strings.Contains(err.Error(), "vault") {
		t.Fatalf("late value not masked: %q", err.Error())
	}
	// Joined errors stay redacted.
	joined := errors.Join(r.Error(errors.New("a hunter2")), r.Error(errors.New("b hunter2")))
	if joined.Error() != "a ***\nb ***" {
		t.Fatalf("joined: %q", joined.Error())
	}
}

func TestWriter(t *testing.T) {
	const secret = "correct-horse-battery"
	r := New()
	r.Add(secret)
	var buf bytes.Buffer
	w := r.Writer(&buf)
	chunks := []string{"token=correct-ho", "rse-battery ok\nnext line correct", "-horse-", "battery", " https://u:", "p@h\ntail correct-horse"}
	for _, c := range chunks {
		n, err := w.Write([]byte(c))
		if err != nil || n != len(c) {
			t.Fatalf("Write(%q) = %d, %v", c, n, err)
		}
	}
	if got, want := buf.String(), "token=*** ok\nnext line *** https://***@h\n"; got != want {
		t.Fatalf("before Flush: %q, want %q", got, want)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "token=*** ok\nnext line *** https://***@h\ntail correct-horse"; got != want {
		t.Fatalf("after Flush: %q, want %q", got, want)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestWriterSplitEveryByte(t *testing.T) {
	const secret = "s3cr3t-v@lue"
	r := New()
	r.Add(secret)
	in := "a " + secret + " b\nc https://x:" + secret + "@h d\n" + secret
	var buf bytes.Buffer
	w := r.Writer(&buf)
	for i := range len(in) {
		if _, err := w.Write([]byte{in[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "a *** b\nc https://***@h d\n***"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestWriterLongLine(t *testing.T) {
	const secret = "0123456789abcdef-secret"
	r := New()
	r.Add(secret)
	var buf bytes.Buffer
	w := r.Writer(&buf)
	// A very long line without newlines, with the secret placed across
	// every forced cut point.
	unit := strings.Repeat("x", 997) + " " + secret + " "
	total := ""
	for range 200 {
		total += unit
	}
	for i := 0; i < len(total); i += 4093 {
		end := min(i+4093, len(total))
		if _, err := w.Write([]byte(total[i:end])); err != nil {
			t.Fatal(err)
		}
	}
	if buf.Len() == 0 {
		t.Fatal("over-long line was never written out")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "secret") || strings.Count(buf.String(), Mask) != 200 {
		t.Fatalf("secret leaked or lost across forced cuts: %d masks", strings.Count(buf.String(), Mask))
	}
	if buf.Len() != len(total)-200*(len(secret)-len(Mask)) {
		t.Fatalf("length %d", buf.Len())
	}
}

type errWriter struct{}

func (errWriter) Write(p []byte) (int, error) { return 0, os.ErrClosed }

func TestWriterError(t *testing.T) {
	w := New().Writer(errWriter{})
	if _, err := w.Write([]byte("partial")); err != nil {
		t.Fatal("partial line should only be buffered")
	}
	if _, err := w.Write([]byte(" line\n")); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("err = %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	r := New()
	var buf syncBuffer
	w := r.Writer(&buf)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				s := fmt.Sprintf("secret-%d-%d", g, i)
				r.Add(s)
				if got := r.String("x " + s + " y"); got != "x *** y" {
					t.Errorf("String = %q", got)
					return
				}
				_ = r.Bytes([]byte(s))
				_ = r.Error(errors.New(s)).Error()
				_, _ = fmt.Fprintf(w, "line %s\n", s)
				_ = r.Len()
			}
		}()
	}
	wg.Wait()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 400 {
		t.Fatalf("Len = %d", r.Len())
	}
	if strings.Contains(buf.String(), "secret-") {
		t.Fatal("a secret reached the writer")
	}
	if strings.Count(buf.String(), "line ***\n") != 400 {
		t.Fatal("lines lost or interleaved")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestNoAllocWhenClean(t *testing.T) {
	r := New()
	for i := range 20 {
		r.Add(fmt.Sprintf("secret-value-%02d", i))
	}
	line := "step cilium: helm upgrade --install cilium cilium/cilium --version 1.18.4 -n kube-system https://helm.cilium.io/"
	_ = r.String(line)
	if n := testing.AllocsPerRun(100, func() { _ = r.String(line) }); n != 0 {
		t.Fatalf("String allocs = %v, want 0", n)
	}
	b := []byte(line)
	if n := testing.AllocsPerRun(100, func() { _ = r.Bytes(b) }); n != 0 {
		t.Fatalf("Bytes allocs = %v, want 0", n)
	}
}

func BenchmarkRedactString(b *testing.B) {
	r := New()
	for i := range 20 {
		r.Add(fmt.Sprintf("secret-value-%02d-%s", i, strings.Repeat("x", i)))
	}
	clean := "step cilium: helm upgrade --install cilium cilium/cilium --version 1.18.4 -n kube-system --set ipam.mode=eni https://helm.cilium.io/"
	dirty := "step ecr: password=secret-value-07-xxxxxxx repo=oci://AWS:tok@123.dkr.ecr.us-east-1.amazonaws.com/charts/app:1.2.3"
	b.Run("clean", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(clean)))
		for b.Loop() {
			_ = r.String(clean)
		}
	})
	b.Run("dirty", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(dirty)))
		for b.Loop() {
			_ = r.String(dirty)
		}
	})
}

func TestOccurrences(t *testing.T) {
	r := New()
	r.Add("hunter2-secret")
	r.Add("tok-123456")
	got := r.Occurrences(`{"a":"hunter2-secret","b":"x tok-123456 y","c":"aHVudGVyMi1zZWNyZXQ="}`)
	want := []string{"hunter2-secret", "tok-123456", "aHVudGVyMi1zZWNyZXQ="}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if New().Occurrences("hunter2-secret") != nil || (*Redactor)(nil).Occurrences("x") != nil {
		t.Fatal("an empty or nil redactor finds nothing")
	}
}
