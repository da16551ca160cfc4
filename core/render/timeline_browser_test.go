package render

import (
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// timelineBar is a bar (or a skipped step's mark) of a timeline SVG.
type timelineBar struct {
	step, status string
	x, y, w, h   int
	fill         [3]uint8
}

var barRE = regexp.MustCompile(`<rect class="(?:bar|mark)" data-step="([^"]*)"[^>]*?data-status="([^"]*)" x="(\d+)" y="(\d+)" width="(\d+)" height="(\d+)" fill="#([0-9a-f]{6})"`)

// timelineBars are the bars and marks of svg, with where they are.
func timelineBars(t *testing.T, svg string) []timelineBar {
	t.Helper()
	var out []timelineBar
	for _, m := range barRE.FindAllStringSubmatch(svg, -1) {
		n := func(s string) int { v, _ := strconv.Atoi(s); return v }
		var fill [3]uint8
		for i := range fill {
			v, _ := strconv.ParseUint(m[7][2*i:2*i+2], 16, 8)
			fill[i] = uint8(v)
		}
		out = append(out, timelineBar{step: m[1], status: m[2], x: n(m[3]), y: n(m[4]), w: n(m[5]), h: n(m[6]), fill: fill})
	}
	if len(out) == 0 {
		t.Fatal("no bar in the timeline")
	}
	return out
}

// svgSize reads the width and height of an SVG.
func svgSize(t *testing.T, svg string) (int, int) {
	m := regexp.MustCompile(`<svg [^>]*width="(\d+)" height="(\d+)"`).FindStringSubmatch(svg)
	if m == nil {
		t.Fatal("no svg size")
	}
	w, _ := strconv.Atoi(m[1])
	h, _ := strconv.Atoi(m[2])
	return w, h
}

// browser is headless Chromium, from Debian's packages (make test-deps
// installs it); the test is skipped without it unless KHOOK_TEST_BROWSER
// says it must run (make test sets it).
func browser(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("KHOOK_TEST_BROWSER") != "" {
		t.Fatal("headless Chromium is not installed: make test-deps installs it (apt-get install chromium)")
	}
	t.Skip("no chromium: make test-deps installs it")
	return ""
}

// screenshot opens file in headless Chromium, at the picture's size, and
// returns what it shows.
func screenshot(t *testing.T, chromium, file string, w, h int) image.Image {
	t.Helper()
	dir := t.TempDir()
	shot := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--force-device-scale-factor=1", "--user-data-dir="+filepath.Join(dir, "profile"),
		fmt.Sprintf("--window-size=%d,%d", w, h), "--screenshot="+shot, "file://"+file)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("chromium took no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestTimelineInABrowser: the golden timeline, as SVG and as an HTML
// page, opened in a real browser (headless Chromium, no network): the
// screenshot shows every bar of the golden file where the file puts it,
// in its colour (its top half: the waits shade the bottom).
func TestTimelineInABrowser(t *testing.T) {
	chromium := browser(t)
	golden, err := os.ReadFile(filepath.Join("testdata", "timeline.svg"))
	if err != nil {
		t.Fatal(err)
	}
	bars := timelineBars(t, string(golden))
	w, h := svgSize(t, string(golden))
	dir := t.TempDir()
	svgFile := filepath.Join(dir, "timeline.svg")
	if err := os.WriteFile(svgFile, golden, 0o644); err != nil {
		t.Fatal(err)
	}
	htmlFile := filepath.Join(dir, "timeline.html")
	page := "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><style>html, body { margin: 0; padding: 0; background: #fff; } svg { display: block; }</style></head><body>\n" +
		regexp.MustCompile(`^<\?xml[^>]*>\n`).ReplaceAllString(string(golden), "") + "</body></html>\n"
	if err := os.WriteFile(htmlFile, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{svgFile, htmlFile} {
		t.Run(filepath.Ext(file), func(t *testing.T) {
			img := screenshot(t, chromium, file, w, h)
			if b := img.Bounds(); b.Dx() < w || b.Dy() < h {
				t.Fatalf("screenshot %v, smaller than the picture's %dx%d", b, w, h)
			}
			for _, b := range bars {
				// the middle of the bar's top half, and its two ends
				for _, x := range []int{b.x + b.w/2, b.x + min(2, b.w/2), b.x + b.w - 1 - min(2, b.w/2)} {
					y := b.y + 4
					r, g, bl, _ := img.At(x, y).RGBA()
					got := [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}
					if !near(got, b.fill) {
						t.Errorf("%s (%s) at (%d,%d): the screenshot shows #%02x%02x%02x, the golden file #%02x%02x%02x",
							b.step, b.status, x, y, got[0], got[1], got[2], b.fill[0], b.fill[1], b.fill[2])
					}
				}
			}
			// and the background around them is not a bar's colour
			r, g, bl, _ := img.At(w-5, 5).RGBA()
			if bg := [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}; !near(bg, [3]uint8{255, 255, 255}) {
				t.Errorf("the page's corner is #%02x%02x%02x, not white: not the picture at its size?", bg[0], bg[1], bg[2])
			}
		})
	}
}

// near: two colours within a few steps of each other per channel (colour
// management may round).
func near(a, b [3]uint8) bool {
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d < -6 || d > 6 {
			return false
		}
	}
	return true
}
