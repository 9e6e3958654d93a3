package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// fieldGetter reads a setting from its field as DescribeConfigs gives it:
// a duration in the unit the name ends with, a list comma-separated.
func fieldGetter(name string, field func(b *Broker) any) func(b Broker) string {
	if field == nil {
		panic("config: broker config " + name + " has neither Get nor Field")
	}
	unit := time.Millisecond
	switch {
	case strings.HasSuffix(name, ".seconds"):
		unit = time.Second
	case strings.HasSuffix(name, ".minutes"):
		unit = time.Minute
	case strings.HasSuffix(name, ".hours"):
		unit = time.Hour
	}
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

// typeNames are Kafka's names of the config types.
var typeNames = map[Type]string{TypeBoolean: "boolean", TypeString: "string", TypeInt: "int", TypeShort: "short",
	TypeLong: "long", TypeDouble: "double", TypeList: "list", TypeClass: "class", TypePassword: "password"}

// SettingsMarkdown is docs/settings.md: every broker setting with its flag,
// type, default and whether it changes at run time.
func SettingsMarkdown() string {
	var b strings.Builder
	b.WriteString(`# Broker settings

Every setting of ` + "`strand serve`" + `, from one table in the code (` + "`internal/config/brokerdefs.go`" + `):
the name that DescribeConfigs and AlterConfigs use (Kafka's, where Kafka has the setting), the flag that
sets it (also ` + "`STRAND_<FLAG>`" + ` in the environment and a ` + "`flag = value`" + ` line in the ` + "`--config`" + ` file), its
type, its default, and whether it changes at run time (` + "`kafka-configs.sh --alter`" + `, ` + "`strand cluster config\nset`" + `). Durations take Go's syntax on flags (` + "`2s`" + `, ` + "`500ms`" + `), or milliseconds for the flags that end in
` + "`-ms`" + `; DescribeConfigs gives them in the unit their name ends with. The topic configs' defaults are the
` + "`log.*`" + ` settings and the few others marked as such. ` + "`--listeners`" + ` and ` + "`--advertised-listeners`" + ` take Kafka's
listener syntax, ` + "`--fsync`" + ` and ` + "`--fsync-interval-ms`" + ` choose when writes reach the disk, and ` + "`--log-level`" + `
and ` + "`--log-format`" + ` shape the log; ` + "`strand serve --help`" + ` lists them all.

The ` + "`--config`" + ` file takes the flags' names or the settings' names, as a Kafka ` + "`server.properties`" + `
has them (` + "`log.retention.ms = 86400000`" + `, also ` + "`log.retention.hours`" + `, ` + "`listeners = SSL://0.0.0.0:9093`" + `,
` + "`ssl.keystore.type = PEM`" + `), with durations in the unit of the name. A setting that has no flag but changes at
run time (` + "`min.insync.replicas`" + `, ` + "`log.cleanup.policy`" + `, the replication throttle rates) is set in the file
under its name, as the broker's static value: DescribeConfigs gives it as STATIC_BROKER_CONFIG, and a value
set at run time overrides it.

This file is generated: ` + "`STRAND_WRITE_DOCS=1 go test ./internal/config`" + ` writes it again.

| Setting | Flag | Type | Default | Run time | Description |
|---|---|---|---|---|---|
`)
	defaults := Defaults()
	for _, d := range BrokerDefs {
		flag, dynamic := "", ""
		if d.Flag != "" {
			flag = "`--" + d.Flag + "`"
		}
		if d.Dynamic() {
			dynamic = "yes"
		}
		def := d.Get(defaults)
		if def != "" {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", d.Name, flag, typeNames[d.Type], def, dynamic,
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

// SetStatic sets broker config name in b from a config file, when it is
// one that has no flag of its own but can change while the broker runs (a
// topic config's broker-wide default such as min.insync.replicas or
// log.cleanup.policy, a replication throttle rate): the value is the
// broker's static one (STATIC_BROKER_CONFIG), which the cluster's dynamic
// configs override, as Kafka's server.properties is. ok is false for any
// other name.
func SetStatic(b *Broker, name, value string) (ok bool, err error) {
	d, found := LookupBrokerDef(name)
	if !found || d.Flag != "" || !d.Dynamic() {
		return false, nil
	}
	if d.Topic != nil {
		err = d.Topic.Set(&b.Topic, value)
	} else {
		err = d.Set(b, value)
	}
	if err != nil {
		return true, &ValueError{Name: name, Value: value, Err: err}
	}
	return true, nil
}

// kafkaFileKeys are config file keys under Kafka's names that are not one
// setting's name: they go to the flag named, the value as it is, or
// scaled to milliseconds.
var kafkaFileKeys = map[string]struct {
	flag  string
	scale time.Duration // the value's unit, for a -ms flag; 0 to pass it as it is
}{
	"advertised.listeners":           {"advertised-listeners", 0},
	"broker.id":                      {"node-id", 0},
	"listener.security.protocol.map": {"listener-security-protocol-map", 0},
	"security.inter.broker.protocol": {"inter-broker-listener-name", 0},
	"log.retention.hours":            {"retention-ms", time.Hour},
	"log.retention.minutes":          {"retention-ms", time.Minute},
	"log.roll.hours":                 {"segment-ms", time.Hour},
}

// FileSetting reads a config file line given under a setting's Kafka name
// (log.retention.ms = 86400000) as the flag that sets it and the flag's
// value (--retention-ms 86400000; a duration in the name's unit becomes a
// Go duration for a flag that takes one). ok is false for a key that is no
// setting's name; a setting the file cannot set (one changed only at run
// time) is an error that says how it is set.
func FileSetting(key, value string) (flag, flagValue string, ok bool, err error) {
	if k, found := kafkaFileKeys[key]; found {
		if k.scale == 0 {
			return k.flag, value, true, nil
		}
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return "", "", true, fmt.Errorf("%s = %q: not a whole number", key, value)
		}
		if n < 0 {
			return k.flag, "-1", true, nil
		}
		return k.flag, strconv.FormatInt((time.Duration(n) * k.scale).Milliseconds(), 10), true, nil
	}
	if key == "ssl.keystore.type" || key == "ssl.truststore.type" {
		if !strings.EqualFold(value, "PEM") {
			return "", "", true, fmt.Errorf("%s = %q: only PEM files are read", key, value)
		}
		return "", "", true, nil
	}
	d, found := LookupBrokerDef(key)
	switch {
	case !found:
		return "", "", false, nil
	case d.Flag == "" && d.Dynamic():
		return "", "", true, fmt.Errorf("%s has no flag: the file sets it with SetStatic", key)
	case d.Flag == "":
		return "", "", true, fmt.Errorf("%s is not set in a config file: %s", key, d.Doc)
	}
	var probe Broker
	if _, isDuration := d.Field(&probe).(*time.Duration); !isDuration || strings.HasSuffix(d.Flag, "-ms") {
		return d.Flag, value, true, nil
	}
	unit := "ms"
	switch {
	case strings.HasSuffix(key, ".seconds"):
		unit = "s"
	case strings.HasSuffix(key, ".minutes"):
		unit = "m"
	case strings.HasSuffix(key, ".hours"):
		unit = "h"
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return "", "", true, fmt.Errorf("%s = %q: not a whole number", key, value)
	}
	return d.Flag, strconv.FormatInt(n, 10) + unit, true, nil
}
