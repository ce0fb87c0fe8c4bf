package synth

import (
	"context"
	"fmt"
	"iter"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
)

// Transaction bounds of [Write]: etcd accepts at most 128 operations per
// transaction by default.
const (
	TxnOps      = 128
	parallelTxn = 4
)

// Write puts every KV of kvs into etcd, directly (not through the
// reflector), in transactions of at most TxnOps puts, a few of them in
// flight at once. progress, if not nil, is called with the number of keys
// written after every transaction (from several goroutines). It returns
// the number of keys written.
func Write(ctx context.Context, cli *clientv3.Client, kvs iter.Seq[KV], progress func(int)) (int, error) {
	g, gctx := errgroup.WithContext(ctx)
	batches := make(chan []clientv3.Op, parallelTxn)
	for range parallelTxn {
		g.Go(func() error {
			for ops := range batches {
				if _, err := cli.Txn(gctx).Then(ops...).Commit(); err != nil {
					return fmt.Errorf("write %d keys: %w", len(ops), err)
				}
				if progress != nil {
					progress(len(ops))
				}
			}
			return nil
		})
	}
	n := 0
	var genErr error
	g.Go(func() error {
		defer close(batches)
		ops := make([]clientv3.Op, 0, TxnOps)
		send := func() bool {
			select {
			case batches <- ops:
				ops = make([]clientv3.Op, 0, TxnOps)
				return true
			case <-gctx.Done():
				return false
			}
		}
		for kv := range kvs {
			raw, err := kv.encode()
			if err != nil {
				genErr = fmt.Errorf("encode %s: %w", kv.Key, err)
				return genErr
			}
			ops = append(ops, clientv3.OpPut(kv.Key, string(raw)))
			n++
			if len(ops) == TxnOps && !send() {
				return gctx.Err()
			}
		}
		if len(ops) > 0 && !send() {
			return gctx.Err()
		}
		return nil
	})
	err := g.Wait()
	return n, err
}

// Txn applies puts and deletes in one transaction and returns its
// revision.
func Txn(ctx context.Context, cli *clientv3.Client, puts []KV, deletes []string) (int64, error) {
	ops := make([]clientv3.Op, 0, len(puts)+len(deletes))
	for _, kv := range puts {
		raw, err := kv.encode()
		if err != nil {
			return 0, fmt.Errorf("encode %s: %w", kv.Key, err)
		}
		ops = append(ops, clientv3.OpPut(kv.Key, string(raw)))
	}
	for _, k := range deletes {
		ops = append(ops, clientv3.OpDelete(k))
	}
	resp, err := cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}
