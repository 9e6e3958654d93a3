package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/logging"
	"github.com/strandlog/strand/internal/server"
)

// serveOptions are serve's flags that are not a broker setting: the
// process's own options, and what the flags in Kafka's syntax give.
type serveOptions struct {
	configFile  string
	logLevel    string
	logFormat   string
	cpuProfile  string
	kafkaSyntax map[string]*string
}

// bindServeFlags declares serve's flags on f: the broker's settings, each
// declared once in config.BrokerDefs, into cfg, and the others into o.
// The tools that read a broker's settings as serve does (metadata
// restore) declare the same.
func bindServeFlags(f *pflag.FlagSet, cfg *config.Broker, o *serveOptions) {
	f.StringVar(&o.configFile, "config", "", "file of `flag = value` lines")
	o.kafkaSyntax = bindSettings(f, cfg)
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "text (key=value) or json, one object per line")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile to this file until shutdown")
	f.MarkHidden("cpuprofile")
}

// settings reads the broker's settings as serve does: the command line,
// then STRAND_ variables, then the config file; it returns the Kafka
// settings of the file Strand has no use for.
func (o *serveOptions) settings(f *pflag.FlagSet, cfg *config.Broker) ([]string, error) {
	unused, err := applyEnvAndFile(f, o.configFile, cfg)
	if err != nil {
		return nil, err
	}
	k := o.kafkaSyntax
	return unused, config.ApplyListeners(cfg, *k["listeners"], *k["advertised.listeners"], *k["listener.security.protocol.map"])
}

func serveCommand() *cobra.Command {
	cfg := config.Defaults()
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a broker",
		Long: `Run a broker. Every flag can also be given as an environment variable
STRAND_<FLAG> (upper case, dashes as underscores) or as a "flag = value" line in
the --config file, where settings can also go under their Kafka names
(log.retention.ms = 86400000, ssl.keystore.location = server.pem, as in
server.properties); a flag on the command line wins over the environment, which
wins over the file. docs/settings.md lists every setting.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			unused, err := o.settings(cmd.Flags(), &cfg)
			if err != nil {
				return err
			}
			logger, err := newLogger(os.Stderr, o.logLevel, o.logFormat)
			if err != nil {
				return err
			}
			if len(unused) > 0 {
				logger.Warn("the config file sets Kafka settings that Strand has no use for: they are ignored (docs/settings.md says why)",
					"file", o.configFile, "settings", strings.Join(unused, ", "))
			}
			if o.cpuProfile != "" {
				// Profiles until shutdown; strand bench suite --cpuprofile uses it.
				pf, err := os.Create(o.cpuProfile)
				if err != nil {
					return err
				}
				defer pf.Close()
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			return serve(cfg, logger)
		},
	}
	bindServeFlags(cmd.Flags(), &cfg, &o)
	return cmd
}

// fileValue is a config file's setting: the flag it sets, and the key and
// value as the file writes them.
type fileValue struct {
	key, value, flagValue string
	line                  int
}

// applyEnvAndFile fills the flags not given on the command line from
// STRAND_<NAME> variables, then from the config file. Kafka broker
// configs that Strand has no use for are accepted and returned, for one
// warning; a key that is neither Kafka's nor Strand's is an error naming
// its line and the settings closest to it.
func applyEnvAndFile(flags *pflag.FlagSet, file string, cfg *config.Broker) (unused []string, err error) {
	fileValues := map[string]fileValue{} // by flag
	if file != "" {
		if fileValues, unused, err = readConfigFile(flags, file, cfg); err != nil {
			return nil, err
		}
	}
	flags.VisitAll(func(fl *pflag.Flag) {
		if err != nil || fl.Changed || fl.Name == "config" {
			return
		}
		env := "STRAND_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if serr := fl.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s=%q: %s", env, v, valueError(serr))
			}
			return
		}
		if fv, ok := fileValues[fl.Name]; ok {
			if serr := fl.Value.Set(fv.flagValue); serr != nil {
				err = fmt.Errorf("%s:%d: %s = %q: %s", file, fv.line, fv.key, fv.value, valueError(serr))
			}
		}
	})
	return unused, err
}

// readConfigFile reads file's "key = value" lines: the settings it gives,
// by flag, and the Kafka configs it gives that Strand does not act on.
// Settings that change at run time, given under their Kafka names
// (min.insync.replicas, log.cleanup.policy, log.flush.interval.messages),
// it sets in cfg in Kafka's syntax, unless their flag was given.
func readConfigFile(flags *pflag.FlagSet, file string, cfg *config.Broker) (map[string]fileValue, []string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	values := map[string]fileValue{}
	static, staticLines := map[string]string{}, map[string]int{}
	var unused []string
	var errs []error
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("%s:%d: want key = value", file, n))
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		fv := fileValue{key: k, value: v, flagValue: v, line: n}
		flag := k
		if flags.Lookup(k) == nil {
			if flag, ok := config.FileStatic(k); ok {
				// Kafka's syntax for a setting that changes at run
				// time; its flag, given, wins.
				if flag == "" || !flags.Lookup(flag).Changed {
					static[k], staticLines[k] = v, n
				}
				continue
			}
			// A setting under its Kafka name, as in server.properties.
			name, value, known, err := config.FileSetting(k, v)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s:%d: %w", file, n, err))
				continue
			case known && name == "":
				continue // said for Kafka's sake (ssl.keystore.type=PEM)
			case known:
				flag, fv.flagValue = name, value
			case isUnusedKafkaConfig(k):
				if !slices.Contains(unused, k) {
					unused = append(unused, k)
				}
				continue
			default:
				errs = append(errs, fmt.Errorf("%s:%d: unknown setting %q%s", file, n, k,
					didYouMean("%s", closest(k, configFileKeys(flags)))))
				continue
			}
		}
		values[flag] = fv
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := config.SetStatic(cfg, static); err != nil {
		var ve *config.ValueError
		if errors.As(err, &ve) {
			err = fmt.Errorf("%s:%d: %w", file, staticLines[ve.Name], err)
		}
		errs = append(errs, err)
	}
	return values, unused, errors.Join(errs...)
}

// isUnusedKafkaConfig says whether key is a Kafka broker config that
// Strand has no use for.
func isUnusedKafkaConfig(key string) bool {
	_, ok := config.LookupUnusedKafkaDef(key)
	return ok
}

// configFileKeys are the keys a config file may use: the flags' names and
// the settings' Kafka names.
func configFileKeys(flags *pflag.FlagSet) []string {
	keys := config.FileKeys()
	flags.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Name != "config" {
			keys = append(keys, f.Name)
		}
	})
	return keys
}

// valueError is why a flag refused a value, without the parser's jargon.
func valueError(err error) string {
	var ne *strconv.NumError
	switch {
	case errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange):
		return "out of range"
	case errors.As(err, &ne):
		return "not a whole number"
	}
	return err.Error()
}

func serve(cfg config.Broker, logger *slog.Logger) error {
	start := time.Now()
	srv, err := server.New(cfg, logger)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		srv.Shutdown(context.Background())
		return err
	}
	// Caught before the ready line: whoever waits for it may stop the
	// broker at once, and that stop must be a clean one.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	logger.Info("strand ready", "listen", srv.Addr().String(), "data_dir", cfg.DataDir,
		"fsync", cfg.Topic.FlushPolicy.String(), "startup", time.Since(start).Round(time.Microsecond).String())
	var failed error
	select {
	case s := <-sig:
		logger.Info("shutting down", "signal", s.String())
	case failed = <-srv.Failed():
		logger.Error("shutting down", "err", failed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return errors.Join(failed, err)
	}
	if failed != nil {
		return failed
	}
	logger.Info("stopped")
	return nil
}

// newLogger writes the broker's log to w at level, as text (key=value) or
// JSON lines.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: debug, info, warn or error", level)
	}
	// The handler takes every level; the components' levels (root: the
	// flag's) choose, and can change while the broker runs.
	opts := &slog.HandlerOptions{Level: logging.Trace}
	levels := logging.NewLevels(l)
	switch format {
	case "text":
		return slog.New(logging.NewHandler(slog.NewTextHandler(w, opts), levels)), nil
	case "json":
		return slog.New(logging.NewHandler(slog.NewJSONHandler(w, opts), levels)), nil
	}
	return nil, fmt.Errorf("--log-format %q: text or json", format)
}
