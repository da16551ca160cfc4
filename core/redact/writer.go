package redact

import (
	"bytes"
	"io"
	"sync"
)

// Error returns an error whose Error() is err's message redacted, or nil for
// a nil err. The message is redacted each time Error() is called, so values
// registered after wrapping are masked too. The returned error unwraps to
// err: errors.Is and errors.As still see the original chain. Note that an
// error obtained through errors.As is the original, unredacted error; print
// the error returned here, not what is unwrapped from it.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	if re, ok := err.(*redactedError); ok && re.r == r {
		return err
	}
	return &redactedError{r: r, err: err}
}

type redactedError struct {
	r   *Redactor
	err error
}

func (e *redactedError) Error() string { return e.r.String(e.err.Error()) }
func (e *redactedError) Unwrap() error { return e.err }

// maxPending bounds the partial line a Writer holds back. A longer line
// without a newline is written out in pieces, cut at whitespace where
// possible and never inside a registered value.
const maxPending = 64 << 10

// Writer is a line-buffered redacting io.Writer: it holds back a partial
// line, and redacts and writes each complete line, so a secret split across
// two Write calls is still masked. Call Flush to write the rest. Redaction
// is per line, so a multi-line secret is masked through its registered lines
// (those of at least 6 characters). It is safe for concurrent use;
// concurrent writers share one line buffer, so they should write whole
// lines.
type Writer struct {
	r   *Redactor
	w   io.Writer
	mu  sync.Mutex
	buf []byte
}

// Writer returns a redacting writer to w.
func (r *Redactor) Writer(w io.Writer) *Writer {
	return &Writer{r: r, w: w}
}

// Write buffers p and writes out, redacted, every line it completes. It
// reports len(p) consumed unless writing to the underlying writer fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	cut := bytes.LastIndexByte(w.buf, '\n') + 1
	if cut == 0 && len(w.buf) > maxPending {
		cut = w.forcedCut()
	}
	if cut == 0 {
		return len(p), nil
	}
	err := w.emit(cut)
	return len(p), err
}

// Flush redacts and writes whatever partial line is held back.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) == 0 {
		return nil
	}
	return w.emit(len(w.buf))
}

// emit writes w.buf[:cut] redacted and keeps the rest.
func (w *Writer) emit(cut int) error {
	out := w.r.Bytes(w.buf[:cut])
	_, err := w.w.Write(out)
	n := copy(w.buf, w.buf[cut:])
	w.buf = w.buf[:n]
	return err
}

// forcedCut picks where to split an over-long partial line: after the last
// whitespace that leaves room for the longest registered value (URLs contain
// no whitespace), and never inside a registered value.
func (w *Writer) forcedCut() int {
	m := w.r.matcher()
	keep := 0
	if m != nil {
		keep = m.maxLen - 1
	}
	limit := max(len(w.buf)-keep, 1)
	cut := limit
	if i := bytes.LastIndexAny(w.buf[:limit], " \t\r"); i >= 0 {
		cut = i + 1
	}
	if m != nil {
		for s, e := nextMatch(m, w.buf, 0); s >= 0 && s < cut; s, e = nextMatch(m, w.buf, e) {
			if e > cut {
				cut = s
				break
			}
		}
	}
	return cut
}
