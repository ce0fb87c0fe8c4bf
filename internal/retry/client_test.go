package retry

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNewClientBackoff(t *testing.T) {
	b := NewClientBackoff(100*time.Millisecond, time.Second)
	for i, base := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		d := b.NextBackOff()
		base *= time.Millisecond
		assert.InDelta(t, float64(base), float64(d), 0.5*float64(base)+1, "wait %d", i)
	}
}

// TestClientBackoffSpreads: clients that fail at the same moment do not
// retry together: the first waits of 1000 clients spread over most of the
// ±50% window.
func TestClientBackoffSpreads(t *testing.T) {
	lo, hi := time.Hour, time.Duration(0)
	for range 1000 {
		d := NewClientBackoff(time.Second, 10*time.Second).NextBackOff()
		lo, hi = min(lo, d), max(hi, d)
	}
	assert.Less(t, lo, 600*time.Millisecond)
	assert.Greater(t, hi, 1400*time.Millisecond)
}

// records is a slog.Handler that keeps the records it handles.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.recs {
		out = append(out, rec.Level.String()+" "+rec.Message)
	}
	return out
}

func TestDegradedLogsStartAndEndOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &records{}
		d := NewDegraded(slog.New(h), "connecting to etcd")
		d.OK()
		assert.Empty(t, h.messages(), "a success without failures logs nothing")
		for range 5 {
			d.Fail(errors.New("refused"), time.Second)
			time.Sleep(time.Second)
		}
		assert.True(t, d.Failing())
		assert.Equal(t, []string{"WARN connecting to etcd failing, retrying"}, h.messages(), "one Warn for five failures")
		d.OK()
		assert.False(t, d.Failing())
		assert.Equal(t, []string{"WARN connecting to etcd failing, retrying", "WARN connecting to etcd recovered"}, h.messages())
		h.mu.Lock()
		end := h.recs[1]
		h.mu.Unlock()
		end.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "failures":
				assert.Equal(t, int64(5), a.Value.Int64())
			case "after":
				assert.Equal(t, 5*time.Second, a.Value.Duration())
			}
			return true
		})
		d.Fail(errors.New("again"), time.Second)
		assert.Len(t, h.messages(), 3, "a new episode logs again")
	})
}
