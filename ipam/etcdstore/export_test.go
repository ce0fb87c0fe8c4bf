package etcdstore

// SetPageSize sets the number of records ListAllocations reads per
// request (tests only).
func SetPageSize(s *Store, n int64) { s.pageSize = n }
