package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/strandlog/strand/internal/inspect"
)

// errActionsOff is the answer to an action while they are off.
var errActionsOff = errors.New("actions are off: start the broker with --admin-console-actions to allow them")

// action runs a change to a group once its request passes: actions on,
// a form from this console (same origin), the confirmation typed (the
// group's name), and a group without members.
func (c *Console) action(w http.ResponseWriter, r *http.Request, change func(ctx context.Context, group string)) {
	group := r.PathValue("group")
	switch {
	case !c.cfg.Actions:
		c.fail(w, http.StatusForbidden, errActionsOff)
		return
	case !sameOrigin(r):
		c.fail(w, http.StatusForbidden, errors.New("the request came from another site"))
		return
	case r.PostFormValue("confirm") != group:
		c.fail(w, http.StatusBadRequest, fmt.Errorf("not confirmed: type the group's name, %s, to confirm", group))
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	if err := inspect.CheckEmpty(ctx, c.adm, group); err != nil {
		c.fail(w, http.StatusConflict, err)
		return
	}
	change(ctx, group)
}

// sameOrigin says whether a form was posted from a page of this host; a
// request without an Origin header (not from a browser) passes.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// groupActions shows the forms of a group's actions, when actions are on.
func (c *Console) groupActions(w http.ResponseWriter, r *http.Request) {
	if !c.cfg.Actions {
		c.fail(w, http.StatusForbidden, errActionsOff)
		return
	}
	group := r.PathValue("group")
	c.write(w, "Actions on "+group, "groups", func(d *doc) { viewGroupActions(d, group) })
}

func (c *Console) resetGroup(w http.ResponseWriter, r *http.Request) {
	c.action(w, r, func(ctx context.Context, group string) {
		to := r.PostFormValue("to")
		os, err := inspect.ResetTargets(ctx, c.adm, group, r.PostFormValue("topic"), to)
		if err != nil {
			c.fail(w, http.StatusBadRequest, err)
			return
		}
		res, err := c.adm.CommitOffsets(ctx, group, os)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			c.fail(w, http.StatusBadGateway, err)
			return
		}
		n := len(os.Sorted())
		c.cfg.Logger.Info("console: reset a group's offsets", "group", group, "to", to, "partitions", n)
		http.Redirect(w, r, "/groups/"+url.PathEscape(group)+"?done="+url.QueryEscape(fmt.Sprintf("reset %d offsets to %s", n, to)),
			http.StatusSeeOther)
	})
}

func (c *Console) deleteGroup(w http.ResponseWriter, r *http.Request) {
	c.action(w, r, func(ctx context.Context, group string) {
		res, err := c.adm.DeleteGroups(ctx, group)
		if err == nil {
			err = res[group].Err
		}
		if err != nil {
			c.fail(w, http.StatusBadGateway, err)
			return
		}
		c.cfg.Logger.Info("console: deleted a group", "group", group)
		c.write(w, "Deleted", "groups", func(d *doc) {
			d.h(`<h1>Done</h1><p class="ok" id="done">deleted group %s</p><p><a href="/groups">Groups</a></p>`, group)
		})
	})
}
