package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// validateIn is validate, with a member's destination checked among the
// stored loops as the controller checks it (loop.MembershipProblems): the
// chain of destinations from loopID is read from store.
func validateIn(ctx context.Context, store paramsStore, loopID string, attrs map[string]any) validity {
	v := validate(loopID, attrs)
	if !v.Valid || v.Params == nil || v.Params.Member == nil {
		return v
	}
	fe, err := membership(ctx, store, loopID, attrs)
	if err != nil {
		fe = &loop.FieldError{Field: loop.AttrDestination, Reason: fmt.Sprintf("cannot read the destination's PARAMS: %v", err)}
	}
	if fe != nil {
		return validity{Loop: loopID, Reasons: []loop.FieldError{*fe}}
	}
	return v
}

// membership reads the chain of destinations from loopID (at most 16 links)
// and returns loopID's refusal, nil when its destination is sound.
func membership(ctx context.Context, store paramsStore, loopID string, attrs map[string]any) (*loop.FieldError, error) {
	loops := map[string]map[string]any{loopID: attrs}
	cur := attrs
	for range 16 {
		dest, _ := cur[loop.AttrDestination].(string)
		if dest == "" {
			break
		}
		if _, seen := loops[dest]; seen {
			break
		}
		next, err := store.ReadParams(ctx, dest)
		if errors.Is(err, protocol.ErrNotFound) {
			loops[dest] = nil
			break
		}
		if err != nil {
			return nil, err
		}
		loops[dest], cur = next, next
	}
	if fe, ok := loop.MembershipProblems(loops)[loopID]; ok {
		return &fe, nil
	}
	return nil, nil
}
