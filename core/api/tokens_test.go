package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var created wire.TokenSecret
	e.call(http.MethodPost, "/api/v1/tokens", "admin", wire.CreateTokenRequest{Name: "carol", Roles: []string{"approver", "viewer"}}, http.StatusCreated, &created)
	if created.Name != "carol" || strings.Join(created.Roles, ",") != "approver,viewer" || !strings.HasPrefix(created.Token, "mst_") {
		t.Fatalf("created %+v", created)
	}
	e.secrets["carol"] = created.Token
	// The new secret works, with its roles.
	e.call(http.MethodGet, "/api/v1/actions", "carol", nil, http.StatusOK, nil)
	e.fail(http.MethodPost, "/api/v1/actions", "carol", wire.CreateActionRequest{ClusterID: "prod", NodeID: "db-1", Kind: kindPing}, http.StatusForbidden)

	status, body := e.do(http.MethodGet, "/api/v1/tokens", "admin", nil)
	if status != http.StatusOK || strings.Contains(string(body), created.Token) || strings.Contains(string(body), "hash") {
		t.Fatalf("list: %d %s", status, body)
	}
	var list wire.TokenList
	e.call(http.MethodGet, "/api/v1/tokens", "admin", nil, http.StatusOK, &list)
	found := false
	for _, tok := range list.Tokens {
		found = found || (tok.Name == "carol" && !tok.CreatedTS.IsZero())
	}
	if !found || len(list.Tokens) != 7 { // with stg, of setup
		t.Fatalf("list %+v", list)
	}

	e.fail(http.MethodPost, "/api/v1/tokens", "admin", wire.CreateTokenRequest{Name: "carol", Roles: []string{"viewer"}}, http.StatusConflict)
	e.fail(http.MethodPost, "/api/v1/tokens", "admin", wire.CreateTokenRequest{Name: "dave", Roles: []string{"root"}}, http.StatusBadRequest)
	e.fail(http.MethodPost, "/api/v1/tokens", "admin", wire.CreateTokenRequest{Name: "dave"}, http.StatusBadRequest)
	e.fail(http.MethodPost, "/api/v1/tokens", "admin", wire.CreateTokenRequest{Name: "no spaces", Roles: []string{"viewer"}}, http.StatusBadRequest)
	e.fail(http.MethodPost, "/api/v1/tokens", "admin", `{"name":"dave","roles":["viewer"],"token":"mst_chosen"}`, http.StatusBadRequest)

	e.call(http.MethodDelete, "/api/v1/tokens/carol", "admin", nil, http.StatusNoContent, nil)
	e.fail(http.MethodGet, "/api/v1/actions", "carol", nil, http.StatusUnauthorized)
	e.fail(http.MethodDelete, "/api/v1/tokens/carol", "admin", nil, http.StatusNotFound)

	var kinds []string
	for _, ev := range e.events() {
		if ev.Type == store.EventTokenCreated || ev.Type == store.EventTokenRevoked {
			if ev.Data["name"] == "carol" {
				kinds = append(kinds, ev.Type)
				if ev.Actor != "admin" || ev.ClientAddr == "" {
					t.Errorf("event %+v does not name the actor and address", ev)
				}
			}
		}
		if strings.Contains(ev.Message, created.Token) || strings.Contains(ev.Message, "mst_") {
			t.Errorf("event %s carries a secret", ev.Type)
		}
		for _, v := range ev.Data {
			if s, ok := v.(string); ok && strings.HasPrefix(s, "mst_") {
				t.Errorf("event %s data carries a secret", ev.Type)
			}
		}
	}
	if strings.Join(kinds, ",") != "token.created,token.revoked" {
		t.Fatalf("token events for carol: %v", kinds)
	}
	var l wire.EventList
	status, body = e.do(http.MethodGet, "/api/v1/events", "viewer", nil)
	if status != http.StatusOK || strings.Contains(string(body), created.Token) {
		t.Fatal("the event log answer carries a secret")
	}
	_ = l
}

func TestLastAdminCannotBeRevoked(t *testing.T) {
	t.Parallel()
	e := setup(t)
	d := e.fail(http.MethodDelete, "/api/v1/tokens/admin", "admin", nil, http.StatusConflict)
	if !strings.Contains(d.Message, "last admin") {
		t.Fatalf("envelope %+v", d)
	}
	var second wire.TokenSecret
	e.call(http.MethodPost, "/api/v1/tokens", "admin", wire.CreateTokenRequest{Name: "root2", Roles: []string{"admin"}}, http.StatusCreated, &second)
	e.secrets["root2"] = second.Token
	e.call(http.MethodDelete, "/api/v1/tokens/admin", "root2", nil, http.StatusNoContent, nil)
}

func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var created wire.TokenSecret
	e.call(http.MethodPost, "/api/v1/tokens", "admin", wire.CreateTokenRequest{Name: "erin", Roles: []string{"viewer"}}, http.StatusCreated, &created)
	e.secrets["erin"] = created.Token
	e.call(http.MethodGet, "/api/v1/actions", "erin", nil, http.StatusOK, nil)
	e.call(http.MethodDelete, "/api/v1/tokens/erin", "admin", nil, http.StatusNoContent, nil)
	e.fail(http.MethodGet, "/api/v1/actions", "erin", nil, http.StatusUnauthorized)
	logs := e.logs.String()
	// The log is not empty: requests are logged, with their caller...
	if !strings.Contains(logs, "actor=erin") || !strings.Contains(logs, "path=/api/v1/tokens/erin") {
		t.Fatalf("requests are not logged:\n%s", logs)
	}
	// ...and never a secret (setup checks every token's secret at cleanup).
	if strings.Contains(logs, created.Token) || strings.Contains(logs, "mst_") {
		t.Fatalf("the log carries a secret:\n%s", logs)
	}
}

// TestTokenNamesAreUniqueIgnoringCase: creating Alice while alice exists is a
// 409 with the envelope, and creates nothing.
func TestTokenNamesAreUniqueIgnoringCase(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := len(e.events())
	for _, name := range []string{"OP", "Op", "Admin"} {
		d := e.fail(http.MethodPost, "/api/v1/tokens", "admin", wire.CreateTokenRequest{Name: name, Roles: []string{store.RoleApprover}}, http.StatusConflict)
		if d.Code != wire.CodeConflict || !strings.Contains(d.Message, name) {
			t.Errorf("create %s: envelope %+v", name, d)
		}
	}
	var list wire.TokenList
	e.call(http.MethodGet, "/api/v1/tokens", "admin", nil, http.StatusOK, &list)
	if len(list.Tokens) != 6 { // with stg, of setup
		t.Fatalf("refused creates changed the token list: %+v", list.Tokens)
	}
	if n := len(e.events()); n != before {
		t.Fatalf("refused creates appended %d events", n-before)
	}
}
