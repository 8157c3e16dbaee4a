package handlers

import (
	"context"
	"os"
	"os/user"
	"strings"
	"testing"
)

// An external kind with user runs its command as that user: a real process
// prints its own uid and groups.
func TestExternalRunsAsItsUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("dropping privileges needs root (CI runs as root)")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody here")
	}
	for _, c := range []struct {
		name, group, want string
	}{
		{"user only", "", "uid=" + nobody.Uid + " gid=" + nobody.Gid},
		{"user and group", "0", "uid=" + nobody.Uid + " gid=0 groups=0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// Inline: the test's temporary files are not readable by nobody.
			spec := External{Kind: "example.com/whoami", Run: []string{"/bin/sh", "-c", `echo "uid=$(id -u) gid=$(id -g) groups=$(id -G)"`},
				User: "nobody", Group: c.group}
			if errs := spec.Validate(0); len(errs) != 0 {
				t.Fatal(errs)
			}
			h, _ := registry(t, spec).Get("example.com/whoami")
			x := execFor("example.com/whoami", `{}`)
			res := drive(t, context.Background(), h, x)
			if res.Status != Done || !strings.HasPrefix(x.Output(), c.want) {
				t.Fatalf("%+v: output %q, want %q", res, x.Output(), c.want)
			}
			if strings.Contains(" "+strings.TrimSpace(x.Output())+" ", " groups=0 ") && c.group == "" {
				t.Fatalf("the agent's root group leaked: %q", x.Output())
			}
		})
	}
}

func TestExternalUserValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		user, group string
		field       string
	}{
		{"unknown user", "no-such-user-xyz", "", "actions.external[0].user"},
		{"group without user", "", "nogroup", "actions.external[0].group"},
		{"unknown group", "nobody", "no-such-group-xyz", "actions.external[0].user"},
	} {
		e := External{Kind: "example.com/x", Run: []string{"/bin/true"}, User: c.user, Group: c.group}
		errs := e.Validate(0)
		if len(errs) != 1 || errs[0].Field != c.field {
			t.Errorf("%s: %v", c.name, errs)
		}
	}
}
