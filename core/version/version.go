// Package version carries khook's build identity, set at link time:
//
//	-X khook.io/core/version.Version=v1.2.3
//	-X khook.io/core/version.Commit=abc123
//	-X khook.io/core/version.Date=2026-11-22T00:00:00Z
package version

import (
	"runtime"
	"runtime/debug"
)

// Set by -ldflags -X; the defaults describe a development build.
var (
	Version = "v0.0.0-dev"
	Commit  = "unknown"
	Date    = "unknown"
)

// Info is the build identity.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	Platform  string `json:"platform"`
	GoVersion string `json:"goVersion"`
}

// Get returns the build identity. A development build without -ldflags
// falls back to the VCS revision Go stamped into the binary, if any.
func Get() Info {
	info := Info{Version: Version, Commit: Commit, Date: Date,
		Platform: runtime.GOOS + "/" + runtime.GOARCH, GoVersion: runtime.Version()}
	if info.Commit == "unknown" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					info.Commit = s.Value
				case "vcs.time":
					info.Date = s.Value
				}
			}
		}
	}
	return info
}
