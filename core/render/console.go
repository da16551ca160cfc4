package render

import (
	"bytes"
	"io"
	"sync"
)

// Console is a command's standard error, shared by a live Progress block
// and everything else written there while it is shown: API warnings
// (deprecations), client-go's log lines (-v), library logs. Writes pass
// straight through, except while a live Progress is attached: then each
// complete line goes to its Above, printed above the block, which is
// redrawn under it, so the block stays whole and nothing is drawn over.
//
// The Progress itself writes its frames to Terminal, which bypasses the
// interception. A Console is safe for concurrent use.
type Console struct {
	out io.Writer

	mu   sync.Mutex
	live Block
	buf  []byte // a partial line held back while live

	outMu sync.Mutex // serializes writes to out
}

// NewConsole returns a console writing to out.
func NewConsole(out io.Writer) *Console { return &Console{out: out} }

// Write writes p, or hands its complete lines to the attached Progress.
func (c *Console) Write(p []byte) (int, error) {
	c.mu.Lock()
	live := c.live
	if live == nil {
		c.mu.Unlock()
		return c.write(p)
	}
	c.buf = append(c.buf, p...)
	var lines []byte
	if cut := bytes.LastIndexByte(c.buf, '\n') + 1; cut > 0 {
		lines = bytes.Clone(c.buf[:cut])
		c.buf = c.buf[:copy(c.buf, c.buf[cut:])]
	}
	c.mu.Unlock()
	if len(lines) > 0 {
		live.Above(lines)
	}
	return len(p), nil
}

// Block is a live block on the terminal (a Progress, a FleetProgress):
// Above prints whole lines above it.
type Block interface {
	Above(text []byte)
}

// Attach routes the console's lines above p's live block until Detach.
func (c *Console) Attach(p Block) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = p
}

// Detach writes any partial line held back and lets writes pass through
// again.
func (c *Console) Detach() {
	c.mu.Lock()
	rest := c.buf
	c.buf, c.live = nil, nil
	c.mu.Unlock()
	if len(rest) > 0 {
		_, _ = c.write(rest)
	}
}

// Terminal is the console's output itself, for the Progress's frames.
func (c *Console) Terminal() io.Writer { return terminal{c} }

type terminal struct{ c *Console }

func (t terminal) Write(p []byte) (int, error) { return t.c.write(p) }

func (c *Console) write(p []byte) (int, error) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	return c.out.Write(p)
}
