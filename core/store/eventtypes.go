package store

import (
	"fmt"
	"slices"
	"strings"
)

// Events of the core itself: its replicas and its configuration.
const (
	// EventCoreReplicaJoined: a replica started heartbeating in the store.
	EventCoreReplicaJoined = "core.replica_joined"
	// EventCoreReplicaLost: a replica stopped heartbeating for longer than
	// the lease TTL; its leases move to the live replicas.
	EventCoreReplicaLost = "core.replica_lost"
	// EventCoreConfigReloaded: SIGHUP brought a valid configuration; the
	// message says what changed.
	EventCoreConfigReloaded = "core.config_reloaded"
	// EventCoreConfigRejected: SIGHUP brought an invalid configuration; the
	// core kept the one it had, and the message says why.
	EventCoreConfigRejected = "core.config_rejected"
)

// EventPersonSignedIn: a person signed in through single sign-on (the web
// UI); the data holds their groups.
const EventPersonSignedIn = "person.signed_in"

// EventTypes is every event type the core appends, by family: a filter on
// types (the API's ?type=, `muster events --type`) takes these and
// "family.*", and the notification destinations' event globs are checked
// against them. A test keeps it in step with the Event constants.
var EventTypes = []string{
	EventActionCreated, EventActionApproved, EventActionRejected, EventActionExpired,
	EventActionStateChanged, EventActionCancelRequested, EventActionConflict, EventActionLost, EventActionUrgent,
	EventActionApprovalRecorded, EventRunApprovalRecorded, EventScheduleApprovalRecorded,
	EventNodeUp, EventNodeDown, EventNodeJoined, EventNodeLeft, EventNodeDrained, EventNodeUndrained,
	EventNodeForgotten, EventNodeClaimRefused, EventNodeSchemaRefused, EventNodeEnrolled, EventNodeEnrollRefused, EventNodeCertRenewed,
	EventNodeRenewRefused, EventNodeRevoked, EventNodeReplaced, EventNodeReplaceRequested, EventNodeReaped,
	EventClusterAlert, EventClusterHealthy,
	EventOnAlertApproved, EventOnAlertApprovalRecorded, EventOnAlertStarted, EventOnAlertSkipped, EventOnAlertFinished,
	EventTokenCreated, EventTokenRevoked, EventPersonSignedIn,
	EventTeamCreated, EventTeamChanged, EventTeamDeleted, EventGrantCreated, EventGrantRevoked,
	EventFreezeCreated, EventFreezeLifted, EventPolicyCreated, EventPolicyChanged, EventPolicyDeleted,
	EventRunCreated, EventRunApproved, EventRunRejected, EventRunExpired, EventRunStageStarted,
	EventRunStageFinished, EventRunPaused, EventRunResumed, EventRunCancelled, EventRunFinished,
	EventRunNodeUnavailable, EventRunNodeJoined, EventRunPromoted, EventRunUrgent, EventRunAborted, EventRunCoreStep,
	EventPlaybookApplied, EventApprovalWaiting, EventNotifyDead,
	EventScheduleCreated, EventScheduleChanged, EventScheduleApproved, EventScheduleRejected, EventSchedulePaused,
	EventScheduleResumed, EventScheduleDeleted, EventScheduleUnapproved, EventScheduleOccurrence, EventScheduleSkipped,
	EventCoreReplicaJoined, EventCoreReplicaLost, EventCoreConfigReloaded, EventCoreConfigRejected,
	EventCorePolicyDrift, EventCorePolicyUnreadable,
}

// EventTypeFamilies are the families of EventTypes ("action", "node", ...).
func EventTypeFamilies() []string {
	var out []string
	for _, t := range EventTypes {
		f, _, _ := strings.Cut(t, ".")
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// ErrUnknownEventType is a type filter naming no known type or family.
var ErrUnknownEventType = fmt.Errorf("unknown event type")

// ParseEventTypes checks a comma list of event types and families
// ("node.*"); empty items are ignored. It returns the list, or an error
// naming the first unknown item.
func ParseEventTypes(list string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		fam, ok := strings.CutSuffix(t, ".*")
		if !(ok && slices.Contains(EventTypeFamilies(), fam)) && !slices.Contains(EventTypes, t) {
			return nil, fmt.Errorf("%w %q: want a type like node.down or a family like node.*", ErrUnknownEventType, t)
		}
		out = append(out, t)
	}
	return out, nil
}

// MatchEventType reports whether typ is one of types or in one of their
// families; an empty list matches every type.
func MatchEventType(types []string, typ string) bool {
	if len(types) == 0 {
		return true
	}
	for _, t := range types {
		if t == typ {
			return true
		}
		if fam, ok := strings.CutSuffix(t, "*"); ok && strings.HasPrefix(typ, fam) {
			return true
		}
	}
	return false
}
