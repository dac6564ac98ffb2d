package telemetry

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Where a service.instance.id came from, as InstanceID reports it.
const (
	InstanceIDFromConfig  = "telemetry.service_instance_id"
	InstanceIDFromEnv     = "OTEL_RESOURCE_ATTRIBUTES"
	InstanceIDFromDerived = "derived from the host name and registrar.state_dir"
)

// keyServiceInstanceID is the resource attribute's name.
const keyServiceInstanceID = "service.instance.id"

// InstanceID returns the daemon's service.instance.id and where it comes
// from: configured (telemetry.service_instance_id) when set; else the
// service.instance.id OTEL_RESOURCE_ATTRIBUTES names (read with getenv, nil
// meaning os.Getenv); else DefaultInstanceID(stateDir); else, with no
// state directory either (a client-side tool), "" and "".
//
// Several registrars of one service.name export their series under one
// resource unless each has its own id: a backend would merge their counters
// and a dashboard could not sum across them. The configured value wins
// over the environment as telemetry.service_name does over
// OTEL_SERVICE_NAME.
func InstanceID(configured, stateDir string, getenv func(string) string) (id, from string) {
	if configured != "" {
		return configured, InstanceIDFromConfig
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	if v, ok := resourceAttribute(getenv("OTEL_RESOURCE_ATTRIBUTES"), keyServiceInstanceID); ok {
		return v, InstanceIDFromEnv
	}
	if stateDir == "" {
		return "", ""
	}
	return DefaultInstanceID(stateDir), InstanceIDFromDerived
}

// DefaultInstanceID is the service.instance.id of a daemon that is given
// none: "<host name>:<absolute state directory>". Two registrars on one
// host need state directories of their own (the bbolt file, the evidence
// checkpoint), so the pair tells any two daemons apart, reads as where
// the daemon runs, and is the same after every restart, unlike a random
// id, which would start a new series each time. A host name that cannot
// be read is "localhost"; a directory that cannot be made absolute is
// cleaned as given.
func DefaultInstanceID(stateDir string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	dir, err := filepath.Abs(stateDir)
	if err != nil {
		dir = filepath.Clean(stateDir)
	}
	return host + ":" + dir
}

// resourceAttribute returns the value of key in an
// OTEL_RESOURCE_ATTRIBUTES list (key1=value1,key2=value2, values
// percent-encoded, as the SDK reads it), the last one when it repeats; an
// entry that does not parse is skipped, as the SDK skips it.
func resourceAttribute(list, key string) (string, bool) {
	var (
		val   string
		found bool
	)
	for entry := range strings.SplitSeq(list, ",") {
		k, v, ok := strings.Cut(entry, "=")
		if !ok || strings.TrimSpace(k) != key {
			continue
		}
		dec, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil || dec == "" {
			continue
		}
		val, found = dec, true
	}
	return val, found
}
