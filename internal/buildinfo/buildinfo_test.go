package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestStampedValuesWin(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201-abc"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "feed"}}}
	if got := versionOf("0.9.0", bi); got != "0.9.0" {
		t.Errorf("versionOf(stamped) = %q, want 0.9.0", got)
	}
	if got := revisionOf("cafe", bi); got != "cafe" {
		t.Errorf("revisionOf(stamped) = %q, want cafe", got)
	}
}

func TestUnstampedBuildFallsBackToTheToolchainsRecord(t *testing.T) {
	for _, tc := range []struct {
		name         string
		bi           *debug.BuildInfo
		version, rev string
	}{
		{"no build info", nil, "dev", "unknown"},
		{"devel, no vcs", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "(devel)", "unknown"},
		{"no module version", &debug.BuildInfo{}, "dev", "unknown"},
		{"pseudo-version, clean", &debug.BuildInfo{
			Main:     debug.Module{Version: "v0.0.0-20261201101500-0123456789ab"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "false"}},
		}, "v0.0.0-20261201101500-0123456789ab", "0123456789abcdef"},
		{"tag, modified", &debug.BuildInfo{
			Main:     debug.Module{Version: "v0.9.0+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: "0123"}},
		}, "v0.9.0+dirty", "0123 (modified)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionOf("", tc.bi); got != tc.version {
				t.Errorf("version = %q, want %q", got, tc.version)
			}
			if got := revisionOf("", tc.bi); got != tc.rev {
				t.Errorf("revision = %q, want %q", got, tc.rev)
			}
		})
	}
}
