package httpapi

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/render/svccnat"
)

// The metrics of the cnat service renderer (agent Config.Services
// "cnat"): translations and their paths, hostPort pods, conflicts and the
// current problems of services and pods per reason.
var (
	descCnatServices     = prometheus.NewDesc("vswitchkit_cnat_services", "Services with at least one frontend to translate with cnat (one another has included: see vswitchkit_cnat_conflicts).", nil, nil)
	descCnatHostPortPods = prometheus.NewDesc("vswitchkit_cnat_hostport_pods", "Pods of this node with at least one hostPort to translate (one another has included).", nil, nil)
	descCnatTranslations = prometheus.NewDesc("vswitchkit_cnat_translations", "cnat translations of services and hostPorts.", nil, nil)
	descCnatPaths        = prometheus.NewDesc("vswitchkit_cnat_paths", "Backends in those translations.", nil, nil)
	descCnatConflicts    = prometheus.NewDesc("vswitchkit_cnat_conflicts", "Frontends (protocol, address, port) wanted by more than one service or pod.", nil, nil)
	descCnatProblems     = prometheus.NewDesc("vswitchkit_cnat_problems", "Parts of services and pods' hostPorts not rendered as asked, per reason (see /debug/services; each logged at warn once).", []string{"reason"}, nil)
)

// cnatReasons are the reasons of the renderer's problems, each exported.
var cnatReasons = []svccnat.Reason{svccnat.UnknownLB, svccnat.UnsupportedProtocol, svccnat.NoNodeAddress, svccnat.FrontendTaken, svccnat.HostIPNotLocal}

// cnatCollector exports the cnat renderer's counters.
type cnatCollector struct{ s *Server }

func (cnatCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCnatServices, descCnatHostPortPods, descCnatTranslations, descCnatPaths, descCnatConflicts, descCnatProblems} {
		ch <- d
	}
}

func (c cnatCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.s.agent()
	if a == nil || a.Cnat == nil {
		return
	}
	st := a.Cnat.Stats()
	gauge(ch, descCnatServices, float64(st.Services))
	gauge(ch, descCnatHostPortPods, float64(st.HostPortPods))
	gauge(ch, descCnatTranslations, float64(st.Translations))
	gauge(ch, descCnatPaths, float64(st.Paths))
	gauge(ch, descCnatConflicts, float64(st.Conflicts))
	per := map[svccnat.Reason]int{}
	for _, p := range a.Cnat.Problems() {
		per[p.Reason]++
	}
	for _, r := range cnatReasons {
		gauge(ch, descCnatProblems, float64(per[r]), r.String())
	}
}

// cnatProblem is a problem of the cnat renderer in /debug/services.
type cnatProblem struct {
	Service string `json:"service,omitempty"`
	Pod     string `json:"pod,omitempty"`
	Reason  string `json:"reason"`
	Detail  string `json:"detail"`
	Error   string `json:"error"`
}

// cnatView is the cnat renderer's part of /debug/services: its counters
// and its current problems (nil without the renderer).
func cnatView(a *agent.Agent) any {
	if a.Cnat == nil {
		return nil
	}
	problems := []cnatProblem{}
	for _, p := range a.Cnat.Problems() {
		v := cnatProblem{Reason: p.Reason.String(), Detail: p.Detail, Error: p.Error()}
		if p.Pod.Name != "" {
			v.Pod = p.Pod.String()
		} else {
			v.Service = p.Service.String()
		}
		problems = append(problems, v)
	}
	st := lowerCamel(a.Cnat.Stats())
	st["problems"] = problems
	return st
}

// cnatDegradation is the cnat renderer's line of the degradation (none
// without problems): the parts of services and pods not rendered.
func cnatDegradation(a *agent.Agent) []string {
	if a.Cnat == nil {
		return nil
	}
	problems := a.Cnat.Problems()
	if len(problems) == 0 {
		return nil
	}
	parts := make([]string, 0, min(len(problems), maxSkipped)+1)
	for i, p := range problems {
		if i == maxSkipped {
			parts = append(parts, fmt.Sprintf("and %d more", len(problems)-i))
			break
		}
		parts = append(parts, strings.TrimPrefix(p.Error(), "svccnat: "))
	}
	return []string{fmt.Sprintf("svccnat: %d parts of services or pods not rendered: %s", len(problems), strings.Join(parts, "; "))}
}
