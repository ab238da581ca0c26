// Package version is the version of Sluice that a binary was built from:
// the release's tag, set at link time by `make release`
//
//	go build -ldflags '-X github.com/sluice-dev/sluice/internal/version.tag=v0.1.0'
//
// and otherwise what the Go toolchain recorded in the binary (the module's
// version when built with `go install module@version`, else the VCS
// revision and whether the tree was modified), else "devel".
package version

import (
	"runtime/debug"
	"strings"
)

// tag is set only by the linker (-ldflags -X); nothing assigns it at run
// time. It is a package variable because -X can set nothing else.
var tag string

// String is the binary's version: the linked tag, else the build
// information's module version or VCS revision, else "devel".
func String() string {
	info, _ := debug.ReadBuildInfo()
	return resolve(tag, info)
}

// resolve is String's rule on explicit inputs (info may be nil).
func resolve(tag string, info *debug.BuildInfo) string {
	if tag != "" {
		return tag
	}
	if info == nil {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "devel+" + rev
	if modified == "true" {
		v += ".dirty"
	}
	return v
}

// Attrs are the log attributes that name this binary's build: its version
// and the Go toolchain, for the first line a program logs.
func Attrs() []any {
	gov := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		gov = info.GoVersion
	}
	return []any{"version", String(), "go", strings.TrimPrefix(gov, "go")}
}
