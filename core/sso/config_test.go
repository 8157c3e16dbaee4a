package sso

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := Config{Issuer: "https://idp.example/", ClientID: "muster", RedirectURL: "https://muster.example/ui/oidc/callback"}
	tests := []struct {
		name  string
		edit  func(*Config)
		field string // "" = valid
	}{
		{name: "off", edit: func(c *Config) { *c = Config{ClientID: "junk"} }},
		{name: "good", edit: func(*Config) {}},
		{name: "http on loopback", edit: func(c *Config) { c.Issuer = "http://127.0.0.1:5556" }},
		{name: "http elsewhere", edit: func(c *Config) { c.Issuer = "http://idp.example" }, field: "oidc.issuer"},
		{name: "not a URL", edit: func(c *Config) { c.Issuer = "idp" }, field: "oidc.issuer"},
		{name: "no client", edit: func(c *Config) { c.ClientID = "" }, field: "oidc.client_id"},
		{name: "no redirect", edit: func(c *Config) { c.RedirectURL = "" }, field: "oidc.redirect_url"},
		{name: "redirect elsewhere", edit: func(c *Config) { c.RedirectURL = "https://muster.example/cb" }, field: "oidc.redirect_url"},
		{name: "secret readable by others", edit: func(c *Config) { c.ClientSecretFile = open }, field: "oidc.client_secret_file"},
		{name: "secret missing", edit: func(c *Config) { c.ClientSecretFile = filepath.Join(dir, "none") }, field: "oidc.client_secret_file"},
		{name: "scopes without openid", edit: func(c *Config) { c.Scopes = []string{"email"} }, field: "oidc.scopes"},
		{name: "claim with spaces", edit: func(c *Config) { c.GroupsClaim = " groups" }, field: "oidc.groups_claim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := good
			tt.edit(&c)
			errs := c.Validate("oidc")
			if tt.field == "" {
				if len(errs) != 0 {
					t.Fatalf("Validate = %v, want valid", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tt.field {
				t.Fatalf("Validate = %v, want one error on %s", errs, tt.field)
			}
			if !strings.Contains(errs.Error(), tt.field) {
				t.Fatalf("error %q does not name %s", errs.Error(), tt.field)
			}
		})
	}
}
