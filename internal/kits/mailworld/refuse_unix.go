//go:build unix

package mailworld

import (
	"fmt"
	"net/netip"
	"syscall"
)

type fdCloser int

func (f fdCloser) Close() error { return syscall.Close(int(f)) }

// bindRefusing binds a TCP socket to ip:port without listening on it: the
// port is reserved and connection attempts are refused (RST).
func bindRefusing(ip netip.Addr, port int) (fdCloser, int, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return 0, 0, err
	}
	syscall.CloseOnExec(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: ip.As4()}); err != nil {
		syscall.Close(fd)
		return 0, 0, fmt.Errorf("bind %s:%d: %w", ip, port, err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return 0, 0, err
	}
	return fdCloser(fd), sa.(*syscall.SockaddrInet4).Port, nil
}
