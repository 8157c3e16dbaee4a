package wire

import (
	"encoding/json"
	"time"

	"github.com/musterhq/muster/shared/action"
)

// CreateActionRequest is the body of POST /api/v1/actions on the core. Only
// these fields may be set by a caller; any other field (state, requester,
// approved_by, timestamps...) is refused with 400.
type CreateActionRequest struct {
	// ID is optional; the core makes a UUID when it is empty.
	ID        string          `json:"id,omitempty"`
	ClusterID string          `json:"cluster_id"`
	NodeID    string          `json:"node_id"`
	Kind      string          `json:"kind"`
	Args      json.RawMessage `json:"args,omitempty"`
	// TimeoutS is optional; 0 leaves it to the agent's default.
	TimeoutS int `json:"timeout_s,omitempty"`
	// NotBefore: the core pushes it no earlier (RFC 3339); an approval's
	// time counts from it. Not in the past, at most 90 days ahead.
	NotBefore *time.Time `json:"not_before,omitempty"`
	// Target, given instead of NodeID, makes one action per node of the
	// cluster it picks ({"labels": {...}}, {"nodes": [...]} or {"all":
	// true}), all or none; the answer is then CreatedActions.
	Target *Target `json:"target,omitempty"`
	// RequestID, with a target only, names the create so that a retry of
	// it (after a timeout) makes nothing new: each action's id is derived
	// from it, its cluster and its node. The same request_id and content
	// answers 200 with the actions made; other content is a 409. At most
	// 128 printable ASCII characters.
	RequestID string `json:"request_id,omitempty"`
}

// CreatedActions answers POST /api/v1/actions with a target: the actions
// made, one per node, sorted by node id.
type CreatedActions struct {
	Actions []action.Action `json:"actions"`
}

// ActionList answers GET /api/v1/actions on the core. NextMarker is empty on
// the last page; otherwise it is passed as marker to get the next one.
type ActionList struct {
	Actions    []action.Action `json:"actions"`
	NextMarker string          `json:"next_marker"`
}

// NodeCounts counts the nodes of a cluster by status.
type NodeCounts struct {
	Total int `json:"total"`
	Up    int `json:"up"`
	// Drained counts the drained nodes that are not DOWN: they are shown
	// DRAINED, not UP.
	Drained int `json:"drained"`
	Down    int `json:"down"`
	Unknown int `json:"unknown"`
}

// Cluster is one cluster in GET /api/v1/clusters. Nodes is filled only by
// GET /api/v1/clusters/{c}.
type Cluster struct {
	ID           string     `json:"id"`
	Status       string     `json:"status"`
	StatusReason string     `json:"status_reason"`
	UpdatedTS    time.Time  `json:"updated_ts"`
	NodeCounts   NodeCounts `json:"node_counts"`
	// Budget is the disruption budget in use (docs/architecture.md, "Labels,
	// targets and the disruption budget"); nil when the cluster has none. Filled
	// only by GET /api/v1/clusters/{c}.
	Budget *Budget `json:"budget,omitempty"`
	// Calendar is the cluster's maintenance windows and freezes now
	// (docs/architecture.md, "Windows, freezes and later starts"); nil when
	// it has none. Filled only by GET /api/v1/clusters/{c}.
	Calendar *Calendar `json:"calendar,omitempty"`
	// Members is what the cluster's declared membership says now
	// (docs/architecture.md, "Declared membership"); nil when it declares
	// none.
	Members *Members `json:"members,omitempty"`
	// ReplaceRequests are the nodes that enrolled asking to replace
	// another, waiting for an admin's replace. Filled only by GET
	// /api/v1/clusters/{c}.
	ReplaceRequests []ReplaceRequest `json:"replace_requests,omitempty"`
	// OnAlert is the cluster's on_alert playbook and where it stands; nil
	// when it names none. Filled only by GET /api/v1/clusters/{c}.
	OnAlert *OnAlert `json:"on_alert,omitempty"`
	Nodes   []Node   `json:"nodes,omitempty"`
}

// OnAlert is a cluster's on_alert playbook (expect.on_alert): what it is,
// the digest an approval of it signs now, whether the approval holds, and
// the last alert it handled.
type OnAlert struct {
	Playbook string            `json:"playbook"`
	Version  int               `json:"version,omitempty"`
	Params   map[string]string `json:"params,omitempty"`
	// PlaybookVersion and Digest are what the block resolves to now.
	PlaybookVersion int    `json:"playbook_version,omitempty"`
	Digest          string `json:"digest,omitempty"`
	// Approved: ApprovedBy approved the current digest.
	Approved   bool       `json:"approved"`
	ApprovedBy string     `json:"approved_by,omitempty"`
	ApprovedTS *time.Time `json:"approved_ts,omitempty"`
	// Problem says why it would not start now ("" when it would).
	Problem string `json:"problem,omitempty"`
	// Alerts counts the alerts handled; AlertSince is when the current
	// one began (absent: none now), Missing its missing nodes; RunID the
	// run of the last one and Outcome what became of it.
	Alerts     int        `json:"alerts"`
	AlertSince *time.Time `json:"alert_since,omitempty"`
	Missing    []string   `json:"missing"`
	RunID      string     `json:"run_id,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
}

// ReplaceRequest is a node that enrolled with `replaces: OLD`: an admin
// approves with `muster node replace OLD --with NODE`.
type ReplaceRequest struct {
	NodeID      string    `json:"node_id"`
	Replaces    string    `json:"replaces"`
	Token       string    `json:"token"`
	RequestedTS time.Time `json:"requested_ts"`
}

// Members is a cluster's declared membership against its nodes.
type Members struct {
	// Missing are the declared nodes not there (never seen, or not UP past
	// the grace); for a count, one entry with no id says how many.
	Missing []MissingNode `json:"missing"`
	// Unexpected are the nodes seen that the declaration does not name (or
	// whose labels its selector does not match).
	Unexpected []string `json:"unexpected"`
}

// MissingNode is one missing declared node.
type MissingNode struct {
	ID     string `json:"id,omitempty"`
	Reason string `json:"reason"`
}

// Calendar says when disruptive work may go to a cluster.
type Calendar struct {
	Windows []Window `json:"windows"`
	Freezes []Freeze `json:"freezes"`
	// Open: disruptive work may go now (in a window, or none is set, and
	// no freeze holds).
	Open bool `json:"open"`
	// InWindow: a window is open now, or none is set. CloseAt is when the
	// open windows close; NextOpen, outside them, when one opens next.
	InWindow bool       `json:"in_window"`
	CloseAt  *time.Time `json:"close_at,omitempty"`
	NextOpen *time.Time `json:"next_open,omitempty"`
	// Frozen is the freeze that holds now, if any, and until when.
	Frozen *Freeze `json:"frozen,omitempty"`
	// Waiting counts the actions waiting in PENDING_SCHEDULE for a window,
	// the end of a freeze or their not_before.
	Waiting int `json:"waiting"`
}

// Window is one maintenance window of a cluster.
type Window struct {
	Cron      string `json:"cron"`
	Duration  string `json:"duration"`
	Timezone  string `json:"timezone"`
	DurationS int64  `json:"duration_s"`
}

// Freeze is one freeze of a cluster, from (included) to (excluded). A
// stored freeze (GET /api/v1/freezes) has its id, where it came from and
// its history; a lifted one holds nothing.
type Freeze struct {
	ID        string    `json:"id,omitempty"`
	ClusterID string    `json:"cluster_id,omitempty"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Reason    string    `json:"reason"`
	// Source is "" (the API or the web UI), "config" (core.yaml) or
	// "file:NAME" (muster apply -f NAME).
	Source     string     `json:"source,omitempty"`
	CreatedBy  string     `json:"created_by,omitempty"`
	CreatedTS  *time.Time `json:"created_ts,omitempty"`
	LiftedTS   *time.Time `json:"lifted_ts,omitempty"`
	LiftedBy   string     `json:"lifted_by,omitempty"`
	LiftReason string     `json:"lift_reason,omitempty"`
}

// CreateFreezeRequest is the body of POST /api/v1/clusters/{id}/freezes:
// a freeze from From (now when absent) to Until, for Reason (required).
type CreateFreezeRequest struct {
	From   *time.Time `json:"from,omitempty"`
	Until  time.Time  `json:"until"`
	Reason string     `json:"reason"`
	// Source marks a freeze made by `muster apply -f NAME`: "file:NAME"
	// (empty for one made by hand).
	Source string `json:"source,omitempty"`
}

// LiftFreezeRequest is the body of POST /api/v1/freezes/{id}/lift.
type LiftFreezeRequest struct {
	Reason string `json:"reason"`
}

// Budget is a cluster's disruption budget in use: how many nodes are
// unavailable (DOWN, drained, or holding a NEW or RUNNING disruptive
// action) out of the most allowed.
type Budget struct {
	// MaxUnavailable is the configured limit as written ("1", "10%").
	MaxUnavailable string `json:"max_unavailable"`
	// Max is MaxUnavailable resolved against the cluster's node count.
	Max         int `json:"max"`
	Unavailable int `json:"unavailable"`
	// Nodes names each unavailable node with why.
	Nodes []UnavailableNode `json:"nodes"`
	// Held counts the disruptive actions waiting in PENDING_SCHEDULE for room.
	Held int `json:"held"`
}

// UnavailableNode is one node counted against the budget.
type UnavailableNode struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// ClusterList answers GET /api/v1/clusters.
type ClusterList struct {
	Clusters []Cluster `json:"clusters"`
}

// Node is one agent as the core knows it.
type Node struct {
	ClusterID    string `json:"cluster_id"`
	ID           string `json:"id"`
	Addr         string `json:"addr"`
	Source       string `json:"source"`
	Status       string `json:"status"`
	StatusReason string `json:"status_reason"`
	// Drained: no new pushes go to the node; Status shows DRAINED then,
	// unless the node is DOWN. DrainedBy and DrainReason say who drained it
	// and why.
	Drained     bool     `json:"drained"`
	DrainedBy   string   `json:"drained_by,omitempty"`
	DrainReason string   `json:"drain_reason,omitempty"`
	StoreID     string   `json:"store_id"`
	Kinds       []string `json:"kinds"`
	// ArgsSchemas: the args_schema of each kind that announced one.
	ArgsSchemas map[string]json.RawMessage `json:"args_schemas,omitempty"`
	// ArgsSchemasRefused: why the core refuses the args_schema of a kind
	// (not a schema, or too costly to check args against), by kind; such a
	// kind is unusable on this node until it announces one the core takes.
	ArgsSchemasRefused map[string]string `json:"args_schemas_refused,omitempty"`
	// Secrets are the names of the secrets the node can resolve in args
	// (never their values).
	Secrets     []string   `json:"secrets,omitempty"`
	Version     string     `json:"version"`
	LastContact *time.Time `json:"last_contact"`
	UpdatedTS   time.Time  `json:"updated_ts"`
	// Labels: the configured labels with the agent's own laid over them,
	// then those the core holds for the node (CoreLabels) over both
	// (always an object).
	Labels map[string]string `json:"labels"`
	// CoreLabels are the labels the node took from the node it replaced
	// (muster node replace), held over the agent's own; Replaces is the
	// declared place it took.
	CoreLabels map[string]string `json:"core_labels,omitempty"`
	Replaces   string            `json:"replaces,omitempty"`
	// Revoked: the node's newest certificate is on the revocation list; the
	// core refuses it until the node enrolls again.
	Revoked      bool   `json:"revoked,omitempty"`
	RevokeReason string `json:"revoke_reason,omitempty"`
}

// NodeDrained is the Status shown for a drained node that is not DOWN.
const NodeDrained = "DRAINED"

// ForgetResult answers POST /api/v1/clusters/{c}/nodes/{n}/forget.
type ForgetResult struct {
	ClusterID    string `json:"cluster_id"`
	NodeID       string `json:"node_id"`
	ActionsEnded int    `json:"actions_ended"`
}

// NodeList answers GET /api/v1/nodes.
type NodeList struct {
	Nodes []Node `json:"nodes"`
}

// Accepted answers the calls that only ask for work to happen later (202).
type Accepted struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// Event is one line of the core's audit trail.
type Event struct {
	Seq        int64          `json:"seq"`
	TS         time.Time      `json:"ts"`
	Type       string         `json:"type"`
	Actor      string         `json:"actor"`
	ClientAddr string         `json:"client_addr,omitempty"`
	ClusterID  string         `json:"cluster_id,omitempty"`
	NodeID     string         `json:"node_id,omitempty"`
	ActionID   string         `json:"action_id,omitempty"`
	RunID      string         `json:"run_id,omitempty"`
	Message    string         `json:"message"`
	Data       map[string]any `json:"data,omitempty"`
}

// EventList answers GET /api/v1/events. Next is the since value that reads
// on after this page (the seq of its last event, or the since asked for when
// the page is empty).
type EventList struct {
	Events []Event `json:"events"`
	Next   int64   `json:"next"`
}

// CreateTokenRequest is the body of POST /api/v1/tokens. A join token
// (role enroll) takes a cluster and, optionally, a use count and labels
// (the core holds them for every node it enrolls); any token may take a
// TTL (a Go duration such as 24h).
type CreateTokenRequest struct {
	Name      string            `json:"name"`
	Roles     []string          `json:"roles"`
	TTL       string            `json:"ttl,omitempty"`
	ClusterID string            `json:"cluster_id,omitempty"`
	Uses      *int              `json:"uses,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// TokenSecret answers POST /api/v1/tokens: the only answer that ever carries
// a token's secret.
type TokenSecret struct {
	Name      string            `json:"name"`
	Roles     []string          `json:"roles"`
	Token     string            `json:"token"`
	ExpiresTS *time.Time        `json:"expires_ts,omitempty"`
	ClusterID string            `json:"cluster_id,omitempty"`
	UsesLeft  *int              `json:"uses_left,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// Token is a token as listed: never its secret, nor its hash.
type Token struct {
	Name      string            `json:"name"`
	Roles     []string          `json:"roles"`
	CreatedTS time.Time         `json:"created_ts"`
	ExpiresTS *time.Time        `json:"expires_ts,omitempty"`
	ClusterID string            `json:"cluster_id,omitempty"`
	UsesLeft  *int              `json:"uses_left,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// EnrollRequest is the body of POST /api/v1/enroll, sent with a join token:
// the node's id and cluster and a PEM certificate signing request for it
// (the key stays on the node). Replace asks to enroll a node id that a live
// certificate holds, revoking that certificate; it needs an admin token.
type EnrollRequest struct {
	NodeID    string `json:"node_id"`
	ClusterID string `json:"cluster_id"`
	CSR       string `json:"csr"`
	Replace   bool   `json:"replace,omitempty"`
	// Replaces names a node of the cluster this one asks to replace: the
	// enrollment goes on, the replace waits for an admin's approval
	// (muster node replace OLD --with NODE).
	Replaces string `json:"replaces,omitempty"`
}

// RenewRequest is the body of POST /api/v1/enroll/renew, sent over mutual
// TLS with the agent's current certificate: a new signing request for the
// same node (a new key).
type RenewRequest struct {
	CSR string `json:"csr"`
}

// EnrollResponse answers an enrollment or a renewal: the signed
// certificate, the CA bundle to trust the core with (and to require of its
// client certificate), and the gossip key when the core has one.
type EnrollResponse struct {
	NodeID      string    `json:"node_id"`
	ClusterID   string    `json:"cluster_id"`
	Certificate string    `json:"certificate"`
	CABundle    string    `json:"ca_bundle"`
	GossipKey   string    `json:"gossip_key,omitempty"`
	Serial      string    `json:"serial"`
	NotAfter    time.Time `json:"not_after"`
}

// EnrollCA answers GET /api/v1/enroll/ca: the agent CA bundle and the pin
// of each CA in it.
type EnrollCA struct {
	CABundle string   `json:"ca_bundle"`
	Pins     []string `json:"pins"`
}

// RevokeRequest is the body of POST /api/v1/clusters/{c}/nodes/{n}/revoke.
type RevokeRequest struct {
	Reason string `json:"reason,omitempty"`
}

// RevokeResult answers a revocation: the serials put on the list.
type RevokeResult struct {
	ClusterID string   `json:"cluster_id"`
	NodeID    string   `json:"node_id"`
	Serials   []string `json:"serials"`
}

// ReplaceNodeRequest is the body of POST
// /api/v1/clusters/{c}/nodes/{old}/replace: the node that takes the old
// one's declared place and labels.
type ReplaceNodeRequest struct {
	With string `json:"with"`
}

// ReplaceResult answers a replace: the node replaced (forgotten, its
// actions readable under its id), the node that took its place, the
// declared place it holds (the old node's id, or the place the old node had
// taken itself), the labels it took, how many open actions of the old node
// ended, and the old node's certificates revoked.
type ReplaceResult struct {
	ClusterID    string            `json:"cluster_id"`
	NodeID       string            `json:"node_id"`
	With         string            `json:"with"`
	Place        string            `json:"place"`
	Labels       map[string]string `json:"labels"`
	ActionsEnded int               `json:"actions_ended"`
	Serials      []string          `json:"serials"`
}

// TokenList answers GET /api/v1/tokens.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// CoreReplicas answers GET /api/v1/core/replicas: the core replicas sharing
// the store, their heartbeats and the cluster leases each holds
// (docs/architecture.md, "Several core replicas").
type CoreReplicas struct {
	// Store is the store driver: "sqlite" (one core) or "postgres".
	Store string `json:"store"`
	// Self is the id of the replica that answered.
	Self string `json:"self"`
	// LeaseTTLS is ha.lease_ttl in seconds (0 without leases).
	LeaseTTLS float64       `json:"lease_ttl_s"`
	Replicas  []CoreReplica `json:"replicas"`
	// PolicyDrift says, one line each, where the answering replica's
	// configuration file disagrees with the policy in the store (which it
	// follows); absent when they agree.
	PolicyDrift []string `json:"policy_drift,omitempty"`
}

// CoreReplica is one replica and the leases it holds.
type CoreReplica struct {
	ID          string         `json:"id"`
	Addr        string         `json:"addr"`
	Version     string         `json:"version"`
	StartedTS   time.Time      `json:"started_ts"`
	HeartbeatTS time.Time      `json:"heartbeat_ts"`
	Live        bool           `json:"live"`
	Leases      []ClusterLease `json:"leases"`
}

// ClusterLease is a replica's right to run one cluster's passes.
type ClusterLease struct {
	ClusterID string    `json:"cluster_id"`
	Epoch     int64     `json:"epoch"`
	ExpiresTS time.Time `json:"expires_ts"`
}

// NotifyDestination is one notification destination and how its
// deliveries fare (GET /api/v1/notify). URL shows the scheme and host alone.
type NotifyDestination struct {
	Name          string     `json:"name"`
	URL           string     `json:"url"`
	Format        string     `json:"format"`
	Events        []string   `json:"events"`
	Clusters      []string   `json:"clusters"`
	Backlog       int        `json:"backlog"`
	Dead          int        `json:"dead"`
	OldestPending *time.Time `json:"oldest_pending,omitempty"`
	LastSuccess   *time.Time `json:"last_success,omitempty"`
	LastFailure   *time.Time `json:"last_failure,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
}

// NotifyList answers GET /api/v1/notify.
type NotifyList struct {
	Destinations []NotifyDestination `json:"destinations"`
}

// NotifyDelivery is one delivery of an event to a destination.
type NotifyDelivery struct {
	ID          int64     `json:"id"`
	Destination string    `json:"destination"`
	EventSeq    int64     `json:"event_seq"`
	State       string    `json:"state"`
	Attempts    int       `json:"attempts"`
	CreatedTS   time.Time `json:"created_ts"`
	NextTS      time.Time `json:"next_ts"`
	UpdatedTS   time.Time `json:"updated_ts"`
	LastStatus  int       `json:"last_status"`
	LastError   string    `json:"last_error,omitempty"`
}

// NotifyDeliveries answers GET /api/v1/notify/{name}/deliveries, newest
// first; Next is the before= of the next page (0: none).
type NotifyDeliveries struct {
	Deliveries []NotifyDelivery `json:"deliveries"`
	Next       int64            `json:"next"`
}

// NotifyTestResult answers POST /api/v1/notify/{name}/test.
type NotifyTestResult struct {
	Destination string `json:"destination"`
	OK          bool   `json:"ok"`
	Status      int    `json:"status"`
	Error       string `json:"error,omitempty"`
	TookMS      int64  `json:"took_ms"`
}

// OIDCInfo answers GET /api/v1/auth/oidc: where people sign in (`muster
// login` asks it).
type OIDCInfo struct {
	Issuer   string   `json:"issuer"`
	ClientID string   `json:"client_id"`
	Scopes   []string `json:"scopes"`
	// UsernameClaim and GroupsClaim name the claims of the person.
	UsernameClaim string `json:"username_claim"`
	GroupsClaim   string `json:"groups_claim"`
}

// FreezeList answers GET /api/v1/freezes.
type FreezeList struct {
	Freezes []Freeze `json:"freezes"`
}
