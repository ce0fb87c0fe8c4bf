//go:build !linux

package gobgp

import "errors"

func setMD5(string) error { return errors.New("TCP-MD5 is only supported on Linux") }
