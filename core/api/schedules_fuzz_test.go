package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/musterhq/muster/core/schedule"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/names"
)

func FuzzScheduleDecode(f *testing.F) {
	for _, seed := range []string{
		`{"name":"nightly","cluster":"prod","playbook":"patch","version":"latest","cron":"0 2 * * *","timezone":"Europe/Berlin"}`,
		`{"name":"n","cluster":"c","playbook":"p","version":3,"cron":"@every 3s","concurrency":"allow","catch_up":"0s"}`,
		`{"name":"n","cluster":"c","playbook":"p","version":"7","cron":"@daily","params":{"a":"b"}}`,
		`{"name":"n","cluster":"c","playbook":"p","version":0,"cron":"@daily"}`,
		`{"name":"n","cluster":"c","playbook":"p","version":-1,"cron":"@daily"}`,
		`{"name":"n","cluster":"c","playbook":"p","version":1.5,"cron":"@daily"}`,
		`{"name":"n","cluster":"c","playbook":"p","version":"newest","cron":"@daily"}`,
		`{"name":"n","cluster":"c","playbook":"p","cron":"CRON_TZ=UTC 0 2 * * *"}`,
		`{"name":"n","cluster":"c","playbook":"p","cron":"0 2 * * *","timezone":"Local"}`,
		`{"name":"n","cluster":"c","playbook":"p","cron":"0 2 * * *","catch_up":"1000h"}`,
		`{"name":"n","cluster":"c","playbook":"p","cron":"0 2 * * *","concurrency":"replace"}`,
		`{"name":"../x","cluster":"c","playbook":"p","cron":"@daily"}`,
		`{"name":"n","cluster":"c","playbook":"p","cron":"@daily","state":"ACTIVE"}`,
		`{"name":"n","cluster":"c","playbook":"p","cron":"@daily","approved_by":"me"}`,
		`{"name":"n","cluster":"c","playbook":"p","cron":"@daily","params":{"a":1}}`,
		`{"name":"n","cluster":"c","playbook":"p","cron":"@every 0s"}`,
		`{"name":"n","cluster":"c","playbook":"p","cron":"@daily"} trailing`,
		`[]`, `null`, ``, `{`, "\x00",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeSchedule(body, 0)
		if err != nil {
			if st, _ := classify(err); st != http.StatusBadRequest {
				t.Fatalf("error %v answers %d, not 400", err, st)
			}
			return
		}
		if names.CheckID(req.Name) != nil || names.CheckID(req.Cluster) != nil || names.CheckID(req.Playbook) != nil {
			t.Fatalf("accepted names %q %q %q", req.Name, req.Cluster, req.Playbook)
		}
		if req.Version < 0 {
			t.Fatalf("accepted version %d", req.Version)
		}
		if _, err := schedule.ParseCron(req.Cron, req.Timezone); err != nil {
			t.Fatalf("accepted cron %q in %q: %v", req.Cron, req.Timezone, err)
		}
		if req.Concurrency != store.ConcurrencyForbid && req.Concurrency != store.ConcurrencyAllow {
			t.Fatalf("accepted concurrency %q", req.Concurrency)
		}
		d, err := time.ParseDuration(req.CatchUp)
		if err != nil || d < 0 || d > schedule.MaxCatchUp {
			t.Fatalf("accepted catch_up %q", req.CatchUp)
		}
	})
}
