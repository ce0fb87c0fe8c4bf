package cniplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/vswitchkit/vswitchkit/cniserver/internal/wire"
)

// Main is the main function of a CNI plugin binary that forwards to a
// vswitchkit agent: it reads the CNI environment and stdin (with
// github.com/containernetworking/cni/pkg/skel), serves VERSION itself,
// forwards ADD, DEL, CHECK, GC and STATUS to the agent, prints the result
// or the error in the specification's format and exits (1 on error).
// about is printed when the binary is run without CNI_COMMAND.
func Main(about string) {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    cmdAdd,
		Del:    cmdDel,
		Check:  cmdCheck,
		GC:     cmdGC,
		Status: cmdStatus,
	}, version.PluginSupports(wire.SupportedVersions()...), about)
}

// setup parses the configuration and returns the context bounded by its
// agentTimeout.
func setup(args *skel.CmdArgs) (*wire.NetConf, context.Context, context.CancelFunc, time.Duration, error) {
	conf, timeout, cerr := wire.ParseNetConf(args.StdinData)
	if cerr != nil {
		return nil, nil, nil, 0, cerr
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	return conf, ctx, cancel, timeout, nil
}

func socketOf(conf *wire.NetConf) string {
	if conf.AgentSocket != "" {
		return conf.AgentSocket
	}
	return wire.DefaultSocketPath
}

func cmdAdd(args *skel.CmdArgs) error {
	conf, ctx, cancel, timeout, err := setup(args)
	if err != nil {
		return err
	}
	defer cancel()
	var ipamResult []byte
	if conf.IPAM.Type != "" {
		res, err := invoke.DelegateAdd(ctx, conf.IPAM.Type, args.StdinData, nil)
		if err != nil {
			return err
		}
		if ipamResult, err = json.Marshal(res); err != nil {
			return types.NewError(types.ErrInternal, "cannot encode the IPAM result", err.Error())
		}
	}
	out, err := call(ctx, timeout, socketOf(conf), cmdRequest("ADD", args, ipamResult))
	if err != nil {
		if conf.IPAM.Type != "" {
			// Release what the IPAM plugin allocated; the ADD failed.
			dctx, dcancel := context.WithTimeout(context.Background(), timeout)
			_ = invoke.DelegateDel(dctx, conf.IPAM.Type, args.StdinData, nil)
			dcancel()
		}
		return err
	}
	res, err := version.NewResult(conf.CNIVersion, out)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "cannot decode the agent's result", err.Error())
	}
	return types.PrintResult(res, conf.CNIVersion)
}

func cmdDel(args *skel.CmdArgs) error {
	conf, ctx, cancel, timeout, err := setup(args)
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := call(ctx, timeout, socketOf(conf), cmdRequest("DEL", args, nil)); err != nil {
		return err
	}
	if conf.IPAM.Type != "" {
		return invoke.DelegateDel(ctx, conf.IPAM.Type, args.StdinData, nil)
	}
	return nil
}

func cmdCheck(args *skel.CmdArgs) error {
	conf, ctx, cancel, timeout, err := setup(args)
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := call(ctx, timeout, socketOf(conf), cmdRequest("CHECK", args, nil)); err != nil {
		return err
	}
	if conf.IPAM.Type != "" {
		return invoke.DelegateCheck(ctx, conf.IPAM.Type, args.StdinData, nil)
	}
	return nil
}

func cmdGC(args *skel.CmdArgs) error {
	conf, ctx, cancel, timeout, err := setup(args)
	if err != nil {
		return err
	}
	defer cancel()
	_, err = call(ctx, timeout, socketOf(conf), cmdRequest("GC", args, nil))
	if conf.IPAM.Type != "" {
		// GC goes on after an error and reports all of them.
		err = errors.Join(err, invoke.DelegateGC(ctx, conf.IPAM.Type, args.StdinData, nil))
		var cerr *types.Error
		if err != nil && !errors.As(err, &cerr) {
			err = types.NewError(types.ErrTryAgainLater, "GC failed", err.Error())
		}
	}
	return err
}

func cmdStatus(args *skel.CmdArgs) error {
	conf, ctx, cancel, timeout, err := setup(args)
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := call(ctx, timeout, socketOf(conf), cmdRequest("STATUS", args, nil)); err != nil {
		var cerr *types.Error
		if errors.As(err, &cerr) && cerr.Code == types.ErrTryAgainLater {
			// The agent is unreachable or does not answer: it cannot
			// serve ADD.
			return types.NewError(50, cerr.Msg, cerr.Details)
		}
		return err
	}
	if conf.IPAM.Type != "" {
		return invoke.DelegateStatus(ctx, conf.IPAM.Type, args.StdinData, nil)
	}
	return nil
}

func cmdRequest(command string, args *skel.CmdArgs, ipamResult []byte) *wire.Request {
	return &wire.Request{
		Command:     command,
		ContainerID: args.ContainerID,
		Netns:       args.Netns,
		IfName:      args.IfName,
		Args:        args.Args,
		Path:        args.Path,
		Config:      args.StdinData,
		IPAMResult:  ipamResult,
	}
}

// Call sends one CNI request to the vswitchkit agent listening on the
// unix socket, as the plugin binary does (without running a delegated
// IPAM plugin), and waits for its answer or for ctx. command is CNI_COMMAND
// (ADD, DEL, CHECK, GC or STATUS) and args holds the other parameters and
// the network configuration (StdinData). It returns what the plugin prints
// on success: the result of an ADD in the configuration's cniVersion, nil
// for the other commands.
//
// Every error is a *types.Error with the specification's codes: 11 (try
// again later) when the agent is unreachable, stops answering or ctx ends
// first, and the agent's own error (see package cniserver) otherwise.
func Call(ctx context.Context, socket, command string, args *skel.CmdArgs) ([]byte, error) {
	return call(ctx, 0, socket, cmdRequest(command, args, nil))
}

func call(ctx context.Context, timeout time.Duration, socket string, req *wire.Request) ([]byte, error) {
	if !json.Valid(req.Config) {
		return nil, types.NewError(types.ErrDecodingFailure, "cannot decode the network configuration", "not valid JSON")
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, types.NewError(types.ErrInternal, "cannot encode the request", err.Error())
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://vswitchkit-agent"+wire.Path, bytes.NewReader(body))
	if err != nil {
		return nil, types.NewError(types.ErrInternal, "cannot build the request", err.Error())
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: tr}).Do(hreq)
	if err != nil {
		return nil, transportError(ctx, timeout, socket, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, transportError(ctx, timeout, socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, types.NewError(types.ErrTryAgainLater, "unexpected answer from the vswitchkit agent",
			fmt.Sprintf("%s at %s: %s", resp.Status, socket, bytes.TrimSpace(data)))
	}
	var wr wire.Response
	if err := json.Unmarshal(data, &wr); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "cannot decode the vswitchkit agent's answer", err.Error())
	}
	if wr.Error != nil {
		return nil, wr.Error
	}
	return wr.Result, nil
}

func transportError(ctx context.Context, timeout time.Duration, socket string, err error) error {
	if ctx.Err() != nil {
		msg := "timed out waiting for the vswitchkit agent; try again later"
		if timeout > 0 {
			msg = fmt.Sprintf("timed out after %s waiting for the vswitchkit agent; try again later", timeout.Round(time.Millisecond))
		}
		return types.NewError(types.ErrTryAgainLater, msg, fmt.Sprintf("agent socket %s: %v", socket, err))
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		hint := "is the agent running?"
		if errors.Is(err, os.ErrNotExist) {
			hint = "the socket does not exist: is the agent running, and is agentSocket right?"
		}
		return types.NewError(types.ErrTryAgainLater, "the vswitchkit agent is unreachable; try again later",
			fmt.Sprintf("agent socket %s: %v; %s", socket, err, hint))
	}
	return types.NewError(types.ErrTryAgainLater, "lost the connection to the vswitchkit agent; try again later",
		fmt.Sprintf("agent socket %s: %v", socket, err))
}
