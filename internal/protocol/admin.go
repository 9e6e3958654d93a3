package protocol

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/config"
	"github.com/strandlog/strand/internal/lockrank"
	"github.com/strandlog/strand/internal/logging"
)

// What the admin handlers (topics and configs) share: their error kinds,
// Kafka's messages for them, and the config layers a topic's or the broker's
// configs are described from.

// Error kinds of the admin APIs; errors.go maps them to Kafka codes.
var (
	errInvalidRequest           = errors.New("invalid request")
	errInvalidReplicationFactor = errors.New("invalid replication factor")
	errInvalidReplicaAssignment = errors.New("invalid replica assignment")
	errPolicyViolation          = errors.New("policy violation")
	errUnknownTopicID           = errors.New("unknown topic id")
)

// apiError is an error of a kind (above, or another package's) that carries
// the message Kafka sends for it.
type apiError struct {
	kind error
	msg  string
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.kind }

func newAPIError(kind error, format string, args ...any) error {
	return &apiError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// maxPartitionsPerRequest bounds the partitions one CreateTopics or
// CreatePartitions request may add, as Kafka's controller does (KAFKA-17870:
// POLICY_VIOLATION "Excessively large number of partitions per request.").
const maxPartitionsPerRequest = 10000

// configMu serialises the read-modify-write of config overrides
// (AlterConfigs, IncrementalAlterConfigs), so that concurrent changes to one
// resource are not lost.
var configMu lockrank.Mutex[lockrank.ConfigChange]

// nodeConfigAdmin is implemented by a TopicAdmin that keeps dynamic configs
// per broker (Kafka's BROKER resource named by a node id), apart from the
// cluster-wide ones (the resource named "", TopicAdmin.SetBrokerConfigs).
type nodeConfigAdmin interface {
	SetNodeConfigs(node int32, configs map[string]string, validateOnly bool) error
}

// configLayers are the levels a config is set at, read once per request:
// the broker's static settings (with the advertised addresses it resolved),
// the cluster-wide dynamic configs and this broker's own.
type configLayers struct {
	static  config.Broker
	cluster map[string]string
	node    map[string]string
}

func (b *Broker) configLayers() configLayers {
	return configLayers{
		static:  b.Config,
		cluster: b.Cluster.BrokerConfigs(),
		node:    b.Cluster.NodeConfigs(b.Config.NodeID),
	}
}

// effective returns the broker's settings with the dynamic configs applied:
// its Log field is the default of every topic.
func (l configLayers) effective() config.Broker {
	eb, err := config.ApplyDynamic(l.static, l.cluster, l.node)
	if err != nil {
		return l.static // stored configs were checked when set
	}
	return eb
}

// configEntry is one described config.
type configEntry struct {
	name      string
	value     string
	null      bool // no value: a Kafka config without a default, not set
	source    config.Source
	readOnly  bool
	sensitive bool
	typ       config.Type
	doc       string
	synonyms  []config.Synonym // the level in force first
}

// wanted reports whether a describe naming keys (none: all) asks for name.
func wanted(keys []string, name string) bool { return len(keys) == 0 || slices.Contains(keys, name) }

// topicEntries describes every topic config of a topic with overrides.
func (l configLayers) topicEntries(overrides map[string]string, keys []string) []configEntry {
	var out []configEntry
	for i := range config.TopicDefs {
		d := &config.TopicDefs[i]
		if !wanted(keys, d.Name) {
			continue
		}
		syn := config.TopicSynonyms(d, overrides, l.static, l.cluster, l.node)
		out = append(out, configEntry{name: d.Name, value: syn[0].Value, source: syn[0].Source,
			typ: d.Type, doc: d.Doc, synonyms: syn})
	}
	return out
}

// brokerEntries describes this broker's configs.
func (l configLayers) brokerEntries(keys []string) []configEntry {
	var out []configEntry
	for i := range config.BrokerDefs {
		d := &config.BrokerDefs[i]
		if !wanted(keys, d.Name) {
			continue
		}
		syn := config.BrokerSynonyms(d, l.static, l.cluster, l.node)
		out = append(out, configEntry{name: d.Name, value: syn[0].Value, source: syn[0].Source,
			readOnly: !d.Dynamic(), typ: d.Type, doc: d.Doc, synonyms: syn})
	}
	for i := range config.UnusedKafkaDefs {
		d := &config.UnusedKafkaDefs[i]
		if wanted(keys, d.Name) {
			out = append(out, unusedEntry(d, l.cluster, l.node))
		}
	}
	for name := range l.cluster {
		if _, ok := l.node[name]; !ok && wanted(keys, name) && customConfig(name) {
			out = append(out, customEntry(name, config.SourceDynamicDefault))
		}
	}
	for name := range l.node {
		if wanted(keys, name) && customConfig(name) {
			out = append(out, customEntry(name, config.SourceDynamicBroker))
		}
	}
	slices.SortFunc(out, func(a, b configEntry) int { return strings.Compare(a.name, b.name) })
	return out
}

// customConfig: a config set at run time that neither Strand nor Kafka
// knows, kept as Kafka keeps a plugin's config.
func customConfig(name string) bool {
	_, served := config.LookupBrokerDef(name)
	_, kafka := config.LookupKafkaDef(name)
	return !served && !kafka
}

// customEntry describes a custom config as Kafka does: its value hidden,
// since whether it is a secret is not known.
func customEntry(name string, source config.Source) configEntry {
	return configEntry{name: name, null: true, source: source, sensitive: true,
		synonyms: []config.Synonym{{Name: name, Source: source}}}
}

// unusedEntry describes a Kafka config Strand does not act on: the value
// kept for it at run time, else Kafka's default.
func unusedEntry(d *config.UnusedKafkaDef, clusterDefaults, node map[string]string) configEntry {
	var syn []config.Synonym
	if v, ok := node[d.Name]; ok {
		syn = append(syn, config.Synonym{Name: d.Name, Value: v, Source: config.SourceDynamicBroker})
	}
	if v, ok := clusterDefaults[d.Name]; ok {
		syn = append(syn, config.Synonym{Name: d.Name, Value: v, Source: config.SourceDynamicDefault})
	}
	if d.Default != nil {
		syn = append(syn, config.Synonym{Name: d.Name, Value: *d.Default, Source: config.SourceDefault})
	}
	e := configEntry{name: d.Name, source: config.SourceDefault, null: true, readOnly: d.ReadOnly, sensitive: d.Sensitive,
		typ: d.Type, doc: "Kafka's " + d.Name + ": Strand does not act on it (" + d.Why + ").", synonyms: syn}
	if len(syn) > 0 {
		e.value, e.source, e.null = syn[0].Value, syn[0].Source, false
	}
	return e
}

// clusterDefaultEntries describes the cluster-wide dynamic configs: as in
// Kafka, only those set, each with its cluster-level synonym alone.
func (l configLayers) clusterDefaultEntries(keys []string) []configEntry {
	var out []configEntry
	for i := range config.BrokerDefs {
		d := &config.BrokerDefs[i]
		v, ok := l.cluster[d.Name]
		if !ok || !wanted(keys, d.Name) {
			continue
		}
		syn := []config.Synonym{{Name: d.Name, Value: v, Source: config.SourceDynamicDefault}}
		out = append(out, configEntry{name: d.Name, value: v, source: config.SourceDynamicDefault,
			readOnly: !d.Dynamic(), typ: d.Type, doc: d.Doc, synonyms: syn})
	}
	for i := range config.UnusedKafkaDefs {
		d := &config.UnusedKafkaDefs[i]
		if _, ok := l.cluster[d.Name]; ok && wanted(keys, d.Name) {
			e := unusedEntry(d, l.cluster, nil)
			e.synonyms = e.synonyms[:1]
			out = append(out, e)
		}
	}
	for name := range l.cluster {
		if wanted(keys, name) && customConfig(name) {
			out = append(out, customEntry(name, config.SourceDynamicDefault))
		}
	}
	slices.SortFunc(out, func(a, b configEntry) int { return strings.Compare(a.name, b.name) })
	return out
}

// groupEntries describes a consumer group's configs (Kafka's GROUP
// resource): the group's own value (GROUP_CONFIG), else the broker
// config's value in force (DEFAULT_CONFIG, under the broker config's
// name), or Kafka's default where there is no broker config.
func (l configLayers) groupEntries(overrides map[string]string, keys []string) []configEntry {
	var out []configEntry
	for i := range config.GroupDefs {
		d := &config.GroupDefs[i]
		if !wanted(keys, d.Name) {
			continue
		}
		def := config.Synonym{Name: d.Name, Source: config.SourceDefault}
		if d.Default != nil {
			def.Value = *d.Default
		}
		if name := config.GroupBrokerDefault(d.Name); name != "" {
			def.Name = name
			if bd, ok := config.LookupBrokerDef(name); ok {
				def.Value = config.BrokerSynonyms(bd, l.static, l.cluster, l.node)[0].Value
			} else if kd, ok := config.LookupUnusedKafkaDef(name); ok {
				def.Value = unusedEntry(kd, l.cluster, l.node).value
			}
		}
		syn := []config.Synonym{def}
		if v, ok := overrides[d.Name]; ok {
			syn = append([]config.Synonym{{Name: d.Name, Value: v, Source: config.SourceGroup}}, syn...)
		}
		doc := "Kafka's group config " + d.Name + "."
		if d.Name != config.GroupConsumerSessionTimeout && d.Name != config.GroupConsumerHeartbeatInterval {
			doc += " Strand does not act on it."
		}
		out = append(out, configEntry{name: d.Name, value: syn[0].Value, source: syn[0].Source, typ: d.Type,
			doc: doc, synonyms: syn})
	}
	return out
}

// clientMetricsEntries describes a client metrics subscription (KIP-714's
// CLIENT_METRICS resource) as Kafka does: each config set with its
// CLIENT_METRICS_CONFIG synonym, the others at their defaults.
func clientMetricsEntries(configs map[string]string, keys []string) []configEntry {
	var out []configEntry
	for _, d := range config.ClientMetricsDefs {
		if !wanted(keys, d.Name) {
			continue
		}
		e := configEntry{name: d.Name, value: *d.Default, source: config.SourceDefault, typ: d.Type,
			doc: "A client metrics subscription's " + d.Name + "."}
		if v, ok := configs[d.Name]; ok {
			e.value, e.source = v, config.SourceClientMetrics
			e.synonyms = []config.Synonym{{Name: d.Name, Value: v, Source: config.SourceClientMetrics}}
		}
		out = append(out, e)
	}
	return out
}

// loggerEntries describes this broker's loggers (BROKER_LOGGER): each
// one's level in force, as Kafka describes its log4j loggers.
func (b *Broker) loggerEntries(keys []string) []configEntry {
	levels := b.Loggers.Describe()
	var out []configEntry
	for _, name := range b.Loggers.Names() {
		if wanted(keys, name) {
			out = append(out, configEntry{name: name, value: levels[name], source: config.SourceBrokerLogger,
				typ: config.TypeUnknown, doc: ""})
		}
	}
	return out
}

// loggerResource checks the name of a BROKER_LOGGER resource: this
// broker's id.
func (b *Broker) loggerResource(name string) error {
	if name == "" {
		return newAPIError(errInvalidRequest, "Broker id must not be empty")
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return newAPIError(errInvalidRequest, "Broker id must be an integer, but it is: %s", name)
	}
	if int32(id) != b.Config.NodeID {
		return newAPIError(errInvalidRequest, "Unexpected broker id, expected %d but received %s", b.Config.NodeID, name)
	}
	if b.Loggers == nil {
		return unsupportedResource(kmsg.ConfigResourceTypeBrokerLogger)
	}
	return nil
}

// alterLoggers changes this broker's loggers' levels as Kafka does: every
// change is checked before any is made (SET a known logger to one of
// Kafka's levels, DELETE a logger's own level but the root's), APPEND and
// SUBTRACT are refused. Levels are not kept over a restart, as in Kafka.
func (b *Broker) alterLoggers(name string, validateOnly bool, changes []kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	if err := b.loggerResource(name); err != nil {
		return err
	}
	for _, c := range changes {
		var err error
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			err = b.Loggers.Check(c.Name, *c.Value)
		case kmsg.IncrementalAlterConfigOpDelete:
			err = b.Loggers.CheckReset(c.Name)
		default:
			return newAPIError(errInvalidRequest, "%s operation is not allowed for the BROKER_LOGGER resource", opName(c.Op))
		}
		if err != nil {
			return loggerError(err)
		}
	}
	if validateOnly {
		return nil
	}
	for _, c := range changes {
		var err error
		if c.Op == kmsg.IncrementalAlterConfigOpSet {
			err = b.Loggers.Set(c.Name, *c.Value)
		} else {
			err = b.Loggers.Reset(c.Name)
		}
		if err != nil {
			return loggerError(err)
		}
		b.Logger.Info("logger level changed", "logger", c.Name, "level", b.Loggers.Describe()[c.Name])
	}
	return nil
}

// loggerError is Kafka's answer to a refused logger change: the root's
// level removed is INVALID_REQUEST, the rest INVALID_CONFIG.
func loggerError(err error) error {
	msg := err.Error()
	for _, kind := range []error{logging.ErrResetRoot, logging.ErrUnknownLogger, logging.ErrBadLevel} {
		msg = strings.TrimPrefix(msg, kind.Error()+": ")
	}
	if errors.Is(err, logging.ErrResetRoot) {
		return newAPIError(errInvalidRequest, "%s", msg)
	}
	return newAPIError(config.ErrInvalidConfig, "%s", msg)
}

// brokerResource checks the name of a BROKER config resource: "" is the
// cluster-wide level; otherwise it must be this broker's id (Kafka answers
// for itself only).
func (b *Broker) brokerResource(name string) (perBroker bool, err error) {
	if name == "" {
		return false, nil
	}
	id, perr := strconv.ParseInt(name, 10, 32)
	if perr != nil {
		return false, newAPIError(errInvalidRequest, "Broker id must be an integer, but it is: %s", name)
	}
	if int32(id) != b.Config.NodeID {
		return false, newAPIError(errInvalidRequest, "Unexpected broker id, expected %d or empty string, but received %s",
			b.Config.NodeID, name)
	}
	return true, nil
}

// unsupportedResource is the answer for config resource types other than
// TOPIC and BROKER.
func unsupportedResource(t kmsg.ConfigResourceType) error {
	return newAPIError(errInvalidRequest, "Unsupported resource type: %s", resourceTypeName(t))
}

func resourceTypeName(t kmsg.ConfigResourceType) string {
	switch t {
	case kmsg.ConfigResourceTypeTopic:
		return "TOPIC"
	case kmsg.ConfigResourceTypeBroker:
		return "BROKER"
	case kmsg.ConfigResourceTypeBrokerLogger:
		return "BROKER_LOGGER"
	case kmsg.ConfigResourceTypeClientMetrics:
		return "CLIENT_METRICS"
	case kmsg.ConfigResourceTypeGroupConfig:
		return "GROUP"
	}
	return "UNKNOWN(" + strconv.Itoa(int(t)) + ")"
}

// alterConfigs replaces the config overrides of one resource (a topic, or
// a BROKER level) with what change makes of the current ones, under
// configMu. inForce gives a config's value in force at that level (for
// APPEND and SUBTRACT on a config not set there).
func (b *Broker) alterConfigs(typ kmsg.ConfigResourceType, name string, validateOnly bool,
	change func(current map[string]string, inForce func(key string) string) (map[string]string, error)) error {
	configMu.Lock()
	defer configMu.Unlock()
	layers := b.configLayers()
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if err := cluster.ValidateTopicName(name); err != nil {
			return err
		}
		t, ok := b.Cluster.Topic(name)
		if !ok {
			return newAPIError(cluster.ErrUnknownTopic, "The topic '%s' does not exist.", name)
		}
		next, err := change(cloneConfigs(t.Configs), func(key string) string {
			if d, ok := config.LookupTopicDef(key); ok {
				return config.TopicSynonyms(d, t.Configs, layers.static, layers.cluster, layers.node)[0].Value
			}
			return ""
		})
		if err != nil {
			return err
		}
		return b.Topics.SetTopicConfigs(name, next, validateOnly)

	case kmsg.ConfigResourceTypeBroker:
		perBroker, err := b.brokerResource(name)
		if err != nil {
			return err
		}
		current, node := layers.cluster, map[string]string(nil)
		if perBroker {
			current, node = layers.node, layers.node
		}
		next, err := change(cloneConfigs(current), func(key string) string {
			if d, ok := config.LookupBrokerDef(key); ok {
				return config.BrokerSynonyms(d, layers.static, layers.cluster, node)[0].Value
			}
			if d, ok := config.LookupUnusedKafkaDef(key); ok {
				return unusedEntry(d, layers.cluster, node).value
			}
			return ""
		})
		if err != nil {
			return err
		}
		if !perBroker {
			return brokerConfigError(b.Topics.SetBrokerConfigs(next, validateOnly))
		}
		nodes, ok := b.Topics.(nodeConfigAdmin)
		if !ok {
			return newAPIError(errInvalidRequest, "Per-broker dynamic configs are not supported; use the cluster-wide level (resource name \"\").")
		}
		return brokerConfigError(nodes.SetNodeConfigs(b.Config.NodeID, next, validateOnly))

	case kmsg.ConfigResourceTypeGroupConfig:
		current := b.Cluster.GroupConfigs(name)
		next, err := change(cloneConfigs(current), func(key string) string {
			for _, e := range layers.groupEntries(current, []string{key}) {
				return e.value
			}
			return ""
		})
		if err != nil {
			return err
		}
		if err := config.CheckGroupConfigs(next, layers.effective()); err != nil {
			return err
		}
		if validateOnly {
			return nil
		}
		return b.Cluster.SetGroupConfigs(name, next)

	case kmsg.ConfigResourceTypeClientMetrics:
		current := b.Cluster.ClientMetrics(name)
		next, err := change(cloneConfigs(current), func(key string) string {
			for _, e := range clientMetricsEntries(current, []string{key}) {
				return e.value
			}
			return ""
		})
		if err != nil {
			return err
		}
		if err := config.CheckClientMetrics(next); err != nil {
			return err
		}
		if validateOnly {
			return nil
		}
		return b.Cluster.SetClientMetrics(name, next)
	}
	return unsupportedResource(typ)
}

// brokerConfigError is a refused broker config as Kafka answers it:
// INVALID_REQUEST, a value's error naming the config and the value, a
// config that does not change at run time listed.
func brokerConfigError(err error) error {
	if !errors.Is(err, config.ErrInvalidConfig) && !errors.Is(err, config.ErrUnknownConfig) {
		return err
	}
	var ve *config.ValueError
	var se *config.StaticConfigError
	switch {
	case errors.As(err, &ve):
		return newAPIError(errInvalidRequest, "%s", ve.Error())
	case errors.As(err, &se):
		return newAPIError(errInvalidRequest, "%s", se.Error())
	}
	return newAPIError(errInvalidRequest, "%s", err.Error())
}

func cloneConfigs(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	maps.Copy(out, m)
	return out
}
