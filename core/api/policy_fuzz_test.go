package api

import (
	"context"
	"net/http"
	"testing"

	"github.com/musterhq/muster/core/ops"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/core/store/sqlite"
)

// FuzzPolicyBodies decodes arbitrary bodies as the policy calls do and
// acts on what decodes as the operations do: a refusal is a 4xx (400, the
// 404 of a cluster or record that does not exist, the 409 of a limit),
// never a 5xx; a document applied once is applied: a second apply of it
// changes nothing.
func FuzzPolicyBodies(f *testing.F) {
	for _, s := range []string{
		`{"source":"file:p.yaml","document":{"windows":[{"name":"nightly","cluster":"prod","cron":"0 2 * * *","duration":"4h"}]}}`,
		`{"source":"file:p.yaml","document":{"budgets":[{"cluster":"prod","max_unavailable":"10%"}]}}`,
		`{"source":"file:p.yaml","document":{"approval_rules":[{"name":"noop","kind":"noop","approval":"none"},` +
			`{"name":"db","cluster":"prod","levels":[{"teams":["db"],"min":2}]}]}}`,
		`{"source":"file:p.yaml","dry_run":true,"document":{"freezes":[{"cluster":"prod","from":"2030-01-01T00:00:00Z",` +
			`"to":"2030-01-02T00:00:00Z","reason":"x"}]}}`,
		`{"source":"file:p.yaml","document":{"windows":[{"name":"a","cluster":"prod","cron":"* * * * *","duration":"1s"}]}}`,
		`{"source":"file:p.yaml","document":{"windows":[{"name":"a","cluster":"nope","cron":"0 2 * * *","duration":"4h"}]}}`,
		`{"source":"file:p.yaml","document":{"teams":[{"name":"db","members":["dana"]}],"grants":[{"team":"db","role":"approver",` +
			`"clusters":"prod"},{"person":"pat","role":"viewer","labels":{"tier":"prod"}}]}}`,
		`{"source":"file:p.yaml","document":{"grants":[{"team":"nope","role":"viewer","clusters":"*"}]}}`,
		`{"source":"p.yaml","document":{}}`, `{"source":"file:p.yaml","document":{"colors":[]}}`,
		`{"spec":{"cluster":"prod","max_unavailable":"1"},"reason":"x"}`, `{"spec":{"cluster":"prod"},"reason":"x"}`,
		`{"reason":"gone"}`, `[]`, ``, `{`, `null`,
		`{"source":"file:p.yaml","document":{"playbooks":[{"name":"nap","document":"name: nap\nstages:\n  - {name: s, kind: muster.io/debug.sleep, args: {seconds: 1}, target: {nodes: [db-1]}}\n"}],` +
			`"schedules":[{"name":"nap","cluster":"prod","playbook":"nap","version":"latest","cron":"0 2 * * *","params":{"a":"b"}}]}}`,
		`{"source":"file:p.yaml","document":{"schedules":[{"name":"nap","cluster":"prod","playbook":"none","cron":"0 2 * * *"}]}}`,
		`{"source":"file:p.yaml","document":{"schedules":[{"name":"nap","cluster":"prod","playbook":"nap","version":3,"cron":"0 2 * * *"}]}}`,
		`{"source":"file:p.yaml","document":{"playbooks":[{"name":"nap","document":"stages: 1"}]}}`,
		`{"source":"file:p.yaml","document":{"playbooks":[{"name":"x","document":"name: y\nstages: []\n"}]}}`,
	} {
		f.Add([]byte(s))
	}
	st, err := sqlite.Open(context.Background(), f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if err := st.Update(ctx, func(tx store.Tx) error {
		return tx.PutCluster(ctx, &store.Cluster{ID: "prod", Status: store.ClusterHealthy})
	}); err != nil {
		f.Fatal(err)
	}
	o := ops.New(ops.Config{Store: st})
	admin := ops.Caller{Name: "root", Roles: []string{store.RoleAdmin}}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(err error) {
			if err == nil {
				return
			}
			if s := statusOf(err); s != http.StatusBadRequest && s != http.StatusNotFound && s != http.StatusConflict {
				t.Fatalf("error %v answers %d, not a 4xx", err, s)
			}
		}
		if req, err := decodeApplyPolicy(body); err != nil {
			check(err)
		} else {
			_, err := o.ApplyPolicy(ctx, admin, req)
			check(err)
			if err == nil && !req.DryRun {
				again, err := o.ApplyPolicy(ctx, admin, req)
				if err != nil || len(again.Changes) != 0 {
					t.Fatalf("a second apply of %s = %+v, %v; want no change", body, again, err)
				}
			}
		}
		if req, err := decodePutPolicy(body); err != nil {
			check(err)
		} else {
			for _, kind := range []string{store.PolicyWindow, store.PolicyBudget, store.PolicyApprovalRule} {
				_, err := o.PutPolicy(ctx, admin, kind, "prod", req)
				check(err)
			}
		}
		if req, err := decodeDeletePolicy(body); err != nil {
			check(err)
		} else {
			_, err := o.DeletePolicy(ctx, admin, store.PolicyWindow, "nightly", req.Reason)
			check(err)
		}
	})
}
