package config

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	yamlv3 "gopkg.in/yaml.v3"
	"sigs.k8s.io/yaml"
)

// Duration is a time.Duration written as a string such as "5s" or "1m30s".
type Duration time.Duration

// String returns the duration as time.Duration formats it.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the duration as a string such as "5s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses a string such as "5s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Decode decodes a YAML document into cfg strictly: a key that names no
// field, a duplicate key or a value of the wrong type is an error naming
// the field by its path ("ipam.podSubnetCIDR", "etcd.endpoints[1]"). Every
// such error is reported (joined), and every other field is decoded: a
// duplicate key takes its last value, a field whose value is of the wrong
// type keeps its value in cfg. Only a document that is not YAML is
// reported alone. Fields absent from the document keep their values in
// cfg. Durations are strings such as "5s".
func Decode(doc []byte, cfg *Config) error {
	_, errs := decode(doc, cfg)
	return errors.Join(errs...)
}

// decode is Decode; parsed is false when the document is not YAML (no
// field was decoded).
func decode(doc []byte, cfg *Config) (parsed bool, errs []error) {
	// Duplicate keys are found in the YAML tree; the conversion to JSON
	// below keeps the last value of each.
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return false, []error{fmt.Errorf("not valid YAML: %w", err)}
	}
	errs = duplicateKeys(doc)
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return true, errs // an empty document
	}
	decodeValue("", js, reflect.ValueOf(cfg).Elem(), &errs)
	return true, errs
}

// duplicateKeys reports every key given twice in a mapping of doc, by its
// path and lines.
func duplicateKeys(doc []byte) []error {
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(doc, &root); err != nil {
		return nil // not YAML: YAMLToJSON says why
	}
	var errs []error
	var walk func(path string, n *yamlv3.Node)
	walk = func(path string, n *yamlv3.Node) {
		switch n.Kind {
		case yamlv3.DocumentNode:
			for _, c := range n.Content {
				walk(path, c)
			}
		case yamlv3.SequenceNode:
			for i, c := range n.Content {
				walk(path+"["+strconv.Itoa(i)+"]", c)
			}
		case yamlv3.MappingNode:
			first := map[string]int{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				sub := k.Value
				if path != "" {
					sub = path + "." + k.Value
				}
				if line, dup := first[k.Value]; dup {
					errs = append(errs, fmt.Errorf("%s: duplicate key (lines %d and %d)", sub, line, k.Line))
				} else {
					first[k.Value] = k.Line
				}
				walk(sub, n.Content[i+1])
			}
		}
	}
	walk("", &root)
	return errs
}

var (
	durationType         = reflect.TypeFor[time.Duration]()
	configDurationType   = reflect.TypeFor[Duration]()
	textUnmarshalerType  = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonUnmarshalerType  = reflect.TypeFor[json.Unmarshaler]()
	errWantDurationValue = errors.New(`want a duration such as "5s" or "1m30s"`)
)

// decodeValue decodes raw (JSON) into v, appending errors named by path.
func decodeValue(path string, raw []byte, v reflect.Value, errs *[]error) {
	fail := func(err error) {
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if path == "" {
			*errs = append(*errs, errors.New(msg))
			return
		}
		*errs = append(*errs, fmt.Errorf("%s: %s", path, msg))
	}
	t := v.Type()
	isNull := bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
	switch {
	case t == durationType || t == configDurationType:
		if isNull {
			v.SetInt(0)
			return
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			fail(errWantDurationValue)
			return
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			fail(fmt.Errorf("%w: %q", errWantDurationValue, s))
			return
		}
		v.SetInt(int64(d))
	case reflect.PointerTo(t).Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType):
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			fail(err)
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		if isNull {
			v.SetZero()
			return
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			fail(errors.New("want a list"))
			return
		}
		s := reflect.MakeSlice(t, len(items), len(items))
		for i, item := range items {
			decodeValue(path+"["+strconv.Itoa(i)+"]", item, s.Index(i), errs)
		}
		v.Set(s)
	case t.Kind() == reflect.Struct:
		if isNull {
			return
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			fail(errors.New("want a mapping"))
			return
		}
		byName := jsonFields(t)
		for _, key := range slices.Sorted(func(yield func(string) bool) {
			for k := range fields {
				if !yield(k) {
					return
				}
			}
		}) {
			sub := key
			if path != "" {
				sub = path + "." + key
			}
			index, ok := byName[key]
			if !ok {
				*errs = append(*errs, fmt.Errorf("%s: unknown field", sub))
				continue
			}
			decodeValue(sub, fields[key], v.FieldByIndex(index), errs)
		}
	default:
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			fail(err)
		}
	}
}

// jsonFields maps the JSON names of t's exported fields (those of
// embedded structs without a name promoted, as encoding/json does) to
// their index. Fields tagged "-" are left out.
func jsonFields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			continue // its fields are visible themselves
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := out[name]; !dup || len(f.Index) < len(out[name]) {
			out[name] = f.Index
		}
	}
	return out
}
