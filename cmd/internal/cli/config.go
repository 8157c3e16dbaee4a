package cli

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/musterhq/muster/agent/handlers"
	"github.com/musterhq/muster/shared/config"
)

// LoadConfig fills out (a pointer to a struct already holding the defaults)
// from, in increasing priority: the defaults, the YAML file named by --config,
// MUSTER_* environment variables (MUSTER_API_ADDR for api.addr), and the flags
// bound in flagKeys (flag name → config key) that the user set. Unknown keys in
// the file are errors.
func LoadConfig(cmd *cobra.Command, out any, flagKeys map[string]string) error {
	path := ""
	if f := cmd.Flags().Lookup("config"); f != nil {
		path = f.Value.String()
	}
	return loadConfigFrom(cmd, path, out, flagKeys)
}

// loadConfigFrom is LoadConfig with the file named by path; with a nil cmd
// only the defaults and the file count (no environment, no flags).
func loadConfigFrom(cmd *cobra.Command, path string, out any, flagKeys map[string]string) error {
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
	if path != "" {
		v.SetConfigFile(path)
		if err := v.MergeInConfig(); err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("config %s: %w", path, err)}
		}
	}
	if cmd != nil {
		v.SetEnvPrefix("MUSTER")
		v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
		v.AutomaticEnv()
		for flag, key := range flagKeys {
			if f := cmd.Flags().Lookup(flag); f != nil && f.Changed {
				v.Set(key, f.Value.String())
			}
		}
	}
	// Unknown keys are found against out's fields and bad values come from
	// the decoder's typed errors, each named by its key, all at once: nothing
	// here reads the wording of viper or mapstructure.
	errs := unknownKeys(v.AllSettings(), reflect.TypeOf(out).Elem(), "")
	err = v.Unmarshal(out, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		durationHook,
		schemaTextHook,
		nameHook,
		mapstructure.StringToSliceHookFunc(","),
	)))
	if err != nil {
		errs = append(errs, decodeErrors(err)...)
	}
	return ConfigError(errs.Err())
}

// LoadValid loads the configuration as LoadConfig does, then validates it
// with validate, and reports every unknown key, bad value and bad field in
// one list (config.Errors, exit code 2). A field whose value the decoder
// refused is not validated again.
func LoadValid(cmd *cobra.Command, out any, flagKeys map[string]string, validate func() error) error {
	path := ""
	if f := cmd.Flags().Lookup("config"); f != nil {
		path = f.Value.String()
	}
	return LoadValidFrom(cmd, path, out, flagKeys, validate)
}

// LoadValidFrom is LoadValid with the file named by path; with a nil cmd
// only the defaults and the file count.
func LoadValidFrom(cmd *cobra.Command, path string, out any, flagKeys map[string]string, validate func() error) error {
	var errs config.Errors
	if err := loadConfigFrom(cmd, path, out, flagKeys); err != nil && !errors.As(err, &errs) {
		return err // the file could not be read or parsed: nothing to validate
	}
	errs = slices.Clone(errs)
	if err := validate(); err != nil {
		var verrs config.Errors
		if !errors.As(err, &verrs) {
			return err
		}
		refused := errs.Fields()
		for _, v := range verrs {
			if !slices.Contains(refused, v.Field) {
				errs = append(errs, v)
			}
		}
	}
	return ConfigError(errs.Err())
}

// unknownKeys returns an "unknown key" error for every key of settings (as
// viper holds them: maps and lists) that no field of t takes, following the
// mapstructure tags (squashed structs included) into sections and lists.
func unknownKeys(settings any, t reflect.Type, prefix string) config.Errors {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var errs config.Errors
	switch t.Kind() {
	case reflect.Struct:
		m, ok := settings.(map[string]any)
		if !ok {
			return nil // a wrong type: the decoder reports it
		}
		fields := map[string]reflect.Type{}
		collectFields(t, fields)
		for key, val := range m {
			ft, ok := fields[strings.ToLower(key)]
			if !ok {
				errs.Add(prefix+key, "unknown key")
				continue
			}
			errs = append(errs, unknownKeys(val, ft, prefix+key+".")...)
		}
	case reflect.Slice:
		list, ok := settings.([]any)
		if !ok {
			return nil
		}
		for i, val := range list {
			errs = append(errs, unknownKeys(val, t.Elem(), fmt.Sprintf("%s[%d].", strings.TrimSuffix(prefix, "."), i))...)
		}
	}
	return errs
}

// collectFields maps the lowercased mapstructure name of every field of the
// struct t to its type, with the fields of squashed structs in line.
func collectFields(t reflect.Type, into map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if opts == "squash" || strings.Contains(opts, "squash") {
			collectFields(f.Type, into)
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name != "-" && f.IsExported() {
			into[strings.ToLower(name)] = f.Type
		}
	}
}

// decodeErrors returns one FieldError per value the decoder refused, named
// by the key mapstructure reports for it.
func decodeErrors(err error) config.Errors {
	var errs config.Errors
	var walk func(error)
	walk = func(e error) {
		if de, ok := e.(*mapstructure.DecodeError); ok {
			var inner *mapstructure.DecodeError
			if errors.As(de.Unwrap(), &inner) {
				walk(de.Unwrap()) // a nested section: its fields name themselves
				return
			}
			errs.Add(de.Name(), "%v", de.Unwrap())
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			if x := u.Unwrap(); x != nil {
				walk(x)
				return
			}
			errs.Add("config", "%v", e)
		default:
			errs.Add("config", "%v", e)
		}
	}
	walk(err)
	return errs
}

// schemaTextHook refuses a schema written as a YAML mapping: configuration
// keys lose their case on the way in, and a schema's keywords and property
// names must not.
func schemaTextHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeOf(handlers.SchemaText("")) || from.Kind() == reflect.String {
		return data, nil
	}
	return nil, errors.New("write the schema as a block of JSON or YAML text (args_schema: | and the schema indented below), not as a mapping: configuration keys lose their case, a schema's must keep it")
}

// nameHook reads a string into a section that is also written as a name
// alone (a kind's "lock: db" for "lock: {name: db}"): a struct whose
// pointer is an encoding.TextUnmarshaler.
func nameHook(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if !ok || to.Kind() != reflect.Struct || !reflect.PointerTo(to).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
		return data, nil
	}
	v := reflect.New(to)
	if err := v.Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
		return nil, err
	}
	return v.Elem().Interface(), nil
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
