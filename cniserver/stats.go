package cniserver

import (
	"maps"
	"sync"
	"time"
)

// Stats is a snapshot of the server's request counters, for export as
// metrics. It is a value (a copy).
type Stats struct {
	// Commands maps a CNI command ("ADD", "DEL", "CHECK", "GC",
	// "STATUS") to its counters; commands never requested are absent.
	Commands map[string]CommandStats
	// BadRequests counts the requests that could not be decoded or named
	// no valid command (they are answered with an error and not counted
	// in Commands).
	BadRequests uint64
}

// CommandStats are the counters of one CNI command. It is a value.
type CommandStats struct {
	Requests uint64        // requests served
	Failed   uint64        // requests answered with an error
	Duration time.Duration // total time spent serving the requests
}

// stats counts requests; it is safe for concurrent use.
type stats struct {
	mu       sync.Mutex
	commands map[string]CommandStats // guarded by mu
	bad      uint64                  // guarded by mu
}

func (s *stats) count(cmd string, failed bool, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.commands == nil {
		s.commands = make(map[string]CommandStats)
	}
	c := s.commands[cmd]
	c.Requests++
	if failed {
		c.Failed++
	}
	c.Duration += d
	s.commands[cmd] = c
}

func (s *stats) countBad() {
	s.mu.Lock()
	s.bad++
	s.mu.Unlock()
}

// Stats returns a snapshot of the request counters. It is safe for
// concurrent use; the map is the caller's.
func (s *Server) Stats() Stats {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return Stats{Commands: maps.Clone(s.stats.commands), BadRequests: s.stats.bad}
}
