package ops

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/musterhq/muster/core/auth"
	"github.com/musterhq/muster/core/schedule/recur"
	"github.com/musterhq/muster/core/store"
	"github.com/musterhq/muster/shared/wire"
)

// CreateToken creates an API token, or a join token (role enroll, bound to
// a cluster, with uses and a time to live). The secret is in the answer
// only: the store keeps its hash.
func (o *Ops) CreateToken(ctx context.Context, c Caller, req *wire.CreateTokenRequest) (wire.TokenSecret, error) {
	if err := AuthorizeEverywhere(c, auth.Tokens); err != nil {
		return wire.TokenSecret{}, err
	}
	if req.Roles == nil {
		return wire.TokenSecret{}, BadRequest("roles is required: a list of roles, or [] for a token that holds its person's grants alone")
	}
	roles, err := auth.CheckToken(req.Name, req.Roles)
	if err != nil {
		return wire.TokenSecret{}, err
	}
	opt := auth.Options{ClusterID: req.ClusterID, Uses: req.Uses, Labels: req.Labels}
	if req.TTL != "" {
		if opt.TTL, err = time.ParseDuration(req.TTL); err != nil || opt.TTL <= 0 {
			return wire.TokenSecret{}, BadRequest("ttl %q is not a positive Go duration such as 24h", req.TTL)
		}
	}
	secret, tok, err := auth.CreateTokenWith(ctx, o.st, req.Name, roles, opt, c.Name, c.Addr)
	if err != nil {
		return wire.TokenSecret{}, err
	}
	return wire.TokenSecret{Name: req.Name, Roles: roles, Token: secret, ExpiresTS: tok.ExpiresTS,
		ClusterID: tok.ClusterID, UsesLeft: tok.UsesLeft, Labels: tok.Labels}, nil
}

// RevokeToken deletes a token. The last admin token cannot be revoked:
// nobody could make tokens afterwards. Schedules the token approved wait
// for approval again.
func (o *Ops) RevokeToken(ctx context.Context, c Caller, name string) error {
	if err := AuthorizeEverywhere(c, auth.Tokens); err != nil {
		return err
	}
	return o.st.Update(ctx, func(tx store.Tx) error {
		if err := lastAdmin(ctx, tx, name); err != nil {
			return err
		}
		if err := auth.RevokeTokenTx(ctx, tx, name, c.Name, c.Addr); err != nil {
			return err
		}
		_, err := recur.Unapproved(ctx, tx, name, o.now())
		return err
	})
}

// lastAdmin refuses to revoke the one admin token left.
func lastAdmin(ctx context.Context, r store.Reader, name string) error {
	toks, err := r.Tokens(ctx)
	if err != nil {
		return err
	}
	admins, isAdmin := 0, false
	for _, t := range toks {
		if slices.Contains(t.Roles, store.RoleAdmin) {
			admins++
			isAdmin = isAdmin || t.Name == name
		}
	}
	if isAdmin && admins == 1 {
		return fmt.Errorf("%w: %s is the last admin token; create another admin first", ErrConflict, name)
	}
	return nil
}
