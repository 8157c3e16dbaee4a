package wire

import "time"

// Team is a team as the API shows it: its listed members and the group
// claims mapped to it.
type Team struct {
	Name      string    `json:"name"`
	Members   []string  `json:"members"`
	Groups    []string  `json:"groups"`
	Source    string    `json:"source,omitempty"`
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedTS time.Time `json:"created_ts"`
}

// TeamList answers GET /api/v1/teams.
type TeamList struct {
	Teams []Team `json:"teams"`
}

// CreateTeamRequest is the body of POST /api/v1/teams.
type CreateTeamRequest struct {
	Name    string   `json:"name"`
	Members []string `json:"members,omitempty"`
	Groups  []string `json:"groups,omitempty"`
}

// TeamMemberRequest is the body of POST /api/v1/teams/{name}/members.
type TeamMemberRequest struct {
	Person string `json:"person"`
}

// TeamGroupRequest is the body of POST /api/v1/teams/{name}/groups: a group
// claim of the identity provider that means membership.
type TeamGroupRequest struct {
	Group string `json:"group"`
}

// Grant is one role on a scope (a cluster glob, or a label selector) for a
// team or a person.
type Grant struct {
	ID        string            `json:"id"`
	Team      string            `json:"team,omitempty"`
	Person    string            `json:"person,omitempty"`
	Role      string            `json:"role"`
	Clusters  string            `json:"clusters,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Source    string            `json:"source,omitempty"`
	CreatedBy string            `json:"created_by,omitempty"`
	CreatedTS time.Time         `json:"created_ts"`
}

// GrantList answers GET /api/v1/grants.
type GrantList struct {
	Grants []Grant `json:"grants"`
}

// CreateGrantRequest is the body of POST /api/v1/grants: a team or a
// person, a role, and clusters (a glob) or labels.
type CreateGrantRequest struct {
	Team     string            `json:"team,omitempty"`
	Person   string            `json:"person,omitempty"`
	Role     string            `json:"role"`
	Clusters string            `json:"clusters,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
}
