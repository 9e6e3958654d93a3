package config

import (
	"fmt"
	"net"
	"slices"
	"strings"
)

// Listener is one of a broker's Kafka listeners: a name, the security
// protocol its connections speak, where it listens and what it tells
// clients to connect to.
type Listener struct {
	Name      string // its name in listeners: PLAINTEXT, CLIENT, INTERNAL, ...
	Protocol  string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	Addr      string // host:port to listen on
	Advertise string // host:port clients are told to connect to; Addr when empty
}

// AdvertisedHostPort is the advertised address split, which clients must
// be able to connect to.
func (l Listener) AdvertisedHostPort() (string, int32, error) {
	return splitAdvertised(l.AdvertisedAddr())
}

// TLS says whether the listener serves TLS (SSL or SASL_SSL).
func (l Listener) TLS() bool { return l.Protocol == "SSL" || l.Protocol == "SASL_SSL" }

// SASL says whether its clients authenticate with SASL before being served.
func (l Listener) SASL() bool { return strings.HasPrefix(l.Protocol, "SASL_") }

// AdvertisedAddr is what the listener tells clients to connect to.
func (l Listener) AdvertisedAddr() string {
	if l.Advertise != "" {
		return l.Advertise
	}
	return l.Addr
}

// securityProtocols are Kafka's security protocols Strand serves.
var securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// Listeners are every client and inter-broker listener, the first one (in
// Listen, ListenerName and ListenerProtocol) first.
func (b Broker) Listeners() []Listener {
	name := b.ListenerName
	if name == "" {
		name = b.ListenerProtocol
	}
	return append([]Listener{{Name: name, Protocol: b.ListenerProtocol, Addr: b.Listen, Advertise: b.Advertise}},
		b.MoreListeners...)
}

// WithListeners returns b with the listeners ls, in the order of
// Listeners (the broker's, with the addresses it resolved once bound).
func (b Broker) WithListeners(ls []Listener) Broker {
	first := ls[0]
	b.Listen, b.ListenerName, b.ListenerProtocol, b.Advertise = first.Addr, first.Name, first.Protocol, first.Advertise
	b.MoreListeners = slices.Clone(ls[1:])
	return b
}

// InterBroker is the listener other brokers connect to
// (inter.broker.listener.name; the first listener when unset).
func (b Broker) InterBroker() Listener {
	ls := b.Listeners()
	for _, l := range ls {
		if strings.EqualFold(l.Name, b.InterBrokerListener) {
			return l
		}
	}
	return ls[0]
}

// UsesTLS says whether some listener serves TLS, and so needs the
// broker's certificate.
func (b Broker) UsesTLS() bool {
	return slices.ContainsFunc(b.Listeners(), Listener.TLS) || b.ControllerTLS()
}

// ControllerTLS says whether the metadata quorum's traffic goes over
// mutual TLS.
func (b Broker) ControllerTLS() bool {
	return b.QuorumVoters != "" && strings.EqualFold(b.ControllerProtocol, "SSL")
}

// UsesSASL says whether some listener authenticates its clients with SASL.
func (b Broker) UsesSASL() bool { return slices.ContainsFunc(b.Listeners(), Listener.SASL) }

// controllerNames are the names controller.listener.names gives, upper case.
func (b Broker) controllerNames() []string {
	var out []string
	for _, n := range strings.Split(b.ControllerListenerNames, ",") {
		if n = strings.ToUpper(strings.TrimSpace(n)); n != "" {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		out = []string{"CONTROLLER"}
	}
	return out
}

// ApplyListeners reads Kafka's listener settings into b: listeners
// (NAME://host:port,...), advertised.listeners (NAME://host:port for some
// of them) and listener.security.protocol.map (NAME:PROTOCOL,...; a
// listener named after a protocol speaks it unless the map says
// otherwise). The listener of controller.listener.names takes the metadata
// quorum's traffic; the first other one goes in Listen, the rest in
// MoreListeners. Empty strings leave b as it is.
func ApplyListeners(b *Broker, listeners, advertised, protocolMap string) error {
	protocols := map[string]string{}
	for _, e := range SplitList(protocolMap) {
		name, proto, ok := strings.Cut(e, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" || !slices.Contains(securityProtocols, proto) {
			return fmt.Errorf("listener.security.protocol.map: %q is not NAME:PROTOCOL with PROTOCOL one of %s",
				e, strings.Join(securityProtocols, ", "))
		}
		protocols[name] = proto
		if slices.Contains(b.controllerNames(), name) {
			b.ControllerProtocol = proto
		}
	}
	protocolOf := func(name string) (string, error) {
		if p, ok := protocols[name]; ok {
			return p, nil
		}
		if slices.Contains(securityProtocols, name) {
			return name, nil
		}
		if slices.Contains(b.controllerNames(), name) {
			return b.ControllerProtocol, nil
		}
		return "", fmt.Errorf("listener %s has no security protocol: name it in listener.security.protocol.map (--listener-security-protocol-map %s:SASL_SSL)", name, name)
	}
	parsed, err := parseListenerList(listeners, "listeners")
	if err != nil {
		return err
	}
	var clients []Listener
	for _, l := range parsed {
		if slices.Contains(b.controllerNames(), l.Name) {
			if _, err := protocolOf(l.Name); err != nil {
				return err
			}
			b.ControllerListen = l.Addr
			continue
		}
		if l.Protocol, err = protocolOf(l.Name); err != nil {
			return err
		}
		clients = append(clients, l)
	}
	if len(clients) > 0 {
		first := clients[0]
		b.Listen, b.ListenerName, b.ListenerProtocol, b.Advertise = first.Addr, first.Name, first.Protocol, ""
		b.MoreListeners = clients[1:]
	} else if len(protocols) > 0 {
		// The map alone renames nothing, but may change a protocol.
		ls := b.Listeners()
		for i := range ls {
			if ls[i].Protocol, err = protocolOf(strings.ToUpper(ls[i].Name)); err != nil {
				return err
			}
		}
		b.ListenerProtocol, b.MoreListeners = ls[0].Protocol, ls[1:]
	}
	adv, err := parseListenerList(advertised, "advertised.listeners")
	if err != nil {
		return err
	}
	for _, a := range adv {
		if slices.Contains(b.controllerNames(), a.Name) {
			continue // peers find controllers through controller.quorum.voters
		}
		switch i := slices.IndexFunc(b.MoreListeners, func(l Listener) bool { return strings.EqualFold(l.Name, a.Name) }); {
		case strings.EqualFold(b.Listeners()[0].Name, a.Name):
			b.Advertise = a.Addr
		case i >= 0:
			b.MoreListeners[i].Advertise = a.Addr
		default:
			return fmt.Errorf("advertised.listeners: %s is not a listener in listeners", a.Name)
		}
	}
	return nil
}

// parseListenerList reads NAME://host:port,... with names upper-cased.
func parseListenerList(list, setting string) ([]Listener, error) {
	var out []Listener
	for _, e := range SplitList(list) {
		name, addr, ok := strings.Cut(e, "://")
		name = strings.ToUpper(strings.TrimSpace(name))
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("%s: %q is not NAME://host:port", setting, e)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", setting, e, err)
		}
		if slices.ContainsFunc(out, func(l Listener) bool { return l.Name == name }) {
			return nil, fmt.Errorf("%s: listener %s named twice", setting, name)
		}
		out = append(out, Listener{Name: name, Addr: addr})
	}
	return out, nil
}

// SplitList reads a list config's value: comma separated, blanks
// dropped.
func SplitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// validateListeners checks the listeners and what inter-broker traffic
// needs of them.
func (b Broker) validateListeners() error {
	seen := map[string]bool{}
	for _, l := range b.Listeners() {
		name := strings.ToUpper(l.Name)
		switch {
		case seen[name]:
			return fmt.Errorf("listener %s named twice", l.Name)
		case !slices.Contains(securityProtocols, l.Protocol):
			return fmt.Errorf("listener %s: security protocol %q: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", l.Name, l.Protocol)
		case slices.Contains(b.controllerNames(), name):
			return fmt.Errorf("listener %s is a controller listener (controller.listener.names): it cannot take clients too", l.Name)
		}
		seen[name] = true
		if _, _, err := net.SplitHostPort(l.Addr); err != nil {
			return fmt.Errorf("listener %s: listen address %q: %w", l.Name, l.Addr, err)
		}
		if l.Advertise != "" {
			if _, _, err := splitAdvertised(l.Advertise); err != nil {
				return fmt.Errorf("listener %s: %w", l.Name, err)
			}
		}
	}
	if b.InterBrokerListener != "" && !seen[strings.ToUpper(b.InterBrokerListener)] {
		return fmt.Errorf("inter.broker.listener.name %s: not a listener in listeners", b.InterBrokerListener)
	}
	switch p := strings.ToUpper(b.ControllerProtocol); {
	case p != "PLAINTEXT" && p != "SSL":
		return fmt.Errorf("controller listener %s: the metadata quorum's traffic is served as PLAINTEXT or SSL (mutual TLS), not %s",
			b.controllerNames()[0], b.ControllerProtocol)
	case p == "SSL" && b.QuorumVoters != "" && (b.SSLKeystore == "" || b.SSLTruststore == ""):
		return fmt.Errorf("controller listener %s is SSL: the quorum's members present and check certificates, so it needs "+
			"ssl.keystore.location and ssl.truststore.location", b.controllerNames()[0])
	}
	ib := b.InterBroker()
	if !ib.SASL() || b.QuorumVoters == "" {
		return nil
	}
	// In a cluster the brokers authenticate to each other as a user of
	// the cluster's credentials.
	mech := b.InterBrokerMechanism()
	switch {
	case b.InterBrokerSASLUser == "" || b.InterBrokerSASLPassword == "":
		return fmt.Errorf("inter-broker listener %s is %s: the brokers need a user to authenticate to each other as: "+
			"inter.broker.sasl.username and inter.broker.sasl.password", ib.Name, ib.Protocol)
	case !slices.Contains([]string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, mech):
		return fmt.Errorf("sasl.mechanism.inter.broker.protocol %q: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
	case !slices.Contains(b.SASLMechanisms, mech):
		return fmt.Errorf("sasl.mechanism.inter.broker.protocol %s is not among sasl.enabled.mechanisms %v", mech, b.SASLMechanisms)
	}
	return nil
}

// InterBrokerMechanism is the SASL mechanism brokers authenticate to each
// other with: sasl.mechanism.inter.broker.protocol, or the strongest of
// the enabled password mechanisms.
func (b Broker) InterBrokerMechanism() string {
	if b.InterBrokerSASLMechanism != "" {
		return strings.ToUpper(b.InterBrokerSASLMechanism)
	}
	for _, m := range []string{"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"} {
		if slices.Contains(b.SASLMechanisms, m) {
			return m
		}
	}
	return ""
}

// listenersSetting says the listeners as Kafka's listeners does, the
// controller's last.
func (b Broker) listenersSetting(advertised bool) string {
	var parts []string
	for _, l := range b.Listeners() {
		addr := l.Addr
		if advertised {
			addr = l.AdvertisedAddr()
		}
		parts = append(parts, l.Name+"://"+addr)
	}
	if !advertised && b.ControllerListen != "" {
		parts = append(parts, b.controllerNames()[0]+"://"+b.ControllerListen)
	}
	return strings.Join(parts, ",")
}

// protocolMapSetting says listener.security.protocol.map.
func (b Broker) protocolMapSetting() string {
	var parts []string
	for _, l := range b.Listeners() {
		parts = append(parts, l.Name+":"+l.Protocol)
	}
	for _, n := range b.controllerNames() {
		parts = append(parts, n+":"+strings.ToUpper(b.ControllerProtocol))
	}
	return strings.Join(parts, ",")
}
