package ddbloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/adapter/internal/ddbitem"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// maxBatchGet is BatchGetItem's limit on keys in one request.
const maxBatchGet = 100

var _ loop.TickStore = (*Store)(nil)

// ReadParams returns the raw attributes of the PARAMS item of loopID (pk and
// sk removed), or an error wrapping protocol.ErrNotFound.
func (s *Store) ReadParams(ctx context.Context, loopID string) (map[string]any, error) {
	item, err := s.get(ctx, loopID, SortParams)
	if err != nil {
		return nil, err
	}
	a, err := paramsAttrs(item)
	if err != nil {
		return nil, ddbitem.Wrap("decode PARAMS", loopID, err)
	}
	return a, nil
}

// paramsAttrs converts a PARAMS item, without its keys, to the Go values
// loop.DecodeParams reads: attributevalue's string (S), float64 (N), bool
// (BOOL), map[string]any (M), []any (L), nil (NULL), []byte (B).
func paramsAttrs(item map[string]types.AttributeValue) (map[string]any, error) {
	var a map[string]any
	if err := attributevalue.UnmarshalMap(item, &a); err != nil {
		return nil, err
	}
	delete(a, "pk")
	delete(a, "sk")
	return a, nil
}

// WriteParams replaces the PARAMS item of loopID with attrs, unchecked (as
// an operator's put-item would): callers validate with loop.DecodeParams
// first when they want to refuse a bad edit before it is stored.
func (s *Store) WriteParams(ctx context.Context, loopID string, attrs map[string]any) error {
	item, err := toItem(attrs)
	if err != nil {
		return ddbitem.Wrap("encode PARAMS", loopID, err)
	}
	maps := ddbitem.Key(loopID, SortParams)
	for k, v := range maps {
		item[k] = v
	}
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return ddbitem.Wrap("write PARAMS", loopID, err)
	}
	return nil
}

// WriteParamsIf replaces the PARAMS item of loopID with attrs and the edit
// version read+1, on condition that the stored item's edit version is still
// read (read 0: the item has none, or does not exist). A failed condition
// writes nothing and returns an error wrapping loop.ErrParamsConflict.
func (s *Store) WriteParamsIf(ctx context.Context, loopID string, attrs map[string]any, read int64) error {
	item, err := toItem(attrs)
	if err != nil {
		return ddbitem.Wrap("encode PARAMS", loopID, err)
	}
	for k, v := range ddbitem.Key(loopID, SortParams) {
		item[k] = v
	}
	item[loop.AttrEditVersion] = ddbitem.Integer(read + 1)
	in := &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ExpressionAttributeNames: map[string]string{"#v": loop.AttrEditVersion}}
	if read == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(#v)")
	} else {
		in.ConditionExpression = aws.String("#v = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": ddbitem.Integer(read)}
	}
	_, err = s.api.PutItem(ctx, in)
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return fmt.Errorf("dynamodb write PARAMS loop %q at edit version %d: %w", loopID, read, loop.ErrParamsConflict)
	}
	if err != nil {
		return ddbitem.Wrap("write PARAMS", loopID, err)
	}
	return nil
}

// ReadStatus returns the PARAMS_STATUS item of loopID, or an error wrapping
// protocol.ErrNotFound.
func (s *Store) ReadStatus(ctx context.Context, loopID string) (loop.ParamsStatus, error) {
	return read(ctx, s, loopID, SortParamsStatus, decodeStatus)
}

// ReadState returns the STATE item of loopID, or an error wrapping
// protocol.ErrNotFound.
func (s *Store) ReadState(ctx context.Context, loopID string) (loop.State, error) {
	return read(ctx, s, loopID, SortState, decodeState)
}

// read gets the item sk of loopID and decodes it; a decoding error names
// the item ("decode STATE").
func read[T any](ctx context.Context, s *Store, loopID, sk string, decode func(map[string]types.AttributeValue) (T, error)) (T, error) {
	item, err := s.get(ctx, loopID, sk)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := decode(item)
	if err != nil {
		return v, ddbitem.Wrap("decode "+sk, loopID, err)
	}
	return v, nil
}

func (s *Store) get(ctx context.Context, loopID, sk string) (map[string]types.AttributeValue, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            ddbitem.Key(loopID, sk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, ddbitem.Wrap("read "+sk, loopID, err)
	}
	if len(out.Item) == 0 {
		return nil, ddbitem.Wrap("read "+sk, loopID, protocol.ErrNotFound)
	}
	return out.Item, nil
}

// LoadLoops lists every loop that has a PARAMS item (a query on the by-sk
// index, paginated) and reads their STATE items consistently (BatchGetItem,
// 100 keys a call). A STATE item that does not decode sets its snapshot's
// Err and fails no other loop. A tick over N loops costs about ceil(N/1000) queries and
// ceil(N/100) batch reads, plus the consumers' leases: one query per loop
// (ddbstore.Store.LoopPeers) and one for every loop's version 1 leases
// (ddbstore.Store.Peers), each more only past 1 MB of leases.
func (s *Store) LoadLoops(ctx context.Context) ([]loop.Snapshot, error) {
	var snaps []loop.Snapshot
	err := ddbitem.QueryBySort(ctx, s.api, s.table, SortParams, "PARAMS", func(item map[string]types.AttributeValue) error {
		id, err := ddbitem.GetS(item, "pk")
		if err != nil {
			return nil // not a loop's PARAMS item
		}
		sn := loop.Snapshot{Loop: id}
		if sn.Params, err = paramsAttrs(item); err != nil {
			sn.Err = ddbitem.Wrap("decode PARAMS", id, err)
		}
		snaps = append(snaps, sn)
		return nil
	})
	if err != nil {
		return nil, err
	}
	byLoop := make(map[string]int, len(snaps))
	for i, sn := range snaps {
		byLoop[sn.Loop] = i
	}
	if err := s.loadPeers(ctx, snaps); err != nil {
		return nil, err
	}
	for start := 0; start < len(snaps); start += maxBatchGet {
		keys := make([]map[string]types.AttributeValue, 0, maxBatchGet)
		for _, sn := range snaps[start:min(start+maxBatchGet, len(snaps))] {
			keys = append(keys, ddbitem.Key(sn.Loop, SortState))
		}
		items, err := s.batchGet(ctx, keys)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			st, err := decodeState(item)
			i, ok := byLoop[st.Loop]
			switch {
			case !ok:
				// A STATE whose key does not decode, or of no listed loop.
			case err != nil:
				// One corrupt item fails its loop only.
				snaps[i].Err = fmt.Errorf("%w (delete the STATE item to restart the loop)", ddbitem.Wrap("decode STATE", st.Loop, err))
			default:
				snaps[i].State = &st
			}
		}
	}
	return snaps, nil
}

// batchGet reads keys consistently, retrying unprocessed keys.
func (s *Store) batchGet(ctx context.Context, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for attempt := 0; len(req) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(min(attempt, 6)) * 50 * time.Millisecond):
			}
		}
		if attempt > 20 {
			return nil, fmt.Errorf("dynamodb read STATE items: unprocessed keys after %d attempts", attempt)
		}
		out, err := s.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, fmt.Errorf("dynamodb read STATE items of %s: %w", s.table, err)
		}
		items = append(items, out.Responses[s.table]...)
		req = out.UnprocessedKeys
	}
	return items, nil
}

// CommitTick writes STATE (on condition that its version is still
// c.PrevVersion), RATE and PARAMS_STATUS in one TransactWriteItems call. A
// failed condition, or a concurrent transaction on the same items, returns
// an error wrapping loop.ErrConflict.
func (s *Store) CommitTick(ctx context.Context, c loop.Commit) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("dynamodb commit: %w", err)
	}
	id := c.State.Loop
	stateItem, err := encodeState(c.State)
	if err != nil {
		return ddbitem.Wrap("encode STATE", id, err)
	}
	put := &types.Put{TableName: aws.String(s.table), Item: stateItem}
	if c.PrevVersion == 0 {
		put.ConditionExpression = aws.String("attribute_not_exists(pk)")
	} else {
		put.ConditionExpression = aws.String("version = :v")
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": ddbitem.Integer(c.PrevVersion)}
	}
	items := []types.TransactWriteItem{{Put: put}}
	if c.Rate != nil {
		r := *c.Rate
		r.LegacyLive = s.legacy.live(id, c.State.TickAt)
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: ddbitem.EncodeRate(r)}})
	}
	if c.Status != nil {
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: encodeStatus(*c.Status)}})
	}
	_, err = s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil
	}
	var canceled *types.TransactionCanceledException
	if errors.As(err, &canceled) {
		for _, r := range canceled.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ConditionalCheckFailed", "TransactionConflict":
				return fmt.Errorf("dynamodb commit loop %q at version %d: %s: %w", id, c.PrevVersion, aws.ToString(r.Code), loop.ErrConflict)
			}
		}
	}
	var inProgress *types.TransactionInProgressException
	var tc *types.TransactionConflictException
	if errors.As(err, &inProgress) || errors.As(err, &tc) {
		return fmt.Errorf("dynamodb commit loop %q at version %d: %v: %w", id, c.PrevVersion, err, loop.ErrConflict)
	}
	return ddbitem.Wrap("commit tick", id, err)
}

func encodeState(st loop.State) (map[string]types.AttributeValue, error) {
	item := ddbitem.Key(st.Loop, SortState)
	item["version"] = ddbitem.Integer(st.Version)
	if st.Schema != 0 {
		item["schema"] = ddbitem.Integer(int64(st.Schema))
	}
	ddbitem.SetTime(item, "tick_at", st.TickAt)
	ddbitem.SetTime(item, "metric_at", st.MetricAt)
	ddbitem.SetNum(item, "measured", st.Measured)
	ddbitem.SetNum(item, "setpoint", st.Setpoint)
	ddbitem.SetNum(item, "rate", st.Rate)
	if st.Mode != "" {
		item["mode"] = ddbitem.Str(string(st.Mode))
	}
	item["stale"] = &types.AttributeValueMemberBOOL{Value: st.Stale}
	ddbitem.SetTime(item, "stale_since", st.StaleSince)
	ddbitem.SetNum(item, "p", st.Terms.P)
	ddbitem.SetNum(item, "i", st.Terms.I)
	ddbitem.SetNum(item, "d", st.Terms.D)
	ddbitem.SetNum(item, "ff", st.Terms.FF)
	item["saturated"] = &types.AttributeValueMemberBOOL{Value: st.Terms.Saturated}
	if st.Params != nil {
		if err := ddbitem.SetJSON(item, "params_valid", st.Params); err != nil {
			return nil, err
		}
	}
	item["params_fingerprint"] = ddbitem.Str(st.ParamsFingerprint)
	if len(st.Balance.Nodes) > 0 || st.Balance.Ticks != 0 {
		if err := ddbitem.SetJSON(item, "balance", st.Balance); err != nil {
			return nil, err
		}
	}
	if len(st.Drift.Samples) > 0 || st.Drift.ModelDrift {
		if err := ddbitem.SetJSON(item, "drift", st.Drift); err != nil {
			return nil, err
		}
		// model_drift is its own attribute, for a reader of the item.
		item["model_drift"] = &types.AttributeValueMemberBOOL{Value: st.Drift.ModelDrift}
	}
	if err := encodeDemand(item, st.Demand); err != nil {
		return nil, err
	}
	if err := errors.Join(encodeMapping(item, st.Mapping), encodeExperiment(item, st)); err != nil {
		return nil, err
	}
	if err := encodeSignals(item, st); err != nil {
		return nil, err
	}
	encodePause(item, st)
	return item, encodeReason(item, st)
}

func decodeState(item map[string]types.AttributeValue) (loop.State, error) {
	var st loop.State
	var err error
	if st.Loop, err = ddbitem.GetS(item, "pk"); err != nil {
		return st, err
	}
	r := ddbitem.NewReader(item)
	st.Version, st.Schema = int64(r.N("version")), int(r.OptN("schema", 0))
	st.TickAt, st.MetricAt = r.OptTS("tick_at"), r.OptTS("metric_at")
	st.Measured = r.OptN("measured", math.NaN())
	st.Setpoint, st.Rate = r.OptN("setpoint", 0), r.OptN("rate", 0)
	st.Mode = loop.Mode(r.OptS("mode"))
	st.Stale, st.StaleSince = r.OptBool("stale"), r.OptTS("stale_since")
	st.Terms.P, st.Terms.I, st.Terms.D, st.Terms.FF = r.OptN("p", 0), r.OptN("i", 0), r.OptN("d", 0), r.OptN("ff", 0)
	st.Terms.Saturated, st.Terms.Rate = r.OptBool("saturated"), st.Rate
	var legacy *control.State // schemas 1 and 2: the first signal's controller memory
	if ctrl := r.OptS("controller"); ctrl != "" {
		r.Add(json.Unmarshal([]byte(ctrl), &legacy))
	}
	var p loop.Params
	if r.OptJSON("params_valid", &p) {
		st.Params = &p
	}
	st.ParamsFingerprint = r.OptS("params_fingerprint")
	r.OptJSON("balance", &st.Balance)
	r.OptJSON("drift", &st.Drift)
	r.Add(decodeDemand(item, &st.Demand))
	r.Add(decodeMapping(item, &st.Mapping))
	r.Add(decodeSignals(item, &st))
	decodePause(r, &st)
	decodeReason(r, &st)
	if legacy != nil && st.Schema < 3 {
		// Into the first signal's record, which loop's upgrade completes
		// for a one-signal loop (loop.StateSchema).
		if len(st.Signals) == 0 {
			st.Signals = []loop.SignalState{{}}
		}
		st.Signals[0].Controller = *legacy
	}
	var x loop.ExperimentState
	if r.OptJSON("experiment", &x) {
		st.Experiment = &x
	}
	return st, r.Err()
}

func encodeStatus(st loop.ParamsStatus) map[string]types.AttributeValue {
	item := ddbitem.Key(st.Loop, SortParamsStatus)
	item["status"] = ddbitem.Str(st.Status)
	if st.Reason != "" {
		item["reason"] = ddbitem.Str(st.Reason)
	}
	if st.InForce != "" {
		item["in_force"] = ddbitem.Str(st.InForce)
	}
	item["fingerprint"] = ddbitem.Str(st.Fingerprint)
	item["checked_at"] = ddbitem.Timestamp(st.CheckedAt)
	item["tick"] = ddbitem.Integer(st.Tick)
	return item
}

func decodeStatus(item map[string]types.AttributeValue) (loop.ParamsStatus, error) {
	r := ddbitem.NewReader(item)
	st := loop.ParamsStatus{Loop: r.S("pk"), Status: r.S("status"), Reason: r.OptS("reason"), InForce: r.OptS("in_force"),
		Fingerprint: r.OptS("fingerprint"), CheckedAt: r.OptTS("checked_at"), Tick: int64(r.OptN("tick", 0))}
	return st, r.Err()
}
