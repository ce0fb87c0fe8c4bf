package agent

import "github.com/vswitchkit/vswitchkit/internal/lifecycle"

// ErrAlreadyRunning is returned (wrapped) by a second call of Agent.Run.
// It is the same value as every other package's ErrAlreadyRunning.
var ErrAlreadyRunning = lifecycle.ErrAlreadyRunning
