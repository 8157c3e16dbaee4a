package main

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"gopkg.in/yaml.v3"
)

// loadConfig fills out (a pointer to a struct already holding the defaults)
// from, in increasing priority: the defaults, the YAML file named by --config,
// MUSTER_* environment variables (MUSTER_API_ADDR for api.addr), and the flags
// bound in flagKeys (flag name → config key) that the user set. Unknown keys in
// the file are errors.
func loadConfig(cmd *cobra.Command, out any, flagKeys map[string]string) error {
	v := viper.New()
	v.SetConfigType("yaml")
	// The defaults go in first as a YAML document, so that every key is known to
	// viper and can be overridden from the environment.
	def, err := yaml.Marshal(out)
	if err != nil {
		return fmt.Errorf("encode defaults: %w", err)
	}
	if err := v.ReadConfig(bytes.NewReader(def)); err != nil {
		return fmt.Errorf("load defaults: %w", err)
	}
	if f := cmd.Flags().Lookup("config"); f != nil && f.Value.String() != "" {
		v.SetConfigFile(f.Value.String())
		if err := v.MergeInConfig(); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("config %s: %w", f.Value.String(), err)}
		}
	}
	v.SetEnvPrefix("MUSTER")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	for flag, key := range flagKeys {
		if f := cmd.Flags().Lookup(flag); f != nil && f.Changed {
			v.Set(key, f.Value.String())
		}
	}
	err = v.UnmarshalExact(out, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		durationHook,
		mapstructure.StringToSliceHookFunc(","),
	)))
	if err != nil {
		return decodeErrors(err)
	}
	return nil
}

// decodeErrors turns a decoding error (which lists every bad key under a
// header) into the same one-line-per-field form as configErrors.
func decodeErrors(err error) error {
	var errs []error
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "* "))
		if line == "" || strings.HasPrefix(line, "decoding failed due to") {
			continue
		}
		// "'' has invalid keys: a, b" names keys at the top level.
		line = strings.Replace(line, "'' has invalid keys:", "unknown keys:", 1)
		line = strings.Replace(line, "has invalid keys:", "has unknown keys:", 1)
		errs = append(errs, errors.New(line))
	}
	if len(errs) == 0 {
		errs = append(errs, err)
	}
	return configErrors(errs)
}

// durationHook accepts Go durations ("10s", "24h") and, for the defaults
// document, plain nanosecond counts.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeOf(time.Duration(0)) {
		return data, nil
	}
	switch d := data.(type) {
	case string:
		v, err := time.ParseDuration(d)
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration like 10s or 24h", d)
		}
		return v, nil
	case int:
		return time.Duration(d), nil
	case int64:
		return time.Duration(d), nil
	}
	return data, nil
}

// configErrors turns a list of validation errors into one error printing one
// line per bad field, with exit code 2.
func configErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("invalid configuration:")
	for _, e := range errs {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return &exitError{code: 2, err: errors.New(b.String())}
}
