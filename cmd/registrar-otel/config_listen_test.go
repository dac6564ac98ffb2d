package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// An address this host does not have (TEST-NET-1): config check, binding
// it for a moment, warns that serve could not listen there (an error under
// --strict), and serve refuses to start on it (exit 2).
func TestConfigCheckForeseesAnAddressThisHostLacks(t *testing.T) {
	const addr = "192.0.2.1:9464"
	dir := shortTempDir(t)
	path := writeConfig(t, dir, serveDoc(dir, "", `metrics_listen = "`+addr+`"`+"\n"), 0o600)
	warn := "telemetry.metrics_listen " + addr + ": serve could not listen there: cannot assign requested address"
	wantRun(t, dir, nil, []string{"config", "check", "--config", path}, exitOK, "warning: "+warn)
	wantRun(t, dir, nil, []string{"config", "check", "--config", path, "--strict"}, exitUsage, warn+" (--strict)")

	var out, errb bytes.Buffer
	want := "telemetry.metrics_listen could not be listened on: listen tcp " + addr + ": bind: cannot assign requested address"
	quoted := strconv.Quote(want)
	if code := runServe([]string{"--config", path}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), quoted[1:len(quoted)-1]) {
		t.Errorf("serve: exit %d, stderr:\n%s\nwant %d and %q", code, errb.String(), exitUsage, want)
	}
}
