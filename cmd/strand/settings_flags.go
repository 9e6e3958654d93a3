package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/strandlog/strand/internal/config"
)

// bindSettings gives fs a flag for every broker setting that has one
// (config.BrokerDefs), each writing into b and defaulting to b's value,
// and a flag for each that Kafka's syntax also sets: what those are given
// it returns by setting name, for config.ApplyListeners. The flags are the
// binary's: config knows the settings, not the command line.
func bindSettings(fs *pflag.FlagSet, b *config.Broker) (kafkaSyntax map[string]*string) {
	kafkaSyntax = map[string]*string{}
	for i := range config.BrokerDefs {
		d := &config.BrokerDefs[i]
		if d.KafkaFlag != "" {
			kafkaSyntax[d.Name] = fs.String(d.KafkaFlag, "", "Kafka's "+d.Name+", in Kafka's syntax. "+d.Doc)
		}
		if d.Flag == "" {
			continue
		}
		usage := d.Doc + " (" + d.Name + ")"
		switch v := d.Field(b).(type) {
		case pflag.Value:
			fs.Var(v, d.Flag, usage)
		case *string:
			fs.StringVar(v, d.Flag, *v, usage)
		case *bool:
			fs.BoolVar(v, d.Flag, *v, usage)
		case *int:
			fs.IntVar(v, d.Flag, *v, usage)
		case *int16:
			fs.Int16Var(v, d.Flag, *v, usage)
		case *int32:
			fs.Int32Var(v, d.Flag, *v, usage)
		case *int64:
			fs.Int64Var(v, d.Flag, *v, usage)
		case *time.Duration:
			if strings.HasSuffix(d.Flag, "-ms") {
				fs.Var((*msFlag)(v), d.Flag, usage+"; in milliseconds, -1 for unlimited")
			} else {
				fs.DurationVar(v, d.Flag, *v, usage)
			}
		case *[]string:
			fs.StringSliceVar(v, d.Flag, *v, usage)
		default:
			panic(fmt.Sprintf("config: broker config %s has a field of type %T", d.Name, v))
		}
	}
	return kafkaSyntax
}

// msFlag is a duration flag given in milliseconds; a negative one is -1,
// unlimited.
type msFlag time.Duration

func (f *msFlag) String() string {
	if *f < 0 {
		return "-1"
	}
	return strconv.FormatInt(time.Duration(*f).Milliseconds(), 10)
}

func (f *msFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("not a whole number of milliseconds (-1 for unlimited)")
	}
	if n < 0 {
		*f = -1
	} else {
		*f = msFlag(time.Duration(n) * time.Millisecond)
	}
	return nil
}

func (f *msFlag) Type() string { return "ms" }
