package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// nameUnit is the unit of a duration setting: the one its name ends with,
// milliseconds for the others.
func nameUnit(name string) time.Duration {
	switch {
	case strings.HasSuffix(name, ".seconds"):
		return time.Second
	case strings.HasSuffix(name, ".minutes"):
		return time.Minute
	case strings.HasSuffix(name, ".hours"):
		return time.Hour
	}
	return time.Millisecond
}

// fieldGetter reads a setting from its field as DescribeConfigs gives it:
// a duration in the unit the name ends with, a list comma-separated.
func fieldGetter(name string, field func(b *Broker) any) func(b Broker) string {
	if field == nil {
		panic("config: broker config " + name + " has neither Get nor Field")
	}
	unit := nameUnit(name)
	return func(b Broker) string {
		switch v := field(&b).(type) {
		case *string:
			return *v
		case *bool:
			return strconv.FormatBool(*v)
		case *int:
			return strconv.Itoa(*v)
		case *int16:
			return strconv.FormatInt(int64(*v), 10)
		case *int32:
			return strconv.FormatInt(int64(*v), 10)
		case *int64:
			return strconv.FormatInt(*v, 10)
		case *time.Duration:
			if *v < 0 {
				return "-1"
			}
			return strconv.FormatInt(int64(*v/unit), 10)
		case *[]string:
			return strings.Join(*v, ",")
		}
		panic(fmt.Sprintf("config: broker config %s has a field of type %T", name, field(&b)))
	}
}

// setField parses v, written as fieldGetter writes it, into the setting
// d's field of b.
func (d *BrokerDef) setField(b *Broker, v string) error {
	bits := 0
	switch f := d.Field(b).(type) {
	case *string:
		*f = v
		return nil
	case *bool:
		x, err := strconv.ParseBool(v)
		*f = x
		return err
	case *[]string:
		*f = nil
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				*f = append(*f, item)
			}
		}
		return nil
	case *int16:
		bits = 16
	case *int32:
		bits = 32
	case *int, *int64, *time.Duration:
		bits = 64
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, bits)
	if err != nil {
		return err
	}
	switch f := d.Field(b).(type) {
	case *int16:
		*f = int16(n)
	case *int32:
		*f = int32(n)
	case *int:
		*f = int(n)
	case *int64:
		*f = n
	case *time.Duration:
		*f = -1
		if n >= 0 {
			*f = time.Duration(n) * nameUnit(d.Name)
		}
	default:
		return fmt.Errorf("config: broker config %s has a field of type %T", d.Name, f)
	}
	return nil
}

// number reads d's field in b as a number in the unit of its name; ok is
// false for a field that is not a number. A duration between two whole
// units is rounded away from zero: 200ms of a .seconds setting is above
// zero, as it is, and -1ns below.
func (d *BrokerDef) number(b *Broker) (n int64, ok bool) {
	switch f := d.Field(b).(type) {
	case *int:
		return int64(*f), true
	case *int16:
		return int64(*f), true
	case *int32:
		return int64(*f), true
	case *int64:
		return *f, true
	case *time.Duration:
		unit := nameUnit(d.Name)
		n := int64(*f / unit)
		switch rest := *f % unit; {
		case rest > 0:
			n++
		case rest < 0:
			n--
		}
		return n, true
	}
	return 0, false
}

// check reports a value of d in b outside its bounds (Min, Max, OneOf).
func (d *BrokerDef) check(b *Broker) error {
	if d.Field == nil || d.Topic != nil {
		return nil
	}
	bad := func(why string) error {
		name := d.Name
		if d.Flag != "" {
			name += " (--" + d.Flag + ")"
		}
		return fmt.Errorf("%s %q: %s", name, d.Get(*b), why)
	}
	if n, ok := d.number(b); ok {
		if d.Min != nil && n < *d.Min {
			return bad(fmt.Sprintf("must be at least %d", *d.Min))
		}
		if d.Max != nil && n > *d.Max {
			return bad(fmt.Sprintf("must be at most %d", *d.Max))
		}
	}
	if d.OneOf == nil {
		return nil
	}
	var values []string
	switch f := d.Field(b).(type) {
	case *string:
		values = []string{*f}
	case *[]string:
		values = *f
	}
	for _, v := range values {
		if !slices.Contains(d.OneOf, v) && len(values) == 1 {
			return bad("must be " + d.valid())
		} else if !slices.Contains(d.OneOf, v) {
			return bad("each must be " + d.valid())
		}
	}
	return nil
}

// valid says in words which values d takes, "" when any of its type.
func (d *BrokerDef) valid() string {
	switch {
	case d.OneOf != nil:
		var names []string
		for _, v := range d.OneOf {
			if v == "" {
				v = "empty"
			}
			names = append(names, v)
		}
		if len(names) == 1 {
			return names[0]
		}
		what := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
		return what
	case d.Min != nil && d.Max != nil:
		return fmt.Sprintf("%d to %d", *d.Min, *d.Max)
	case d.Min != nil:
		return fmt.Sprintf("at least %d", *d.Min)
	case d.Max != nil:
		return fmt.Sprintf("at most %d", *d.Max)
	}
	return ""
}

// typeNames are Kafka's names of the config types.
var typeNames = map[Type]string{TypeBoolean: "boolean", TypeString: "string", TypeInt: "int", TypeShort: "short",
	TypeLong: "long", TypeDouble: "double", TypeList: "list", TypeClass: "class", TypePassword: "password"}

// SettingsMarkdown is docs/settings.md: every broker setting with its flag,
// type, default and whether it changes at run time.
func SettingsMarkdown() string {
	var b strings.Builder
	b.WriteString(`# Broker settings

Every setting of ` + "`strand serve`" + `, from one table in the code (` + "`internal/config/brokerdefs.go`" + `, and
` + "`topic.go`" + ` for the topic configs' defaults), one row per setting: the name that DescribeConfigs and
AlterConfigs use (Kafka's, where Kafka has the setting), the flag that sets it (also ` + "`STRAND_<FLAG>`" + ` in the
environment and a ` + "`flag = value`" + ` line in the ` + "`--config`" + ` file), its type, its default, the values
` + "`strand serve`" + ` takes (numbers in the unit of the name), and whether it changes at run time
(` + "`kafka-configs.sh --alter`" + `, ` + "`strand cluster config set`" + `). Durations take Go's syntax on flags (` + "`2s`" + `,
` + "`500ms`" + `), or milliseconds for the flags that end in ` + "`-ms`" + `; DescribeConfigs gives them in the unit their name
ends with. The topic configs' defaults are the ` + "`log.*`" + ` settings and the few others marked as such.
` + "`--fsync`" + ` (every-append, interval or never) and ` + "`--fsync-interval-ms`" + ` are the flags of
` + "`log.flush.interval.messages`" + ` and ` + "`log.flush.interval.ms`" + `. ` + "`--listeners`" + `, ` + "`--advertised-listeners`" + ` and
` + "`--listener-security-protocol-map`" + ` take those settings in Kafka's listener syntax; ` + "`--config`" + `, ` + "`--log-level`" + `
and ` + "`--log-format`" + ` are the process's own. ` + "`strand serve --help`" + ` lists them all.

The ` + "`--config`" + ` file takes the flags' names or the settings' names, as a Kafka ` + "`server.properties`" + `
has them (` + "`log.retention.ms = 86400000`" + `, also ` + "`log.retention.hours`" + ` and ` + "`broker.id`" + `,
` + "`listeners = SSL://0.0.0.0:9093`" + `, ` + "`ssl.keystore.type = PEM`" + `), with durations in the unit of the name. A
setting that changes at run time (` + "`min.insync.replicas`" + `, ` + "`log.cleanup.policy`" + `, ` + "`log.flush.interval.messages`" + `,
the replication throttle rates) is read in the file under its name as Kafka reads it, as the broker's
static value: DescribeConfigs gives it as STATIC_BROKER_CONFIG, a value set at run time overrides it, and
its flag, given on the command line or in the environment, wins over the file.

This file is generated: ` + "`STRAND_WRITE_DOCS=1 go test ./internal/config`" + ` writes it again.

| Setting | Flag | Type | Default | Valid values | Run time | Description |
|---|---|---|---|---|---|---|
`)
	defaults := Defaults()
	for _, d := range BrokerDefs {
		flag, dynamic := "", ""
		for _, f := range []string{d.Flag, d.KafkaFlag} {
			if f != "" && flag != "" {
				flag += ", "
			}
			if f != "" {
				flag += "`--" + f + "`"
			}
		}
		if d.Dynamic() {
			dynamic = "yes"
		}
		def := d.Get(defaults)
		if def != "" {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s |\n", d.Name, flag, typeNames[d.Type], def, d.valid(), dynamic,
			strings.ReplaceAll(d.Doc, "|", "\\|"))
	}
	b.WriteString(`
## Kafka settings Strand does not act on

Apache Kafka 4.4's other broker configs. A ` + "`--config`" + ` file may set them, as Kafka's own ` + "`server.properties`" + `
does: ` + "`strand serve`" + ` starts with one warning that lists those it found, and ignores them. DescribeConfigs
lists each with Kafka's type and default (none where Kafka has none; a secret's value is never shown) and
says that Strand does not act on it. Those that Kafka changes at run time ("yes" below) AlterConfigs and
IncrementalAlterConfigs accept, per broker and cluster-wide, checking the value's type: the value is kept
and described, and has no effect. The others are refused as Kafka refuses them. A key that is neither
Kafka's nor Strand's stops ` + "`strand serve`" + `, with the line and the settings closest to the key.

| Setting | Type | Kafka's default | Run time | Why Strand does without it |
|---|---|---|---|---|
`)
	for _, d := range UnusedKafkaDefs {
		def, dynamic := "", ""
		if d.Default != nil && !d.Sensitive {
			def = "`" + *d.Default + "`"
			if *d.Default == "" {
				def = "empty"
			}
		}
		if !d.ReadOnly {
			dynamic = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s%s. |\n", d.Name, typeNames[d.Type], strings.ReplaceAll(def, "|", "\\|"),
			dynamic, strings.ToUpper(d.Why[:1]), d.Why[1:])
	}
	return b.String()
}

// FileStatic says whether a config file line under name gives the static
// value of a setting that changes at run time, in Kafka's syntax
// (min.insync.replicas, log.cleanup.policy, log.flush.interval.messages):
// SetStatic applies those together. flag is the setting's flag, if it has
// one: given on the command line, it wins over the file.
func FileStatic(name string) (flag string, ok bool) {
	d, found := LookupBrokerDef(name)
	if !found || !d.Dynamic() {
		return "", false
	}
	return d.Flag, true
}

// SetStatic sets in b the static values a config file gives of settings
// that change at run time (FileStatic), as the cluster's dynamic configs
// are applied (ApplyDynamic): the topic defaults in the order of
// TopicDefs, so that log.flush.interval.ms sees
// log.flush.interval.messages' outcome. DescribeConfigs gives them as
// STATIC_BROKER_CONFIG, and a value set at run time overrides them, as
// Kafka's server.properties is.
func SetStatic(b *Broker, values map[string]string) error {
	nb, err := ApplyDynamic(*b, nil, values)
	if err == nil {
		*b = nb
	}
	return err
}

// lookupAlias finds the setting a config file key is another name of.
func lookupAlias(key string) (*BrokerDef, Alias, bool) {
	for i := range BrokerDefs {
		for _, a := range BrokerDefs[i].Aliases {
			if a.Key == key {
				return &BrokerDefs[i], a, true
			}
		}
	}
	return nil, Alias{}, false
}

// FileSetting reads a config file line given under a setting's Kafka name
// (log.retention.hours = 24) as the flag that sets it and the flag's
// value (--retention-ms 86400000; a duration in the name's unit becomes a
// Go duration for a flag that takes one). ok is false for a key that is no
// setting's name; a setting the file cannot set (one changed only at run
// time) is an error that says how it is set.
func FileSetting(key, value string) (flag, flagValue string, ok bool, err error) {
	if key == "ssl.keystore.type" || key == "ssl.truststore.type" {
		if !strings.EqualFold(value, "PEM") {
			return "", "", true, fmt.Errorf("%s = %q: only PEM files are read", key, value)
		}
		return "", "", true, nil
	}
	d, alias, found := lookupAlias(key)
	if !found {
		d, found = LookupBrokerDef(key)
	}
	switch {
	case !found:
		return "", "", false, nil
	case d.KafkaFlag != "":
		return d.KafkaFlag, value, true, nil
	case d.Flag == "" && d.Dynamic():
		return "", "", true, fmt.Errorf("%s has no flag: the file sets it with SetStatic", key)
	case d.Flag == "":
		return "", "", true, fmt.Errorf("%s is not set in a config file: %s", key, d.Doc)
	}
	if _, isDuration := d.Field(&Broker{}).(*time.Duration); !isDuration {
		return d.Flag, value, true, nil
	}
	unit := alias.Unit
	if unit == 0 {
		unit = nameUnit(key)
	}
	msFlag := strings.HasSuffix(d.Flag, "-ms")
	if msFlag && unit == time.Millisecond {
		return d.Flag, value, true, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	switch {
	case err != nil:
		return "", "", true, fmt.Errorf("%s = %q: not a whole number", key, value)
	case msFlag && n < 0:
		return d.Flag, "-1", true, nil
	case msFlag:
		return d.Flag, strconv.FormatInt((time.Duration(n) * unit).Milliseconds(), 10), true, nil
	}
	return d.Flag, (time.Duration(n) * unit).String(), true, nil
}
