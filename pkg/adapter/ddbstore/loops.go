package ddbstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// IndexBySort is the global secondary index (partition key sk, sort key pk)
// through which the controller lists every loop's PARAMS item in one query,
// without scanning the other items of the table (RATE, history).
const IndexBySort = "by-sk"

// maxBatchGet is BatchGetItem's limit on keys in one request.
const maxBatchGet = 100

var _ loop.TickStore = (*Store)(nil)

// ReadParams returns the raw attributes of the PARAMS item of loopID (pk and
// sk removed), or an error wrapping loop.ErrNotFound.
func (s *Store) ReadParams(ctx context.Context, loopID string) (map[string]any, error) {
	item, err := s.get(ctx, loopID, SortParams)
	if err != nil {
		return nil, err
	}
	a := fromItem(item)
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
		return wrap("encode PARAMS", loopID, err)
	}
	maps := key(loopID, SortParams)
	for k, v := range maps {
		item[k] = v
	}
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return wrap("write PARAMS", loopID, err)
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
		return wrap("encode PARAMS", loopID, err)
	}
	for k, v := range key(loopID, SortParams) {
		item[k] = v
	}
	item[loop.AttrEditVersion] = integer(read + 1)
	in := &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ExpressionAttributeNames: map[string]string{"#v": loop.AttrEditVersion}}
	if read == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(#v)")
	} else {
		in.ConditionExpression = aws.String("#v = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": integer(read)}
	}
	_, err = s.api.PutItem(ctx, in)
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return fmt.Errorf("dynamodb write PARAMS loop %q at edit version %d: %w", loopID, read, loop.ErrParamsConflict)
	}
	if err != nil {
		return wrap("write PARAMS", loopID, err)
	}
	return nil
}

// ReadStatus returns the PARAMS_STATUS item of loopID, or an error wrapping
// loop.ErrNotFound.
func (s *Store) ReadStatus(ctx context.Context, loopID string) (loop.ParamsStatus, error) {
	item, err := s.get(ctx, loopID, SortParamsStatus)
	if err != nil {
		return loop.ParamsStatus{}, err
	}
	st, err := decodeStatus(item)
	if err != nil {
		return st, wrap("decode PARAMS_STATUS", loopID, err)
	}
	return st, nil
}

// ReadState returns the STATE item of loopID, or an error wrapping
// loop.ErrNotFound.
func (s *Store) ReadState(ctx context.Context, loopID string) (loop.State, error) {
	item, err := s.get(ctx, loopID, SortState)
	if err != nil {
		return loop.State{}, err
	}
	st, err := decodeState(item)
	if err != nil {
		return st, wrap("decode STATE", loopID, err)
	}
	return st, nil
}

func (s *Store) get(ctx context.Context, loopID, sk string) (map[string]types.AttributeValue, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(loopID, sk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, wrap("read "+sk, loopID, err)
	}
	if len(out.Item) == 0 {
		return nil, wrap("read "+sk, loopID, loop.ErrNotFound)
	}
	return out.Item, nil
}

// LoadLoops lists every loop that has a PARAMS item (a query on the by-sk
// index, paginated) and reads their STATE items consistently (BatchGetItem,
// 100 keys a call). A STATE item that does not decode sets its snapshot's
// Err and fails no other loop. A tick over N loops costs about ceil(N/1000) queries and
// ceil(N/100) batch reads, plus one query for the consumers' leases
// (peers.go) per 1 MB of them.
func (s *Store) LoadLoops(ctx context.Context) ([]loop.Snapshot, error) {
	var snaps []loop.Snapshot
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(IndexBySort),
		KeyConditionExpression:    aws.String("sk = :sk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":sk": str(SortParams)},
	}
	for pages := dynamodb.NewQueryPaginator(s.api, in); pages.HasMorePages(); {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamodb list PARAMS (index %s of %s): %w", IndexBySort, s.table, err)
		}
		for _, item := range out.Items {
			id, err := getS(item, "pk")
			if err != nil {
				continue
			}
			a := fromItem(item)
			delete(a, "pk")
			delete(a, "sk")
			snaps = append(snaps, loop.Snapshot{Loop: id, Params: a})
		}
	}
	byLoop := make(map[string]int, len(snaps))
	for i, sn := range snaps {
		byLoop[sn.Loop] = i
	}
	// Issue 13: the consumers' leases, in one paginated query (peers.go).
	peers, err := s.loadPeers(ctx)
	if err != nil {
		return nil, err
	}
	for id, ps := range peers {
		if i, ok := byLoop[id]; ok {
			snaps[i].Peers = ps
		}
	}
	for start := 0; start < len(snaps); start += maxBatchGet {
		keys := make([]map[string]types.AttributeValue, 0, maxBatchGet)
		for _, sn := range snaps[start:min(start+maxBatchGet, len(snaps))] {
			keys = append(keys, key(sn.Loop, SortState))
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
				snaps[i].Err = fmt.Errorf("%w (delete the STATE item to restart the loop)", wrap("decode STATE", st.Loop, err))
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
	id := c.State.Loop
	if id == "" {
		return fmt.Errorf("dynamodb commit: empty loop id")
	}
	if c.State.Version != c.PrevVersion+1 {
		return fmt.Errorf("dynamodb commit loop %q: new version %d does not follow %d", id, c.State.Version, c.PrevVersion)
	}
	stateItem, err := encodeState(c.State)
	if err != nil {
		return wrap("encode STATE", id, err)
	}
	put := &types.Put{TableName: aws.String(s.table), Item: stateItem}
	if c.PrevVersion == 0 {
		put.ConditionExpression = aws.String("attribute_not_exists(pk)")
	} else {
		put.ConditionExpression = aws.String("version = :v")
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": integer(c.PrevVersion)}
	}
	items := []types.TransactWriteItem{{Put: put}}
	if c.Rate != nil {
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: encodeRate(*c.Rate)}})
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
	return wrap("commit tick", id, err)
}

func setTime(item map[string]types.AttributeValue, name string, t time.Time) {
	if !t.IsZero() {
		item[name] = timestamp(t)
	}
}

func setNum(item map[string]types.AttributeValue, name string, f float64) {
	if !math.IsNaN(f) && !math.IsInf(f, 0) {
		item[name] = num(f)
	}
}

func encodeState(st loop.State) (map[string]types.AttributeValue, error) {
	item := key(st.Loop, SortState)
	item["version"] = integer(st.Version)
	setTime(item, "tick_at", st.TickAt)
	setTime(item, "metric_at", st.MetricAt)
	setNum(item, "measured", st.Measured)
	setNum(item, "setpoint", st.Setpoint)
	setNum(item, "rate", st.Rate)
	if st.Mode != "" {
		item["mode"] = str(string(st.Mode))
	}
	item["stale"] = &types.AttributeValueMemberBOOL{Value: st.Stale}
	setTime(item, "stale_since", st.StaleSince)
	setNum(item, "p", st.Terms.P)
	setNum(item, "i", st.Terms.I)
	setNum(item, "d", st.Terms.D)
	setNum(item, "ff", st.Terms.FF)
	item["saturated"] = &types.AttributeValueMemberBOOL{Value: st.Terms.Saturated}
	ctrl, err := json.Marshal(st.Controller)
	if err != nil {
		return nil, fmt.Errorf("controller state: %w", err)
	}
	item["controller"] = str(string(ctrl))
	if st.Params != nil {
		p, err := json.Marshal(st.Params)
		if err != nil {
			return nil, fmt.Errorf("valid params: %w", err)
		}
		item["params_valid"] = str(string(p))
	}
	item["params_fingerprint"] = str(st.ParamsFingerprint)
	if len(st.Balance.Nodes) > 0 || st.Balance.Ticks != 0 {
		b, err := json.Marshal(st.Balance)
		if err != nil {
			return nil, fmt.Errorf("balancer state: %w", err)
		}
		item["balance"] = str(string(b))
	}
	if len(st.Drift.Samples) > 0 || st.Drift.ModelDrift {
		b, err := json.Marshal(st.Drift)
		if err != nil {
			return nil, fmt.Errorf("drift state: %w", err)
		}
		item["drift"] = str(string(b))
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
	return item, nil
}

func optTime(item map[string]types.AttributeValue, name string) (time.Time, error) {
	if _, ok := item[name]; !ok {
		return time.Time{}, nil
	}
	return getTime(item, name)
}

func optNum(item map[string]types.AttributeValue, name string, def float64) (float64, error) {
	if _, ok := item[name]; !ok {
		return def, nil
	}
	return getN(item, name)
}

func optS(item map[string]types.AttributeValue, name string) (string, error) {
	if _, ok := item[name]; !ok {
		return "", nil
	}
	return getS(item, name)
}

func optBool(item map[string]types.AttributeValue, name string) (bool, error) {
	av, ok := item[name]
	if !ok {
		return false, nil
	}
	b, ok := av.(*types.AttributeValueMemberBOOL)
	if !ok {
		return false, fmt.Errorf("attribute %s: want a boolean (BOOL), got %s", name, typeName(av))
	}
	return b.Value, nil
}

func decodeState(item map[string]types.AttributeValue) (loop.State, error) {
	var st loop.State
	var err error
	var v float64
	var mode, ctrl, params string
	if st.Loop, err = getS(item, "pk"); err != nil {
		return st, err
	}
	errs := []error{}
	add := func(e error) {
		if e != nil {
			errs = append(errs, e)
		}
	}
	v, err = getN(item, "version")
	add(err)
	st.Version = int64(v)
	st.TickAt, err = optTime(item, "tick_at")
	add(err)
	st.MetricAt, err = optTime(item, "metric_at")
	add(err)
	st.Measured, err = optNum(item, "measured", math.NaN())
	add(err)
	st.Setpoint, err = optNum(item, "setpoint", 0)
	add(err)
	st.Rate, err = optNum(item, "rate", 0)
	add(err)
	mode, err = optS(item, "mode")
	add(err)
	st.Mode = loop.Mode(mode)
	st.Stale, err = optBool(item, "stale")
	add(err)
	st.StaleSince, err = optTime(item, "stale_since")
	add(err)
	st.Terms.P, err = optNum(item, "p", 0)
	add(err)
	st.Terms.I, err = optNum(item, "i", 0)
	add(err)
	st.Terms.D, err = optNum(item, "d", 0)
	add(err)
	st.Terms.FF, err = optNum(item, "ff", 0)
	add(err)
	st.Terms.Saturated, err = optBool(item, "saturated")
	add(err)
	st.Terms.Rate = st.Rate
	ctrl, err = optS(item, "controller")
	add(err)
	if ctrl != "" {
		add(json.Unmarshal([]byte(ctrl), &st.Controller))
	}
	params, err = optS(item, "params_valid")
	add(err)
	if params != "" {
		var p loop.Params
		if err := json.Unmarshal([]byte(params), &p); err != nil {
			add(fmt.Errorf("params_valid: %w", err))
		} else {
			st.Params = &p
		}
	}
	st.ParamsFingerprint, err = optS(item, "params_fingerprint")
	add(err)
	bal, err := optS(item, "balance")
	add(err)
	if bal != "" {
		if err := json.Unmarshal([]byte(bal), &st.Balance); err != nil {
			add(fmt.Errorf("balance: %w", err))
		}
	}
	drift, err := optS(item, "drift")
	add(err)
	if drift != "" {
		if err := json.Unmarshal([]byte(drift), &st.Drift); err != nil {
			add(fmt.Errorf("drift: %w", err))
		}
	}
	add(decodeDemand(item, &st.Demand))
	add(errors.Join(decodeMapping(item, &st.Mapping), decodeSignals(item, &st), decodeExperiment(item, &st)))
	return st, errors.Join(errs...)
}

func encodeStatus(st loop.ParamsStatus) map[string]types.AttributeValue {
	item := key(st.Loop, SortParamsStatus)
	item["status"] = str(st.Status)
	if st.Reason != "" {
		item["reason"] = str(st.Reason)
	}
	if st.InForce != "" {
		item["in_force"] = str(st.InForce)
	}
	item["fingerprint"] = str(st.Fingerprint)
	item["checked_at"] = timestamp(st.CheckedAt)
	item["tick"] = integer(st.Tick)
	return item
}

func decodeStatus(item map[string]types.AttributeValue) (loop.ParamsStatus, error) {
	var st loop.ParamsStatus
	var err error
	errs := []error{}
	add := func(e error) {
		if e != nil {
			errs = append(errs, e)
		}
	}
	st.Loop, err = getS(item, "pk")
	add(err)
	st.Status, err = getS(item, "status")
	add(err)
	st.Reason, err = optS(item, "reason")
	add(err)
	st.InForce, err = optS(item, "in_force")
	add(err)
	st.Fingerprint, err = optS(item, "fingerprint")
	add(err)
	st.CheckedAt, err = optTime(item, "checked_at")
	add(err)
	t, err := optNum(item, "tick", 0)
	add(err)
	st.Tick = int64(t)
	return st, errors.Join(errs...)
}
