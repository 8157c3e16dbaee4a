package idp

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

var errNotFound = errors.New("not found")

// authRequest is one authorization request, then its code.
type authRequest struct {
	id       string
	req      oidc.AuthRequest
	subject  string
	authTime time.Time
	done     bool
}

func (a *authRequest) GetID() string                      { return a.id }
func (a *authRequest) GetACR() string                     { return "" }
func (a *authRequest) GetAMR() []string                   { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string              { return []string{a.req.ClientID} }
func (a *authRequest) GetAuthTime() time.Time             { return a.authTime }
func (a *authRequest) GetClientID() string                { return a.req.ClientID }
func (a *authRequest) GetNonce() string                   { return a.req.Nonce }
func (a *authRequest) GetRedirectURI() string             { return a.req.RedirectURI }
func (a *authRequest) GetScopes() []string                { return a.req.Scopes }
func (a *authRequest) GetState() string                   { return a.req.State }
func (a *authRequest) GetSubject() string                 { return a.subject }
func (a *authRequest) Done() bool                         { return a.done }
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return a.req.ResponseMode }
func (a *authRequest) GetResponseType() oidc.ResponseType { return a.req.ResponseType }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	if a.req.CodeChallenge == "" {
		return nil
	}
	return &oidc.CodeChallenge{Challenge: a.req.CodeChallenge, Method: a.req.CodeChallengeMethod}
}

// grant is what a refresh token or an access token stands for.
type grant struct {
	subject, clientID string
	scopes, audience  []string
	authTime          time.Time
	expires           time.Time
}

func (g *grant) GetAMR() []string                 { return []string{"pwd"} }
func (g *grant) GetAudience() []string            { return g.audience }
func (g *grant) GetAuthTime() time.Time           { return g.authTime }
func (g *grant) GetClientID() string              { return g.clientID }
func (g *grant) GetScopes() []string              { return g.scopes }
func (g *grant) GetSubject() string               { return g.subject }
func (g *grant) SetCurrentScopes(scopes []string) { g.scopes = scopes }

// device is one device authorization.
type device struct {
	state    op.DeviceAuthorizationState
	userCode string
}

// storage is the op.Storage of the provider, in memory but for the users.
type storage struct {
	users  *userFile
	client *client
	key    *rsa.PrivateKey
	keyID  string

	mu       sync.Mutex
	requests map[string]*authRequest // by id
	codes    map[string]string       // code -> request id
	access   map[string]*grant
	refresh  map[string]*grant
	devices  map[string]*device // by device code
}

var (
	_ op.Storage                    = (*storage)(nil)
	_ op.CanSetUserinfoFromRequest  = (*storage)(nil)
	_ op.DeviceAuthorizationStorage = (*storage)(nil)
)

func newStorage(users *userFile, c *client) (*storage, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	return &storage{users: users, client: c, key: key, keyID: randomID(), requests: map[string]*authRequest{},
		codes: map[string]string{}, access: map[string]*grant{}, refresh: map[string]*grant{}, devices: map[string]*device{}}, nil
}

func randomID() string { return rand.Text() }

func (s *storage) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if len(r.Prompt) == 1 && r.Prompt[0] == "none" {
		return nil, oidc.ErrLoginRequired()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &authRequest{id: randomID(), req: *r}
	s.requests[a.id] = a
	return a, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.requests[id]
	if !ok {
		return nil, errNotFound
	}
	return a, nil
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errNotFound
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for c, rid := range s.codes {
		if rid == id {
			delete(s.codes, c)
		}
	}
	return nil
}

// signIn marks the request of id signed in by the user, when their password
// is right.
func (s *storage) signIn(id, username, password string) error {
	if err := s.checkPassword(username, password); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.requests[id]
	if !ok {
		return errors.New("unknown sign-in request")
	}
	a.subject, a.authTime, a.done = username, time.Now(), true
	return nil
}

func (s *storage) checkPassword(username, password string) error {
	u, ok, err := s.users.byName(username)
	if err != nil {
		return err
	}
	if !ok || u.Password != password {
		return errors.New("wrong username or password")
	}
	return nil
}

func (s *storage) newGrant(r op.TokenRequest, ttl time.Duration) *grant {
	g := &grant{subject: r.GetSubject(), audience: r.GetAudience(), scopes: r.GetScopes(), expires: time.Now().Add(ttl)}
	if x, ok := r.(interface{ GetClientID() string }); ok {
		g.clientID = x.GetClientID()
	}
	if x, ok := r.(interface{ GetAuthTime() time.Time }); ok {
		g.authTime = x.GetAuthTime()
	}
	return g
}

func (s *storage) CreateAccessToken(_ context.Context, r op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := randomID()
	g := s.newGrant(r, 5*time.Minute)
	s.access[id] = g
	return id, g.expires, nil
}

func (s *storage) CreateAccessAndRefreshTokens(_ context.Context, r op.TokenRequest, current string) (string, string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if current != "" {
		if _, ok := s.refresh[current]; !ok {
			return "", "", time.Time{}, op.ErrInvalidRefreshToken
		}
		delete(s.refresh, current) // rotated: each refresh token works once
	}
	id := randomID()
	g := s.newGrant(r, 5*time.Minute)
	s.access[id] = g
	rt := randomID()
	rg := *g
	rg.expires = time.Now().Add(24 * time.Hour)
	s.refresh[rt] = &rg
	return id, rt, g.expires, nil
}

func (s *storage) TokenRequestByRefreshToken(_ context.Context, rt string) (op.RefreshTokenRequest, error) {
	s.mu.Lock()
	g, ok := s.refresh[rt]
	s.mu.Unlock()
	if !ok || time.Now().After(g.expires) {
		return nil, op.ErrInvalidRefreshToken
	}
	// A person removed from the users file gets no new tokens.
	if _, found, err := s.users.byName(g.subject); err != nil || !found {
		return nil, op.ErrInvalidRefreshToken
	}
	c := *g
	return &c, nil
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(_ context.Context, token, _, _ string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.access, token)
	delete(s.refresh, token)
	return nil
}

func (s *storage) GetRefreshTokenInfo(_ context.Context, _ string, token string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.refresh[token]
	if !ok {
		return "", "", op.ErrInvalidRefreshToken
	}
	return g.subject, token, nil
}

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return k.id }

type publicKey struct{ signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	return signingKey{id: s.keyID, key: s.key}, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{signingKey{id: s.keyID, key: s.key}}}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if id != s.client.id {
		return nil, errNotFound
	}
	return s.client, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, _ string) error {
	if id != s.client.id {
		return errNotFound
	}
	return nil
}

func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, r op.IDTokenRequest, scopes []string) error {
	return s.setUserinfo(info, r.GetSubject(), scopes)
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, _, _ string) error {
	s.mu.Lock()
	g, ok := s.access[tokenID]
	s.mu.Unlock()
	if !ok || time.Now().After(g.expires) {
		return errors.New("access token invalid or expired")
	}
	return s.setUserinfo(info, g.subject, g.scopes)
}

// setUserinfo sets the claims of the user as the file says now: their
// e-mail, username and groups.
func (s *storage) setUserinfo(info *oidc.UserInfo, subject string, scopes []string) error {
	u, ok, err := s.users.byName(subject)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("user %q not found", subject)
	}
	info.Subject = u.Username
	if slices.Contains(scopes, oidc.ScopeEmail) {
		info.Email, info.EmailVerified = u.Email, true
	}
	if slices.Contains(scopes, oidc.ScopeProfile) {
		info.PreferredUsername = u.Username
	}
	if slices.Contains(scopes, "groups") {
		groups := u.Groups
		if groups == nil {
			groups = []string{}
		}
		info.AppendClaims("groups", groups)
	}
	return nil
}

func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errors.New("introspection is not supported")
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errNotFound
}

func (s *storage) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return scopes, nil
}

func (s *storage) Health(context.Context) error { return nil }

func (s *storage) StoreDeviceAuthorization(_ context.Context, clientID, deviceCode, userCode string, expires time.Time, scopes []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.devices {
		if d.userCode == userCode {
			return op.ErrDuplicateUserCode
		}
	}
	s.devices[deviceCode] = &device{userCode: userCode, state: op.DeviceAuthorizationState{ClientID: clientID,
		Audience: []string{clientID}, Scopes: scopes, Expires: expires}}
	return nil
}

func (s *storage) GetDeviceAuthorizatonState(_ context.Context, clientID, deviceCode string) (*op.DeviceAuthorizationState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.devices[deviceCode]
	if !ok || d.state.ClientID != clientID {
		return nil, errNotFound
	}
	st := d.state
	return &st, nil
}

// completeDevice signs in the device authorization of userCode.
func (s *storage) completeDevice(userCode, username, password string) error {
	if err := s.checkPassword(username, password); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.devices {
		if d.userCode == userCode && time.Now().Before(d.state.Expires) {
			d.state.Done, d.state.Subject, d.state.AMR, d.state.AuthTime = true, username, []string{"pwd"}, time.Now()
			return nil
		}
	}
	return errors.New("unknown or expired code")
}
