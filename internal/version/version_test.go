package version

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	rev := func(r, mod string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: r}, {Key: "vcs.modified", Value: mod}}}
	}
	tests := []struct {
		name string
		tag  string
		info *debug.BuildInfo
		want string
	}{
		{"linked tag wins", "v1.2.3", rev("0123456789abcdef", "true"), "v1.2.3"},
		{"module version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}}, "v0.1.0"},
		{"clean revision", "", rev("0123456789abcdef", "false"), "devel+0123456789ab"},
		{"modified tree", "", rev("0123456789abcdef", "true"), "devel+0123456789ab.dirty"},
		{"no vcs", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"no build info", "", nil, "devel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resolve(tt.tag, tt.info); got != tt.want {
				t.Errorf("resolve(%q, ...) = %q; want %q", tt.tag, got, tt.want)
			}
		})
	}
}
