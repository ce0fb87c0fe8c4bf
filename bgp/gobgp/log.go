package gobgp

import (
	"context"
	"log/slog"
)

// levelHandler passes records at or above a minimum level to the wrapped
// handler; GoBGP logs every FSM step at Info, which is too chatty for an
// embedding application.
type levelHandler struct {
	h   slog.Handler
	min slog.Leveler
}

func (l levelHandler) Enabled(ctx context.Context, lvl slog.Level) bool {
	return lvl >= l.min.Level() && l.h.Enabled(ctx, lvl)
}

func (l levelHandler) Handle(ctx context.Context, r slog.Record) error { return l.h.Handle(ctx, r) }

func (l levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelHandler{l.h.WithAttrs(attrs), l.min}
}

func (l levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{l.h.WithGroup(name), l.min}
}
