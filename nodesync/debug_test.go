package nodesync_test

import (
	"log/slog"
	"os"
)

func debugLogger() *slog.Logger {
	if os.Getenv("NS_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
