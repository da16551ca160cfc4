package packaging

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"
)

// Format is an archive format.
type Format string

// The two formats.
const (
	TarGz Format = "tar.gz"
	Zip   Format = "zip"
)

// Ext is the file extension, with its dot.
func (f Format) Ext() string { return "." + string(f) }

// Entry is one member of an archive.
type Entry struct {
	// Name is the slash-separated path; a directory's ends with "/".
	Name string
	// Mode holds the permission bits (0o755 for executables and
	// directories, 0o644 otherwise).
	Mode fs.FileMode
	Data []byte
}

// IsDir reports whether e is a directory.
func (e Entry) IsDir() bool { return strings.HasSuffix(e.Name, "/") }

// WithDirs returns entries sorted by name, with an entry for every parent
// directory (helm 3's plugin installer needs them before their files).
func WithDirs(entries []Entry) []Entry {
	seen := map[string]bool{}
	out := slices.Clone(entries)
	for _, e := range entries {
		seen[e.Name] = true
	}
	for _, e := range entries {
		for dir := path.Dir(strings.TrimSuffix(e.Name, "/")); dir != "."; dir = path.Dir(dir) {
			if !seen[dir+"/"] {
				seen[dir+"/"] = true
				out = append(out, Entry{Name: dir + "/", Mode: 0o755})
			}
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// WriteArchive writes entries to w in format f, reproducibly: every member
// has mtime mtime, owner root (0:0, no names), and its mode; the gzip header
// has no name and no time. The same entries give the same bytes.
func WriteArchive(w io.Writer, f Format, entries []Entry, mtime time.Time) error {
	mtime = mtime.UTC().Truncate(time.Second)
	switch f {
	case TarGz:
		return writeTarGz(w, entries, mtime)
	case Zip:
		return writeZip(w, entries, mtime)
	}
	return fmt.Errorf("unknown archive format %q", f)
}

func writeTarGz(w io.Writer, entries []Entry, mtime time.Time) error {
	gz, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:    e.Name,
			Mode:    int64(e.Mode.Perm()),
			ModTime: mtime,
			Format:  tar.FormatUSTAR,
		}
		if e.IsDir() {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("tar %s: %w", e.Name, err)
		}
		if _, err := tw.Write(e.Data); err != nil {
			return fmt.Errorf("tar %s: %w", e.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func writeZip(w io.Writer, entries []Entry, mtime time.Time) error {
	zw := zip.NewWriter(w)
	for _, e := range entries {
		hdr := &zip.FileHeader{Name: e.Name, Modified: mtime, Method: zip.Deflate}
		mode := e.Mode.Perm()
		if e.IsDir() {
			hdr.Method = zip.Store
			mode |= fs.ModeDir
		}
		hdr.SetMode(mode) // Unix mode bits in the external attributes
		fw, err := zw.CreateHeader(hdr)
		if err != nil {
			return fmt.Errorf("zip %s: %w", e.Name, err)
		}
		if _, err := fw.Write(e.Data); err != nil {
			return fmt.Errorf("zip %s: %w", e.Name, err)
		}
	}
	return zw.Close()
}

// ReadArchive lists an archive's members with their modes and contents.
// Like krew, it tells the format from the content, not the name.
func ReadArchive(data []byte) ([]Entry, error) {
	switch t := http.DetectContentType(data); t {
	case "application/x-gzip":
		return readTarGz(data)
	case "application/zip":
		return readZip(data)
	default:
		return nil, fmt.Errorf("not a tar.gz or zip archive (content type %s)", t)
	}
}

func readTarGz(data []byte) ([]Entry, error) {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	var out []Entry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		e := Entry{Name: hdr.Name, Mode: fs.FileMode(hdr.Mode).Perm()}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if !e.IsDir() {
				e.Name += "/"
			}
		case tar.TypeReg:
			if e.Data, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("%s: %w", hdr.Name, err)
			}
		default:
			return nil, fmt.Errorf("%s: unexpected tar member type %q", hdr.Name, hdr.Typeflag)
		}
		out = append(out, e)
	}
}

func readZip(data []byte) ([]Entry, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, f := range zr.File {
		e := Entry{Name: f.Name, Mode: f.Mode().Perm()}
		if !f.Mode().IsDir() {
			rc, err := f.Open()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
			e.Data, err = io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
		}
		out = append(out, e)
	}
	return out, nil
}
