package gobgp

import (
	"net"

	"golang.org/x/sys/unix"
)

// setMD5 sets a TCP-MD5 key for addr on a fresh IPv4 TCP socket, the same
// socket option GoBGP uses, to find out whether the kernel allows it.
func setMD5(addr string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	sig := unix.TCPMD5Sig{Keylen: 4}
	copy(sig.Key[:], "test")
	ip := net.ParseIP(addr).To4()
	// struct sockaddr_storage: family (2 bytes, host order), port, address.
	sig.Addr.Family = unix.AF_INET
	copy(sig.Addr.Data[2:6], ip)
	return unix.SetsockoptTCPMD5Sig(fd, unix.IPPROTO_TCP, unix.TCP_MD5SIG, &sig)
}
