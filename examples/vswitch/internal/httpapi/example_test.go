package httpapi_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/vswitchkit/vswitchkit/examples/vswitch/internal/httpapi"
)

// Before the agent is attached the server answers health checks with the
// daemon's phase.
func ExampleServer() {
	s := httpapi.New(httpapi.Config{})
	s.SetPhase("connecting to etcd")
	for _, path := range []string{"/healthz", "/readyz"} {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	// Output:
	// 200 ok (connecting to etcd)
	// 503 not ready: connecting to etcd
}
