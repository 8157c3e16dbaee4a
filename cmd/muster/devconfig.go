package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/musterhq/muster/cmd/internal/cli"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/core/discovery"
)

// devConfigFile is the file in the `muster dev` directory holding the
// settings a newcomer may change while it runs: the cluster's budget,
// windows and freezes, approval rules, kinds and notification destinations.
// It is a core configuration file (configs/core.yaml) limited to these
// sections, read by the same loader and validation as `muster core --config`,
// and read again at SIGHUP.
const devConfigFile = "dev.yaml"

// devConfigKeys are the top-level keys dev.yaml may hold.
var devConfigKeys = []string{"clusters", "approval", "kinds", "notify"}

const devConfigExample = `# muster dev: settings of the core read again at SIGHUP (kill -HUP <pid>).
# The same format as a core configuration file (configs/core.yaml), limited to
# clusters, approval, kinds and notify. An invalid file changes nothing: the
# settings in use stay and the reason is printed. The nodes of cluster dev are
# filled in by muster dev.

clusters:
  - id: dev
    budget:
      max_unavailable: "1"    # disruptive kinds (example.com/node.*, upgrade...) on one node at a time
    # windows:                # disruptive work is pushed only inside one of these (unset: always)
    #   - {cron: "0 2 * * *", duration: 4h, timezone: UTC}
    # freezes:                # nothing disruptive is pushed (RFC 3339, to excluded)
    #   - {from: "2026-12-24T00:00:00Z", to: "2027-01-02T00:00:00Z", reason: year-end freeze}
  # A cluster without nodes, the one the example policy file names, so that
  # muster apply -f configs/policy.yaml works here as shipped (its freeze,
  # windows and approval rule then hold prod-db, not dev).
  - id: prod-db

# Signed notifications to a receiver on this machine (loopback is allowed in
# dev). In another terminal start one that checks each signature and prints
# each delivery:
#   muster webhook listen --addr 127.0.0.1:9000 --secret-file {{SECRET}}
# then replace "notify: []" with the lines below, uncommented, and kill -HUP.
notify: []
#  - name: local
#    url: http://127.0.0.1:9000/hook
#    format: json
#    secret_file: {{SECRET}}
#    events: [approval.waiting, run.paused, run.finished, node.down, cluster.alert]
`

// devWebhookSecret is the file, in muster dev's directory, of the signing
// secret the example notification and muster webhook listen share.
const devWebhookSecret = "webhook.secret"

// writeDevWebhookSecret writes a random secret into dir unless one is there,
// and returns its path.
func writeDevWebhookSecret(dir string) (string, error) {
	path := filepath.Join(dir, devWebhookSecret)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return path, nil
	}
	if err != nil {
		return "", err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		f.Close()
		return "", err
	}
	if _, err := f.WriteString("whsec_" + base64.StdEncoding.EncodeToString(b) + "\n"); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// writeDevConfig writes the example dev.yaml into dir unless it exists and
// returns its path; its notification example names the secret
// writeDevWebhookSecret wrote.
func writeDevConfig(dir string) (string, error) {
	secret, err := writeDevWebhookSecret(dir)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, devConfigFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return path, nil
	}
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(strings.ReplaceAll(devConfigExample, "{{SECRET}}", secret)); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// loadDevConfig returns base with the sections of the file at path, checked
// as `muster core --config` checks them. Cluster dev keeps its nodes
// (from spec) when the file lists none, and is added when the file leaves
// it out.
func loadDevConfig(path string, base core.Config, spec *discovery.ClusterSpec) (core.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return base, err
	}
	var top map[string]any
	if err := yaml.Unmarshal(b, &top); err != nil {
		return base, fmt.Errorf("%s: %w", path, err)
	}
	for k := range top {
		if !slices.Contains(devConfigKeys, k) {
			return base, fmt.Errorf("%s: %s: muster dev reads only %v here", path, k, devConfigKeys)
		}
	}
	// The lists are decoded into empty ones (the decoder would merge a
	// file's entry into the one at the same index); a section the file
	// leaves out stays as in base.
	next := base
	next.Clusters, next.Kinds, next.Notify = nil, nil, nil
	next.Approval = core.DefaultConfig().Approval
	err = cli.LoadValidFrom(nil, path, &next, nil, func() error {
		if _, ok := top["clusters"]; !ok {
			next.Clusters = slices.Clone(base.Clusters)
		}
		if _, ok := top["kinds"]; !ok {
			next.Kinds = base.Kinds
		}
		if _, ok := top["notify"]; !ok {
			next.Notify = base.Notify
		}
		if _, ok := top["approval"]; !ok {
			next.Approval = base.Approval
		}
		if spec != nil {
			i := slices.IndexFunc(next.Clusters, func(c discovery.ClusterSpec) bool { return c.ID == spec.ID })
			if i < 0 {
				next.Clusters = append(next.Clusters, *spec)
			} else if len(next.Clusters[i].Nodes) == 0 {
				next.Clusters[i].Nodes = spec.Nodes
			}
		}
		return next.Validate()
	})
	if err != nil {
		return base, fmt.Errorf("%s: %w", path, err)
	}
	return next, nil
}
