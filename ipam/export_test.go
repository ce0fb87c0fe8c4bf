package ipam

// Test helpers for the external tests (package ipam_test).
var (
	TestSeeds = testSeeds
	LogSeed   = logSeed
)
