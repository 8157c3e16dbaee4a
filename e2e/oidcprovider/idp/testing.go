package idp

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// Serve runs the provider on a loopback listener for the test's duration
// and returns its issuer; the client "muster" may redirect to redirects.
func Serve(t testing.TB, usersFile string, redirects ...string) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + srv.Listener.Addr().String()
	h, err := New(Config{Issuer: issuer, UsersFile: usersFile, ClientID: "muster", RedirectURIs: redirects})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	return issuer
}

// SubmitLogin plays a browser at the provider: it follows authURL to the
// login form and posts the username and password. hc decides which
// redirects after that it follows.
func SubmitLogin(hc *http.Client, authURL, username, password string) (*http.Response, error) {
	resp, err := hc.Get(authURL)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	form := resp.Request.URL
	id := form.Query().Get("id")
	if id == "" {
		return nil, fmt.Errorf("the provider showed no login form (at %s, %d)", form, resp.StatusCode)
	}
	return hc.PostForm(form.Scheme+"://"+form.Host+"/login", url.Values{"id": {id}, "username": {username}, "password": {password}})
}
