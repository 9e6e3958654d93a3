package link

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/internal/cluster"
	"github.com/strandlog/strand/internal/model"
)

// ACLs. With SyncACLs, the source's ACLs of the link's mirror topics and
// of the groups its group filter matches (literal resource names: a
// prefixed or wildcard ACL at the source may reach beyond what is
// mirrored) are created here, so that the clients that move find the same
// rights. ACLs are only added: one deleted at the source stays here until
// removed here (strand acl delete), since this cluster's own ACLs cannot
// be told from copied ones.

// Kafka's ACL codes used here.
const (
	aclResourceAny   = 1
	aclResourceTopic = 2
	aclResourceGroup = 3
	aclPatternAny    = 1
	aclPatternLit    = 3
	aclOperationAny  = 1
	aclPermissionAny = 1
)

// ACLStore is the metadata's ACLs (cluster.Store).
type ACLStore interface {
	ACLs() ([]model.ACLBinding, int64)
	AlterACLs(creations, deletions []model.ACLBinding) error
}

// syncACLs copies the source's ACLs of what the link mirrors; it returns
// how many it created.
func (r *runner) syncACLs(l cluster.Link) (int, error) {
	store, ok := r.m.cfg.Store.(ACLStore)
	if !ok {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = aclResourceAny, aclPatternAny
	req.Operation, req.PermissionType = aclOperationAny, aclPermissionAny
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if resp.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
		}
		return 0, err
	}
	matchGroup, err := l.Groups.Compile()
	if err != nil {
		return 0, err
	}
	mirrored := map[string]bool{}
	for _, t := range r.m.mirrorTopics(l.Name, nil) {
		mirrored[t.Name] = true
	}
	have, _ := store.ACLs()
	var create []model.ACLBinding
	for _, res := range resp.Resources {
		if res.ResourcePatternType != aclPatternLit {
			continue
		}
		switch {
		case int8(res.ResourceType) == aclResourceTopic && mirrored[res.ResourceName]:
		case int8(res.ResourceType) == aclResourceGroup && len(l.Groups.Include) > 0 && matchGroup(res.ResourceName):
		default:
			continue
		}
		for _, a := range res.ACLs {
			b := model.ACLBinding{ResourceType: int8(res.ResourceType), ResourceName: res.ResourceName,
				PatternType: int8(res.ResourcePatternType), Principal: a.Principal, Host: a.Host,
				Operation: int8(a.Operation), Permission: int8(a.PermissionType)}
			if !slices.Contains(have, b) && !slices.Contains(create, b) {
				create = append(create, b)
			}
		}
	}
	if len(create) == 0 {
		return 0, nil
	}
	if err := store.AlterACLs(create, nil); err != nil {
		return 0, err
	}
	return len(create), nil
}
