package link

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/strandlog/strand/internal/cluster"
)

// LinkStore is the metadata's side of creating, changing and deleting
// links (cluster.Store).
type LinkStore interface {
	CreateLink(l cluster.Link) (cluster.Link, error)
	AlterLink(l cluster.Link) error
	DeleteLink(name string) error
}

// ErrSourceIsSelf: a link whose source is this cluster.
var ErrSourceIsSelf = errors.New("link: the source is this cluster")

// Create checks a new link and adds it. A source that answers with this
// cluster's id is refused; one that does not answer yet is taken (it may be
// down for now), and its status says so.
func (m *Manager) Create(ctx context.Context, store LinkStore, l cluster.Link) (cluster.Link, error) {
	if err := l.Validate(); err != nil {
		return cluster.Link{}, err
	}
	if _, ok := m.cfg.Store.Link(l.Name); ok {
		return cluster.Link{}, fmt.Errorf("%w: %s", cluster.ErrLinkExists, l.Name)
	}
	cl, err := sourceClient(l.Source, m.cfg.ClientOpts...)
	if err != nil {
		return cluster.Link{}, fmt.Errorf("%w: %v", cluster.ErrInvalidLink, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	id, _, err := sourceMetadata(sctx, cl)
	cancel()
	cl.Close()
	if err == nil && id != "" && id == m.cfg.Store.ClusterID() {
		return cluster.Link{}, fmt.Errorf("%w: %s answers with this cluster's id %s", ErrSourceIsSelf, l.Source.BootstrapServers[0], id)
	}
	if err != nil {
		m.logger.Warn("the new link's source does not answer yet", "link", l.Name, "err", err)
	}
	l.CreatedAtMs = m.cfg.Now().UnixMilli()
	out, err := store.CreateLink(l)
	if err != nil {
		return cluster.Link{}, err
	}
	out.Source = out.Source.Redacted()
	return out, nil
}

// SetPaused pauses a link (its mirrors stay, read-only, and stop
// following the source) or resumes it.
func (m *Manager) SetPaused(store LinkStore, name string, paused bool) error {
	l, ok := m.cfg.Store.Link(name)
	if !ok {
		return fmt.Errorf("%w: %s", cluster.ErrUnknownLink, name)
	}
	if paused {
		if err := m.keepsMembers(name); err != nil {
			return err
		}
	}
	l.Paused = paused
	if err := store.AlterLink(l); err != nil {
		return err
	}
	if paused {
		// Stopped before the answer, so that nothing the source writes
		// after it is mirrored; a later Set sees the link paused.
		m.mu.Lock()
		r := m.runners[name]
		delete(m.runners, name)
		m.mu.Unlock()
		if r != nil {
			r.stop()
		}
	}
	return nil
}

// Alter changes a link's settings: patch is JSON of the fields to change
// (a JSON merge of cluster.Link: fields left out keep their values, the
// source's secrets included). Its name and creation time stay.
func (m *Manager) Alter(store LinkStore, name string, patch []byte) (cluster.Link, error) {
	l, ok := m.cfg.Store.Link(name)
	if !ok {
		return cluster.Link{}, fmt.Errorf("%w: %s", cluster.ErrUnknownLink, name)
	}
	dec := json.NewDecoder(bytes.NewReader(patch))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return cluster.Link{}, fmt.Errorf("%w: %v", cluster.ErrInvalidLink, err)
	}
	l.Name = name
	if !l.GroupPassThrough {
		if err := m.keepsMembers(name); err != nil {
			return cluster.Link{}, err
		}
	}
	if err := store.AlterLink(l); err != nil {
		return cluster.Link{}, err
	}
	l.Source = l.Source.Redacted()
	return l, nil
}

// keepsMembers refuses to stop passing groups through while members of
// them are connected here: their next requests would be served by this
// cluster's coordinator while the source's group still counts them, and
// their partitions would be owned on both sides.
func (m *Manager) keepsMembers(name string) error {
	if n := m.forwardedMembers(name); n > 0 {
		return fmt.Errorf("%w: %d members of groups link %s passes through are connected to this broker: "+
			"move the groups home (strand link promote-group) or stop those consumers first", cluster.ErrLinkInUse, n, name)
	}
	return nil
}

// List returns the links, their sources' secrets hidden.
func (m *Manager) List() []cluster.Link {
	ls := m.cfg.Store.Links()
	for i := range ls {
		ls[i].Source = ls[i].Source.Redacted()
	}
	return ls
}
