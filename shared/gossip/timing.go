package gossip

import (
	"fmt"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/musterhq/muster/shared/config"
)

// Profiles: memberlist's stock timings.
const (
	// ProfileLAN is memberlist.DefaultLANConfig: probe every 1 s, 500 ms
	// probe timeout, suspicion 4 × probe interval (scaled by log10 of the
	// pool size), full state sync every 30 s.
	ProfileLAN = "lan"
	// ProfileLocal is memberlist.DefaultLocalConfig: for a quiet local
	// network; 200 ms probe timeout, suspicion 3 × probe interval, full
	// state sync every 15 s.
	ProfileLocal = "local"
)

// Timing tunes failure detection: a profile, and overrides of its probe
// interval, probe timeout and suspicion multiplier (zero keeps the
// profile's value). A failed member is declared dead after, at best,
// about probe_interval + suspicion_mult × probe_interval × max(1, log10(N)).
type Timing struct {
	Profile       string        `mapstructure:"profile" yaml:"profile"`
	ProbeInterval time.Duration `mapstructure:"probe_interval" yaml:"probe_interval"`
	ProbeTimeout  time.Duration `mapstructure:"probe_timeout" yaml:"probe_timeout"`
	SuspicionMult int           `mapstructure:"suspicion_mult" yaml:"suspicion_mult"`
}

// Validate returns one error per bad field; prefix names the section
// ("gossip").
func (t Timing) Validate(prefix string) config.Errors {
	var errs config.Errors
	switch t.Profile {
	case ProfileLAN, ProfileLocal:
	default:
		errs.Add(prefix+".profile", "%q is not %q or %q", t.Profile, ProfileLAN, ProfileLocal)
	}
	if t.ProbeInterval < 0 {
		errs.Add(prefix+".probe_interval", "negative")
	}
	if t.ProbeTimeout < 0 {
		errs.Add(prefix+".probe_timeout", "negative")
	}
	if t.SuspicionMult < 0 {
		errs.Add(prefix+".suspicion_mult", "negative")
	}
	if len(errs) == 0 {
		c := t.config()
		if c.ProbeTimeout >= c.ProbeInterval {
			errs.Add(prefix+".probe_timeout", "%s must be shorter than the probe interval %s", c.ProbeTimeout, c.ProbeInterval)
		}
	}
	return errs
}

// config returns the memberlist configuration of the profile with the
// overrides applied.
func (t Timing) config() *memberlist.Config {
	var c *memberlist.Config
	if t.Profile == ProfileLocal {
		c = memberlist.DefaultLocalConfig()
	} else {
		c = memberlist.DefaultLANConfig()
	}
	if t.ProbeInterval > 0 {
		c.ProbeInterval = t.ProbeInterval
	}
	if t.ProbeTimeout > 0 {
		c.ProbeTimeout = t.ProbeTimeout
	}
	if t.SuspicionMult > 0 {
		c.SuspicionMult = t.SuspicionMult
	}
	return c
}

// ValidateJoin checks a join list: host:port entries (a host name may
// resolve to several members). key names the setting ("gossip.join").
func ValidateJoin(key string, join []string) config.Errors {
	var errs config.Errors
	for i, j := range join {
		if _, _, err := splitAddr(j); err != nil {
			errs.Add(fmt.Sprintf("%s[%d]", key, i), "%q is not host:port", j)
		}
	}
	return errs
}
