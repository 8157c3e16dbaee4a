// Package store declares how the core persists clusters, nodes, actions, their
// history, events and tokens. The orchestrator and the API see only these
// interfaces; core/store/sqlite (one file, the embedded default) and
// core/store/postgres (shared by several core replicas) implement them, and
// core/store/storetest holds the behaviour both must have.
//
// All work happens inside Read (a consistent snapshot) or Update (one write
// transaction). A change and the events describing it are written by the same
// Update, so the event log never disagrees with the data.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/musterhq/muster/shared/action"
)

// Errors every implementation returns (wrapped), matched with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
	// ErrInvalidQuery is a list query no store can run, such as an unknown
	// sort field.
	ErrInvalidQuery = errors.New("invalid query")
	// ErrUsedUp is a join token with no use left.
	ErrUsedUp = errors.New("no use left")
)

// Store is the core's persistence.
type Store interface {
	// Read runs fn against a consistent snapshot.
	Read(ctx context.Context, fn func(r Reader) error) error
	// Update runs fn in one write transaction: all of it commits, or none.
	// Concurrent Updates behave as if they ran one after the other. An
	// implementation may run fn again after a conflict with another
	// transaction (PostgreSQL's serialization failures), so fn must redo,
	// not accumulate, whatever it keeps outside tx.
	Update(ctx context.Context, fn func(tx Tx) error) error
	// Subscribe returns a channel that receives the sequence number of the
	// newest event after every commit that appended events. The channel is
	// buffered (1) and coalesces: a slow reader sees the latest number. The
	// returned func unsubscribes.
	Subscribe() (<-chan int64, func())
	// RowsWritten counts rows inserted, updated or deleted since Open (for
	// metrics and the idle-pass benchmark).
	RowsWritten() int64
	// SetOutbox makes AppendEvent enqueue notification deliveries (see
	// Outbox); nil enqueues nothing. It may be called at any time (a
	// configuration reload): an Update uses the outbox set when it began.
	SetOutbox(o Outbox)
	Close() error
}

// Reader reads within a Read or an Update.
type Reader interface {
	Clusters(ctx context.Context) ([]Cluster, error)
	Cluster(ctx context.Context, id string) (*Cluster, error)
	// Nodes lists the nodes of a cluster, or of every cluster when clusterID is "".
	Nodes(ctx context.Context, clusterID string) ([]Node, error)
	Node(ctx context.Context, clusterID, nodeID string) (*Node, error)
	// DownNodes names the DOWN nodes of a cluster, sorted, without reading
	// them whole.
	DownNodes(ctx context.Context, clusterID string) ([]string, error)

	// Action returns the action with exactly this id (ErrNotFound otherwise).
	Action(ctx context.Context, id string) (*Record, error)
	// ActionIDsWithPrefix returns up to max ids that start with prefix.
	ActionIDsWithPrefix(ctx context.Context, prefix string, max int) ([]string, error)
	ListActions(ctx context.Context, q ListQuery) ([]Record, error)
	History(ctx context.Context, actionID string) ([]action.Transition, error)
	// OpenActions lists the non-final actions of one node, or of every node
	// of the cluster when nodeID is "", oldest creation first (created_ts,
	// then insertion order).
	OpenActions(ctx context.Context, clusterID, nodeID string) ([]Record, error)
	// ApprovalsBefore lists PENDING_APPROVE actions created before t.
	ApprovalsBefore(ctx context.Context, t time.Time) ([]Record, error)
	// ScheduledBefore lists PENDING_SCHEDULE actions scheduled before t.
	ScheduledBefore(ctx context.Context, t time.Time) ([]Record, error)

	Events(ctx context.Context, since int64, limit int) ([]Event, error)
	// LatestSeq returns the sequence number of the newest event (0 when
	// there is none), by one indexed read.
	LatestSeq(ctx context.Context) (int64, error)

	Tokens(ctx context.Context) ([]Token, error)
	TokenByHash(ctx context.Context, hash string) (*Token, error)

	// AgentCerts lists the agent certificates the core signed for a node
	// (of any cluster when clusterID is ""; of every node when nodeID is
	// "" too), newest issue first.
	AgentCerts(ctx context.Context, clusterID, nodeID string) ([]AgentCert, error)
	// AgentCert returns the certificate with this serial (ErrNotFound
	// otherwise).
	AgentCert(ctx context.Context, serial string) (*AgentCert, error)
	// RevokedSerials lists the serials of every revoked agent certificate:
	// the revocation list.
	RevokedSerials(ctx context.Context) ([]string, error)

	// Session returns the web UI session whose id hashes to hash
	// (ErrNotFound otherwise), expired or not.
	Session(ctx context.Context, hash string) (*Session, error)
	// SessionCount counts the sessions held, expired ones included.
	SessionCount(ctx context.Context) (int, error)
	// Person returns the person of this name, ignoring case (ErrNotFound
	// when they never signed in).
	Person(ctx context.Context, name string) (*Person, error)

	// Run returns the run with exactly this id (ErrNotFound otherwise).
	Run(ctx context.Context, id string) (*Run, error)
	// RunLocks lists the locks run runID holds, by key.
	RunLocks(ctx context.Context, runID string) ([]RunLock, error)
	// RunLock returns who holds lock key (ErrNotFound when nobody does).
	RunLock(ctx context.Context, key string) (RunLock, error)
	// RunIDsWithPrefix returns up to max run ids that start with prefix.
	RunIDsWithPrefix(ctx context.Context, prefix string, max int) ([]string, error)
	// ListRuns lists runs, newest first (oldest first with q.Oldest), then
	// by id; with q.Brief, brief runs (Run.Brief).
	ListRuns(ctx context.Context, q RunQuery) ([]Run, error)
	// RunsInState lists the runs of a cluster (every cluster when "") in
	// one of states, oldest first.
	RunsInState(ctx context.Context, clusterID string, states ...string) ([]Run, error)
	// RunsInStateBrief is RunsInState with only each run's RunHead: what
	// a loop picking the runs to move on reads every tick, without their
	// stages.
	RunsInStateBrief(ctx context.Context, clusterID string, states ...string) ([]RunHead, error)
	// RunChildren lists the child actions of a run, oldest first.
	RunChildren(ctx context.Context, runID string) ([]Record, error)
	// RunChildrenBrief is RunChildren with only what deciding a run's next
	// step needs: each child's ID, ClusterID, NodeID, RunID, Stage, Step,
	// Attempt, State, StateReason, ApprovedBy, FinishedTS, PushedStoreID
	// and Outputs; the other fields are left zero, unread.
	RunChildrenBrief(ctx context.Context, runID string) ([]Record, error)
	// RunChildCounts counts the children of the given runs (CountChildren
	// of their RunChildren, without reading them), ordered by run, stage,
	// state, approver and reason. It reads counters kept with the children,
	// so its cost grows with the runs asked for, not with their children.
	RunChildCounts(ctx context.Context, runIDs []string) ([]ChildCount, error)
	// RunStartedNodes counts, per stage, the nodes of run runID that have
	// a child (a stage with none is absent). It counts in the run's child
	// index: it reads no child.
	RunStartedNodes(ctx context.Context, runID string) (map[string]int, error)

	// Playbook returns one version of a playbook, the newest when version
	// is 0 (ErrNotFound when there is none).
	Playbook(ctx context.Context, name string, version int) (*Playbook, error)
	// Playbooks lists the newest version of every playbook, by name.
	Playbooks(ctx context.Context) ([]Playbook, error)
	// PlaybookVersions lists every version of one playbook, oldest first.
	PlaybookVersions(ctx context.Context, name string) ([]Playbook, error)

	// Schedule returns the schedule with this name (ErrNotFound otherwise).
	Schedule(ctx context.Context, name string) (*Schedule, error)
	// Schedules lists every schedule, by name.
	Schedules(ctx context.Context) ([]Schedule, error)
	// ScheduleRuns lists up to limit runs of a schedule (by its id), newest
	// first, brief (RunQuery.Brief).
	ScheduleRuns(ctx context.Context, scheduleID string, limit int) ([]Run, error)

	// Teams lists every team with its members and groups, by name.
	Teams(ctx context.Context) ([]Team, error)
	// Team returns one team (ErrNotFound otherwise).
	Team(ctx context.Context, name string) (*Team, error)
	// TeamsOf lists the teams person belongs to (ignoring case), by
	// membership or by a group of groups mapped to the team, sorted.
	TeamsOf(ctx context.Context, person string, groups []string) ([]string, error)
	// TeamMembers lists a team's members: the listed ones and the people
	// whose last groups include one mapped to the team, lowercase, sorted
	// (ErrNotFound when there is no such team).
	TeamMembers(ctx context.Context, team string) ([]string, error)
	// People lists the people seen at sign-in, by name.
	People(ctx context.Context) ([]Person, error)
	// Grants lists every grant, oldest first.
	Grants(ctx context.Context) ([]Grant, error)
	// GrantsOf lists the grants of a person (ignoring case) and of teams.
	GrantsOf(ctx context.Context, person string, teams []string) ([]Grant, error)
	// Grant returns one grant (ErrNotFound otherwise).
	Grant(ctx context.Context, id string) (*Grant, error)
	// Approvals lists the approvals recorded for a subject (kind one of
	// the Subject constants), void ones included, oldest first.
	Approvals(ctx context.Context, kind, id string) ([]Approval, error)

	// Freezes lists the stored freezes q selects, by start, then id.
	Freezes(ctx context.Context, q FreezeQuery) ([]Freeze, error)
	// Freeze returns one freeze (ErrNotFound otherwise).
	Freeze(ctx context.Context, id string) (*Freeze, error)
	// Policies lists the policy records q selects, by kind, then id.
	Policies(ctx context.Context, q PolicyQuery) ([]PolicyRecord, error)
	// Policy returns one policy record, deleted or not (ErrNotFound
	// otherwise).
	Policy(ctx context.Context, kind, id string) (*PolicyRecord, error)
	// PolicyHistory lists every change of one policy record, oldest first.
	PolicyHistory(ctx context.Context, kind, id string) ([]PolicyChange, error)
	// ReplaceRequests lists the cluster's pending replace requests, by
	// node.
	ReplaceRequests(ctx context.Context, clusterID string) ([]ReplaceRequest, error)
	// OnAlert returns the state of the cluster's on_alert playbook
	// (ErrNotFound when it has none yet).
	OnAlert(ctx context.Context, clusterID string) (*OnAlert, error)

	OutboxReader
}

// Tx writes within an Update.
type Tx interface {
	Reader
	PutCluster(ctx context.Context, c *Cluster) error
	PutNode(ctx context.Context, n *Node) error
	DeleteNode(ctx context.Context, clusterID, nodeID string) error
	// InsertAction stores a new record (ErrExists when the id is taken).
	InsertAction(ctx context.Context, r *Record) error
	// UpdateAction replaces the stored record with the same id.
	UpdateAction(ctx context.Context, r *Record) error
	AppendHistory(ctx context.Context, actionID string, t action.Transition) error
	// AppendEvent stores e, setting e.Seq and (when zero) e.TS.
	AppendEvent(ctx context.Context, e *Event) error
	// PurgeActions deletes up to limit finished actions (DONE, FAILED,
	// CANCELLED, LOST) last changed before t, oldest first, with their
	// history, and returns how many it deleted. The children of runs still
	// open stay: a run that lost them would create them again.
	PurgeActions(ctx context.Context, before time.Time, limit int) (int, error)
	// PurgeEvents deletes up to limit events older than t, oldest first,
	// and returns how many it deleted. Sequence numbers are never reused.
	// PurgeRuns deletes up to limit runs finished before t, oldest
	// first, with their children, and the playbook versions no run or
	// schedule refers to any more (each playbook's newest kept).
	PurgeRuns(ctx context.Context, before time.Time, limit int) (int, error)
	PurgeEvents(ctx context.Context, before time.Time, limit int) (int, error)
	// InsertToken stores a new token (ErrExists when the hash is taken, or
	// the name is, ignoring case: alice and Alice are one name).
	InsertToken(ctx context.Context, t *Token) error
	// DeleteToken removes a token (ErrNotFound when there is none by
	// that name) and, in the same transaction, its web UI sessions: a
	// revoked token signs nobody in, on any replica, after any restart.
	DeleteToken(ctx context.Context, name string) error
	// UseToken takes one use of the token whose secret hashes to hash and
	// returns the uses left, in the caller's transaction: two concurrent
	// enrollments cannot both take the last use. A token without a use
	// count returns -1 and is not changed. ErrNotFound: no such token;
	// ErrUsedUp: no use left.
	UseToken(ctx context.Context, hash string) (int, error)
	// InsertAgentCert records a signed agent certificate (ErrExists when the
	// serial is taken).
	InsertAgentCert(ctx context.Context, c *AgentCert) error
	// PruneAgentCerts deletes the certificates of a node (of any cluster)
	// that expired before t, and returns how many: an expired certificate
	// fails every handshake, so neither the list nor the node needs it.
	PruneAgentCerts(ctx context.Context, nodeID string, before time.Time) (int, error)
	// RevokeAgentCerts marks every unrevoked certificate of a node (of any
	// cluster when clusterID is "") revoked at at, and returns their
	// serials (none: an empty list, no error). A certificate retired for a
	// time after at (RetireAgentCert) is revoked at at too.
	RevokeAgentCerts(ctx context.Context, clusterID, nodeID string, at time.Time, reason, by string) ([]string, error)
	// RetireAgentCert marks the unrevoked certificate serial revoked from
	// at (which may be later than now: a grace) and reports whether it did;
	// false when it is revoked or retired already, or unknown. The check
	// and the mark are one statement: of two transactions retiring one
	// certificate, one wins.
	RetireAgentCert(ctx context.Context, serial string, at time.Time, reason, by string) (bool, error)
	// InsertApproval records an approval (ErrExists when that person
	// approved that digest of the subject already, names ignoring case); a
	// zero DecidedTS is set to now.
	InsertApproval(ctx context.Context, a *Approval) error
	// InsertSession stores a new web UI session (ErrExists when the hash
	// is taken).
	InsertSession(ctx context.Context, s *Session) error
	// DeleteSession removes a session; one that is not there is no error.
	DeleteSession(ctx context.Context, hash string) error
	// DeleteSessionsBefore removes the sessions that expire at or before t
	// and returns how many it removed.
	DeleteSessionsBefore(ctx context.Context, t time.Time) (int, error)
	// TrimSessions removes the sessions of the token with hash tokenHash
	// but its keep newest (by created_ts) and returns how many it removed.
	TrimSessions(ctx context.Context, tokenHash string, keep int) (int, error)
	// InsertRun stores a new run (ErrExists when the id is taken).
	InsertRun(ctx context.Context, r *Run) error
	// UpdateRun replaces the stored run with the same id.
	UpdateRun(ctx context.Context, r *Run) error
	// TakeRunLock takes lock key for run runID (and its stage, "" for
	// the run itself) at t when nobody holds it, and returns who holds it
	// then: of two transactions taking one free lock, one holds it.
	TakeRunLock(ctx context.Context, key, runID, stage string, t time.Time) (RunLock, error)
	// ReleaseRunLock releases lock key when run runID holds it and
	// reports whether it did.
	ReleaseRunLock(ctx context.Context, key, runID string) (bool, error)
	// ReleaseRunLocks releases every lock run runID holds and returns how
	// many.
	ReleaseRunLocks(ctx context.Context, runID string) (int, error)
	// InsertPlaybook stores a new version (ErrExists when it is taken).
	InsertPlaybook(ctx context.Context, p *Playbook) error
	// InsertSchedule stores a new schedule (ErrExists when its name or id
	// is taken).
	InsertSchedule(ctx context.Context, s *Schedule) error
	// UpdateSchedule replaces the stored schedule with the same id
	// (ErrNotFound when there is none).
	UpdateSchedule(ctx context.Context, s *Schedule) error
	// DeleteSchedule removes a schedule by name (ErrNotFound when there is
	// none); its runs stay.
	DeleteSchedule(ctx context.Context, name string) error

	// PutClusterLabels sets a cluster's labels, making the cluster when
	// there is none.
	PutClusterLabels(ctx context.Context, id string, labels map[string]string) error
	// InsertTeam stores a new team with its members and groups (ErrExists
	// when the name is taken).
	InsertTeam(ctx context.Context, t *Team) error
	// DeleteTeam removes a team with its members, groups and grants
	// (ErrNotFound when there is none).
	DeleteTeam(ctx context.Context, name string) error
	// AddTeamMember, RemoveTeamMember, AddTeamGroup and RemoveTeamGroup
	// change one member or mapped group of a team and report whether
	// anything changed (ErrNotFound when there is no such team).
	AddTeamMember(ctx context.Context, team, person string) (bool, error)
	RemoveTeamMember(ctx context.Context, team, person string) (bool, error)
	AddTeamGroup(ctx context.Context, team, group string) (bool, error)
	RemoveTeamGroup(ctx context.Context, team, group string) (bool, error)
	// InsertGrant stores a new grant (ErrExists when the id is taken).
	InsertGrant(ctx context.Context, g *Grant) error
	// DeleteGrant removes a grant (ErrNotFound when there is none).
	DeleteGrant(ctx context.Context, id string) error
	// UpsertPerson records a person's source, groups and last sign-in.
	UpsertPerson(ctx context.Context, p *Person) error
	// InsertFreeze stores a new freeze (ErrExists when the id is taken).
	InsertFreeze(ctx context.Context, f *Freeze) error
	// LiftFreeze marks a freeze lifted at at by by for reason and reports
	// whether it did (false: lifted already; ErrNotFound: no such freeze).
	LiftFreeze(ctx context.Context, id string, at time.Time, by, reason string) (bool, error)
	// PutPolicy stores a policy record's next version with a row of
	// history and returns PolicyOpCreated or PolicyOpChanged.
	PutPolicy(ctx context.Context, p *PolicyRecord) (string, error)
	// DeletePolicy marks a policy record deleted with a row of history and
	// reports whether it did (false: deleted already; ErrNotFound: none).
	DeletePolicy(ctx context.Context, kind, id string, at time.Time, by, reason string) (bool, error)
	// PutReplaceRequest stores a node's request to replace another, over
	// its earlier one.
	PutReplaceRequest(ctx context.Context, q *ReplaceRequest) error
	// DeleteReplaceRequest removes a node's request and returns the node
	// it asked to replace ("" when there was none).
	DeleteReplaceRequest(ctx context.Context, clusterID, nodeID string) (string, error)
	// PutOnAlert stores the state of a cluster's on_alert playbook over
	// its earlier one.
	PutOnAlert(ctx context.Context, a *OnAlert) error

	OutboxTx
}

// Record is an action as the core keeps it: the shared record and the
// core-only bookkeeping beside it.
type Record struct {
	action.Action
	// ApprovalDigest is approval.Digest of the content that was approved.
	ApprovalDigest string
	// CancelRequested is set by a cancel call until the agent confirms a final state.
	CancelRequested bool
	// SeenOnAgent is set once the core has seen the agent hold the action in a
	// non-final state; only such an action can become LOST.
	SeenOnAgent bool
	// PushedStoreID is the store_id of the agent database a push was last
	// attempted to, written before the push is sent. Empty: never pushed.
	PushedStoreID string
}

// Cluster status values.
const (
	ClusterHealthy = "HEALTHY"
	ClusterAlert   = "ALERT"
)

// Cluster is a named set of nodes.
type Cluster struct {
	ID           string    `json:"id"`
	Status       string    `json:"status"`
	StatusReason string    `json:"status_reason"`
	UpdatedTS    time.Time `json:"updated_ts"`
	// Labels are the cluster's labels from the configuration: grants'
	// label selectors match them (PutClusterLabels sets them; PutCluster
	// leaves them).
	Labels map[string]string `json:"labels,omitempty"`
}

// Node status values.
const (
	NodeUp      = "UP"
	NodeDown    = "DOWN"
	NodeUnknown = "UNKNOWN"
)

// Node sources.
const (
	SourceStatic = "static"
	SourceGossip = "gossip"
)

// Causes of a node held DOWN by discovery (Node.DownCause): the gossip pool
// saw it leave or fail, or saw two agents announce it. The orchestrator does
// not contact such a node; discovery brings it back when the pool sees it
// again.
const (
	CauseLeft      = "left"
	CauseFailed    = "failed"
	CauseDuplicate = "duplicate"
	// CauseRevoked: the node's certificate is on the revocation list
	// (core/enroll); its gossip claims are refused until it enrolls again.
	CauseRevoked = "revoked"
)

// Reasons shown to people for each cause (Node.StatusReason).
const (
	ReasonLeft      = "left"
	ReasonFailed    = "failed"
	ReasonDuplicate = "announced from two addresses"
	ReasonRevoked   = "certificate revoked"
)

// CauseReason is the text shown to people for a discovery cause.
func CauseReason(cause string) string {
	switch cause {
	case CauseLeft:
		return ReasonLeft
	case CauseFailed:
		return ReasonFailed
	case CauseDuplicate:
		return ReasonDuplicate
	case CauseRevoked:
		return ReasonRevoked
	}
	return cause
}

// DownByDiscovery reports whether discovery holds n DOWN. It reads the
// stored cause, never the text of the reason.
func DownByDiscovery(n *Node) bool {
	return n.Status == NodeDown && n.DownCause != ""
}

// Node is one agent as the core knows it.
type Node struct {
	ClusterID    string `json:"cluster_id"`
	ID           string `json:"id"`
	Addr         string `json:"addr"`
	Source       string `json:"source"`
	Status       string `json:"status"`
	StatusReason string `json:"status_reason"`
	// DownCause is set by discovery while it holds the node DOWN (CauseLeft,
	// CauseFailed, CauseDuplicate), and empty otherwise. StatusReason is
	// the text for people.
	DownCause string `json:"down_cause,omitempty"`
	// Drained: the node gets no new pushes; what it holds finishes.
	// DrainedBy and DrainReason say who drained it and why ("" when not
	// drained).
	Drained     bool     `json:"drained"`
	DrainedBy   string   `json:"drained_by,omitempty"`
	DrainReason string   `json:"drain_reason,omitempty"`
	StoreID     string   `json:"store_id"`
	Cursor      int64    `json:"cursor"`
	Kinds       []string `json:"kinds"`
	// ArgsSchemas are the args_schema the node announced, by kind (nil when
	// none). They are kept in the kinds column (KindsColumn).
	ArgsSchemas map[string]json.RawMessage `json:"args_schemas,omitempty"`
	// Secrets are the names of the secrets the node announced it can
	// resolve in args (nil when none), sorted; kept in the kinds column
	// too.
	Secrets []string `json:"secrets,omitempty"`
	// Labels are the static labels of the configuration with the agent's
	// own laid over them, then CoreLabels over both, key by key (nil when
	// there are none).
	Labels map[string]string `json:"labels"`
	// CoreLabels are labels the core holds for the node over the agent's
	// own (those of the node it replaced); nil when none.
	CoreLabels map[string]string `json:"core_labels,omitempty"`
	// Replaces is the declared place the node took by a replace (the id
	// of the node it replaced, or of the one that one replaced); "" when
	// none.
	Replaces    string     `json:"replaces,omitempty"`
	Version     string     `json:"version"`
	LastContact *time.Time `json:"last_contact"`
	UpdatedTS   time.Time  `json:"updated_ts"`
}

// KindsColumn is how a store keeps a node's kinds with their args schemas,
// and the names of its secrets, in the one kinds column both stores have:
// an entry per kind, "KIND" or "KIND SCHEMA" (a kind never holds a space;
// the schema is canonical JSON), then an entry per secret, "secret:NAME"
// (a kind never holds a colon).
func KindsColumn(kinds []string, schemas map[string]json.RawMessage, secrets []string) []string {
	out := make([]string, len(kinds), len(kinds)+len(secrets))
	for i, k := range kinds {
		out[i] = k
		if s, ok := schemas[k]; ok && len(s) > 0 {
			out[i] = k + " " + string(s)
		}
	}
	for _, s := range secrets {
		out = append(out, secretEntry+s)
	}
	return out
}

// secretEntry starts the entry of a secret's name in the kinds column.
const secretEntry = "secret:"

// FromKindsColumn reads what KindsColumn wrote (and the plain kinds of
// earlier releases).
func FromKindsColumn(entries []string) ([]string, map[string]json.RawMessage, []string) {
	if len(entries) == 0 {
		return nil, nil, nil
	}
	kinds := make([]string, 0, len(entries))
	var schemas map[string]json.RawMessage
	var secrets []string
	for _, e := range entries {
		if name, ok := strings.CutPrefix(e, secretEntry); ok {
			secrets = append(secrets, name)
			continue
		}
		k, s, ok := strings.Cut(e, " ")
		kinds = append(kinds, k)
		if ok {
			if schemas == nil {
				schemas = map[string]json.RawMessage{}
			}
			schemas[k] = json.RawMessage(s)
		}
	}
	if len(kinds) == 0 {
		kinds = nil
	}
	return kinds, schemas, secrets
}

// ListQuery selects and orders actions. Empty fields do not filter.
type ListQuery struct {
	ClusterID string
	// ClusterIn, when not nil, keeps the actions of these clusters only
	// (none when empty): the clusters a caller may read.
	ClusterIn []string
	NodeID    string
	// RunID selects the child actions of one run.
	RunID string
	// NodeIDs, when set, selects the actions of these nodes (a page of a
	// run's nodes: with RunID, read through the run's child index).
	NodeIDs []string
	States  []action.State
	Kinds   []string
	// Sort keys in order; the id is always the last tie-breaker.
	Sort []SortKey
	// Marker is the id of the last action of the previous page.
	Marker string
	Limit  int
}

// SortKey is one column of an ORDER BY.
type SortKey struct {
	Field string // one of SortFields
	Desc  bool
}

// SortFields are the fields an action list may be sorted by. Each is also
// the column's name in both stores.
var SortFields = []string{"created_ts", "updated_ts", "id", "state", "kind", "node_id", "cluster_id"}

// DefaultSort is the order of a list query without sort keys: oldest first.
var DefaultSort = []SortKey{{Field: "created_ts"}}

// SortKeys validates keys (ErrInvalidQuery) and returns the full order: the
// default when keys is empty, and the id appended as the last tie-breaker
// (ascending) unless it is already there.
func SortKeys(keys []SortKey) ([]SortKey, error) {
	if len(keys) == 0 {
		keys = DefaultSort
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if !slices.Contains(SortFields, k.Field) {
			return nil, fmt.Errorf("%w: cannot sort by %q (want one of %s)", ErrInvalidQuery, k.Field, strings.Join(SortFields, ", "))
		}
		if seen[k.Field] {
			return nil, fmt.Errorf("%w: sort field %q given twice", ErrInvalidQuery, k.Field)
		}
		seen[k.Field] = true
	}
	out := make([]SortKey, 0, len(keys)+1)
	for _, k := range keys {
		out = append(out, k)
		if k.Field == "id" { // unique: any further key can never decide
			return out, nil
		}
	}
	return append(out, SortKey{Field: "id"}), nil
}

// Event types (docs/architecture.md, "The core").
const (
	EventActionCreated  = "action.created"
	EventActionApproved = "action.approved"
	// EventActionApprovalRecorded: one approval of several levels
	// took; the message says what is still missing.
	EventActionApprovalRecorded = "action.approval_recorded"
	EventActionRejected         = "action.rejected"
	EventActionExpired          = "action.expired"
	EventActionStateChanged     = "action.state_changed"
	EventActionCancelRequested  = "action.cancel_requested"
	EventActionConflict         = "action.conflict"
	EventActionLost             = "action.lost"
	// EventActionUrgent: an approver marked an action urgent, with a reason:
	// it passes a closed maintenance window, never a freeze.
	EventActionUrgent  = "action.urgent"
	EventNodeUp        = "node.up"
	EventNodeDown      = "node.down"
	EventNodeJoined    = "node.joined"
	EventNodeLeft      = "node.left"
	EventNodeDrained   = "node.drained"
	EventNodeUndrained = "node.undrained"
	EventNodeForgotten = "node.forgotten"
	// EventNodeReplaced: a person replaced a node with another, which took
	// its declared place and labels (muster node replace).
	EventNodeReplaced = "node.replaced"
	// EventNodeReaped: the core forgot a node not declared by its cluster,
	// DOWN for longer than orchestrate.reap_after.
	EventNodeReaped     = "node.reaped"
	EventClusterAlert   = "cluster.alert"
	EventClusterHealthy = "cluster.healthy"
	EventTokenCreated   = "token.created"
	EventTokenRevoked   = "token.revoked"
)

// EventNodeClaimRefused: a gossip member announced a node at an address
// whose agent failed to prove it is that node (agents_tls). The node is
// not changed by it.
const EventNodeClaimRefused = "node.claim_refused"

// EventNodeSchemaRefused: a node announced an args_schema the core refuses
// (not a schema, or too costly to check args against); that kind is
// unusable on the node until it announces one the core takes. Appended when
// the node's announced schemas change, with the reason by kind.
const EventNodeSchemaRefused = "node.args_schema_refused"

// ActorCore is the core as the actor of what it decides itself, in events
// and history lines: the one spelling (core/actions names it
// actions.ActorCore too).
const ActorCore = "core"

// Event is one line of the audit trail.
type Event struct {
	Seq        int64     `json:"seq"`
	TS         time.Time `json:"ts"`
	Type       string    `json:"type"`
	Actor      string    `json:"actor"`
	ClientAddr string    `json:"client_addr,omitempty"`
	ClusterID  string    `json:"cluster_id,omitempty"`
	NodeID     string    `json:"node_id,omitempty"`
	ActionID   string    `json:"action_id,omitempty"`
	RunID      string    `json:"run_id,omitempty"`
	Message    string    `json:"message"`
	// Data is extra detail as a JSON object (for a conflict: the old kind and args).
	Data map[string]any `json:"data,omitempty"`
}

// Roles a token may hold.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
	RoleApprover = "approver"
	RoleAdmin    = "admin"
	// RoleEnroll may only enroll agents (core/enroll).
	RoleEnroll = "enroll"
)

// Session is a web UI sign-in (core/ui). Only the hash of its id is stored,
// and the token it signed in with is named by the token's hash, so that a
// revoked token's sessions stop working at once.
type Session struct {
	Hash string
	// TokenHash names the token of a token's session; a person's session
	// (single sign-on) holds PersonSessionKey(Person) instead, so that the
	// sessions of one person are counted together.
	TokenHash string
	// CSRF is the synchronizer token the session's forms carry.
	CSRF      string
	CreatedTS time.Time
	ExpiresTS time.Time
	// Person is the person of a single sign-on session ("" for a token's),
	// Groups the group claims of their ID token and IDExpiresTS its expiry:
	// the session ends then at the latest.
	Person      string
	Groups      []string
	IDExpiresTS *time.Time
}

// PersonSessionKey is the TokenHash of a person's sessions: never a
// token's hash (those are hexadecimal).
func PersonSessionKey(person string) string { return "person:" + strings.ToLower(person) }

// Token is an API identity. Only a hash of the secret is stored.
type Token struct {
	Name      string    `json:"name"`
	Roles     []string  `json:"roles"`
	Hash      string    `json:"-"`
	CreatedTS time.Time `json:"created_ts"`
	// ExpiresTS, when set, ends the token (a join token's TTL).
	ExpiresTS *time.Time `json:"expires_ts,omitempty"`
	// ClusterID scopes a join token to one cluster ("" for other tokens).
	ClusterID string `json:"cluster_id,omitempty"`
	// UsesLeft counts the enrollments a join token still allows (nil:
	// no count).
	UsesLeft *int `json:"uses_left,omitempty"`
	// Labels, on a join token, are the labels the core holds for each
	// node enrolled with it (Node.CoreLabels, under any other the core
	// holds for it); nil for other tokens.
	Labels map[string]string `json:"labels,omitempty"`
}

// Expired reports whether the token has expired at now.
func (t *Token) Expired(now time.Time) bool {
	return t.ExpiresTS != nil && !now.Before(*t.ExpiresTS)
}

// Events of enrollment (core/enroll).
const (
	EventNodeEnrolled      = "node.enrolled"
	EventNodeEnrollRefused = "node.enroll_refused"
	EventNodeCertRenewed   = "node.cert_renewed"
	EventNodeRenewRefused  = "node.renew_refused"
	EventNodeRevoked       = "node.revoked"
)

// AgentCert is an agent certificate the core signed with its agent CA.
type AgentCert struct {
	// Serial is the certificate's serial number in lowercase hex.
	Serial    string    `json:"serial"`
	ClusterID string    `json:"cluster_id"`
	NodeID    string    `json:"node_id"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
	IssuedTS  time.Time `json:"issued_ts"`
	// IssuedBy names the join token, or "renewal".
	IssuedBy     string     `json:"issued_by"`
	RevokedTS    *time.Time `json:"revoked_ts,omitempty"`
	RevokeReason string     `json:"revoke_reason,omitempty"`
	RevokedBy    string     `json:"revoked_by,omitempty"`
	// Labels are those of the join token that enrolled the node (a
	// renewal keeps them): the core holds them for the node.
	Labels map[string]string `json:"labels,omitempty"`
}

// EnrolledLabels returns the labels the node's newest certificate of
// cluster clusterID among certs (newest first, as AgentCerts lists them)
// was issued with: those of the join token that last enrolled it, which
// the core holds for the node (nil when none).
func EnrolledLabels(certs []AgentCert, clusterID string) map[string]string {
	for _, c := range certs {
		if c.ClusterID == clusterID {
			return c.Labels
		}
	}
	return nil
}

// Live reports whether the certificate is unrevoked and unexpired at now.
func (c *AgentCert) Live(now time.Time) bool {
	return c.RevokedTS == nil && now.Before(c.NotAfter)
}

// Follow keeps something derived from the store current (the revocation
// list, the freezes): it calls load, then again whenever the event log (of
// this replica or, on PostgreSQL, of another) shows an event of one of
// types, until ctx ends. Other commits cost one read of their events; when
// that read fails, load is called anyway, since an event not read may have
// been one of types. Until a first load succeeds, each commit tries again.
// failed is told every error (loaded: whether a load succeeded before, so
// that the last one stays).
func Follow(ctx context.Context, st Store, types []string, load func(ctx context.Context) error, failed func(err error, loaded bool)) {
	ch, unsubscribe := st.Subscribe()
	defer unsubscribe()
	var since int64
	for {
		err := st.Read(ctx, func(r Reader) error {
			var err error
			since, err = r.LatestSeq(ctx)
			return err
		})
		if err == nil {
			err = load(ctx)
		}
		if err == nil {
			break
		}
		if ctx.Err() == nil {
			failed(err, false)
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
		found := false
		next, err := EachEvent(ctx, st, since, 256, func(e *Event) error {
			found = found || slices.Contains(types, e.Type)
			return nil
		})
		since = next
		if found || err != nil {
			err = errors.Join(err, load(ctx))
		}
		if err != nil && ctx.Err() == nil {
			failed(err, true)
		}
	}
}

// EachEvent calls fn for every event after since, oldest first, reading
// batch events at a time, each batch in a read of its own (so a long stream
// holds no snapshot open while fn writes to a slow client). It returns the
// seq of the last event read, which is where a caller goes on from after an
// error too.
func EachEvent(ctx context.Context, st Store, since int64, batch int, fn func(e *Event) error) (int64, error) {
	for {
		var evs []Event
		if err := st.Read(ctx, func(r Reader) error {
			var err error
			evs, err = r.Events(ctx, since, batch)
			return err
		}); err != nil {
			return since, err
		}
		for i := range evs {
			since = evs[i].Seq
			if err := fn(&evs[i]); err != nil {
				return since, err
			}
		}
		if len(evs) < batch {
			return since, nil
		}
	}
}
