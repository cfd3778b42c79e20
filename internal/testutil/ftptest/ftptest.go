// Package ftptest is a minimal FTP server and client (the RFC 959 subset a
// NAT proxy sees: USER, PASS, PORT, EPRT, PASV, EPSV, RETR, QUIT) for tests
// that send FTP through a gateway.
package ftptest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server serves fixed files to any user.
type Server struct {
	ln    net.Listener
	files map[string][]byte
	// Listen makes the listener of a passive data connection (it must
	// run in the server's network namespace); nil uses net.Listen.
	listen func(network, addr string) (net.Listener, error)
	// Dial opens an active data connection from the local address given
	// (the control connection's, as FTP servers do); nil uses a
	// net.Dialer.
	dial func(network, local, addr string) (net.Conn, error)
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

// Serve answers FTP sessions on ln until Close. listen and dial may be nil
// (see Server).
func Serve(ln net.Listener, files map[string][]byte, listen func(network, addr string) (net.Listener, error),
	dial func(network, local, addr string) (net.Conn, error)) *Server {
	s := &Server{ln: ln, files: files, listen: listen, dial: dial}
	if s.listen == nil {
		s.listen = net.Listen
	}
	if s.dial == nil {
		s.dial = Dial
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				if err := s.session(c); err != nil && !errors.Is(err, io.EOF) {
					s.mu.Lock()
					s.errs = append(s.errs, err)
					s.mu.Unlock()
				}
			}()
		}
	}()
	return s
}

// Close stops the server and returns the errors its sessions met.
func (s *Server) Close() error {
	s.ln.Close()
	s.wg.Wait()
	return errors.Join(s.errs...)
}

func (s *Server) session(c net.Conn) error {
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	reply := func(format string, args ...any) error {
		_, err := fmt.Fprintf(c, format+"\r\n", args...)
		return err
	}
	if err := reply("220 ftptest ready"); err != nil {
		return err
	}
	var active string        // address of an announced active connection
	var passive net.Listener // of a passive one
	defer func() {
		if passive != nil {
			passive.Close()
		}
	}()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		cmd, arg, _ := strings.Cut(strings.TrimRight(line, "\r\n"), " ")
		switch strings.ToUpper(cmd) {
		case "USER":
			err = reply("331 password please")
		case "PASS":
			err = reply("230 logged in")
		case "TYPE":
			err = reply("200 type set")
		case "PORT":
			var ap netip.AddrPort
			if ap, err = ParsePort(arg); err != nil {
				err = reply("501 %v", err)
				break
			}
			active = ap.String()
			err = reply("200 PORT command successful")
		case "EPRT":
			var ap netip.AddrPort
			if ap, err = ParseEprt(arg); err != nil {
				err = reply("501 %v", err)
				break
			}
			active = ap.String()
			err = reply("200 EPRT command successful")
		case "PASV", "EPSV":
			if passive != nil {
				passive.Close()
			}
			host, _, _ := net.SplitHostPort(c.LocalAddr().String())
			if passive, err = s.listen("tcp", net.JoinHostPort(host, "0")); err != nil {
				return err
			}
			port := passive.Addr().(*net.TCPAddr).Port
			if strings.ToUpper(cmd) == "EPSV" {
				err = reply("229 Entering Extended Passive Mode (|||%d|)", port)
				break
			}
			a := netip.MustParseAddr(host).As4()
			err = reply("227 Entering Passive Mode (%d,%d,%d,%d,%d,%d)", a[0], a[1], a[2], a[3], port>>8, port&0xff)
		case "RETR":
			data, ok := s.files[arg]
			if !ok {
				err = reply("550 no such file")
				break
			}
			var dc net.Conn
			switch {
			case active != "":
				if err = reply("150 opening data connection"); err != nil {
					return err
				}
				host, _, _ := net.SplitHostPort(c.LocalAddr().String())
				dc, err = s.dial("tcp", host, active)
				active = ""
			case passive != nil:
				if err = reply("150 opening data connection"); err != nil {
					return err
				}
				passive.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
				dc, err = passive.Accept()
				passive.Close()
				passive = nil
			default:
				if err := reply("425 use PORT or PASV first"); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				reply("425 no data connection: %v", err)
				return fmt.Errorf("data connection: %w", err)
			}
			_, err = dc.Write(data)
			dc.Close()
			if err != nil {
				return err
			}
			err = reply("226 transfer complete")
		case "QUIT":
			reply("221 bye")
			return nil
		default:
			err = reply("502 not implemented")
		}
		if err != nil {
			return err
		}
	}
}

// Dial connects to addr from the address local (any port), with a
// timeout.
func Dial(network, local, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return d.Dial(network, addr)
}

// ParsePort reads the argument of PORT (h1,h2,h3,h4,p1,p2).
func ParsePort(arg string) (netip.AddrPort, error) {
	f := strings.Split(arg, ",")
	if len(f) != 6 {
		return netip.AddrPort{}, fmt.Errorf("PORT %q: want 6 numbers", arg)
	}
	var b [6]byte
	for i, x := range f {
		n, err := strconv.ParseUint(strings.TrimSpace(x), 10, 8)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("PORT %q: %v", arg, err)
		}
		b[i] = byte(n)
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[:4])), uint16(b[4])<<8|uint16(b[5])), nil
}

// ParseEprt reads the argument of EPRT (|af|addr|port|).
func ParseEprt(arg string) (netip.AddrPort, error) {
	if len(arg) < 2 {
		return netip.AddrPort{}, fmt.Errorf("EPRT %q", arg)
	}
	f := strings.Split(arg[1:], arg[:1])
	if len(f) != 4 {
		return netip.AddrPort{}, fmt.Errorf("EPRT %q: want 3 fields", arg)
	}
	a, err := netip.ParseAddr(f[1])
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("EPRT %q: %v", arg, err)
	}
	p, err := strconv.ParseUint(f[2], 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("EPRT %q: %v", arg, err)
	}
	return netip.AddrPortFrom(a, uint16(p)), nil
}

// Client is one FTP control connection.
type Client struct {
	c net.Conn
	r *bufio.Reader
}

// NewClient reads the server's greeting on c.
func NewClient(c net.Conn) (*Client, error) {
	c.SetDeadline(time.Now().Add(20 * time.Second))
	cl := &Client{c: c, r: bufio.NewReader(c)}
	if _, err := cl.expect("2"); err != nil {
		return nil, err
	}
	return cl, nil
}

// Close sends QUIT and closes the connection.
func (c *Client) Close() error {
	fmt.Fprintf(c.c, "QUIT\r\n")
	return c.c.Close()
}

// cmd sends a command and reads its reply, which must start with want.
func (c *Client) cmd(want, format string, args ...any) (string, error) {
	if _, err := fmt.Fprintf(c.c, format+"\r\n", args...); err != nil {
		return "", err
	}
	return c.expect(want)
}

func (c *Client) expect(want string) (string, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, want) {
		return line, fmt.Errorf("ftp: got %q, want a %sxx reply", line, want)
	}
	return line, nil
}

// Login logs in.
func (c *Client) Login(user, pass string) error {
	if _, err := c.cmd("3", "USER %s", user); err != nil {
		return err
	}
	_, err := c.cmd("2", "PASS %s", pass)
	return err
}

// RetrActive fetches name over an active data connection: it listens with
// ln (its address is announced with PORT, or EPRT when eprt is set) and
// takes the server's connection.
func (c *Client) RetrActive(name string, ln net.Listener, eprt bool) ([]byte, error) {
	ap := netip.MustParseAddrPort(ln.Addr().String())
	if eprt {
		af := 1
		if !ap.Addr().Unmap().Is4() {
			af = 2
		}
		if _, err := c.cmd("2", "EPRT |%d|%s|%d|", af, ap.Addr().Unmap(), ap.Port()); err != nil {
			return nil, err
		}
	} else {
		a := ap.Addr().Unmap().As4()
		if _, err := c.cmd("2", "PORT %d,%d,%d,%d,%d,%d", a[0], a[1], a[2], a[3], ap.Port()>>8, ap.Port()&0xff); err != nil {
			return nil, err
		}
	}
	if _, err := c.cmd("1", "RETR %s", name); err != nil {
		return nil, err
	}
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
	dc, err := ln.Accept()
	if err != nil {
		return nil, fmt.Errorf("waiting for the server's data connection: %w", err)
	}
	defer dc.Close()
	return c.finish(dc)
}

// RetrPassive fetches name over a passive data connection (PASV, or EPSV
// when epsv is set), opened with dial to the address the server gave
// (EPSV: the control connection's remote address).
func (c *Client) RetrPassive(name string, epsv bool, dial func(addr string) (net.Conn, error)) (data []byte, announced string, err error) {
	var addr string
	if epsv {
		line, err := c.cmd("229", "EPSV")
		if err != nil {
			return nil, "", err
		}
		i, j := strings.Index(line, "(|||"), strings.LastIndex(line, "|)")
		if i < 0 || j < i {
			return nil, "", fmt.Errorf("EPSV reply %q", line)
		}
		host, _, _ := net.SplitHostPort(c.c.RemoteAddr().String())
		addr = net.JoinHostPort(host, line[i+4:j])
	} else {
		line, err := c.cmd("227", "PASV")
		if err != nil {
			return nil, "", err
		}
		i, j := strings.Index(line, "("), strings.Index(line, ")")
		if i < 0 || j < i {
			return nil, "", fmt.Errorf("PASV reply %q", line)
		}
		ap, err := ParsePort(line[i+1 : j])
		if err != nil {
			return nil, "", err
		}
		addr = ap.String()
	}
	dc, err := dial(addr)
	if err != nil {
		return nil, addr, fmt.Errorf("passive data connection to %s: %w", addr, err)
	}
	defer dc.Close()
	if _, err := c.cmd("1", "RETR %s", name); err != nil {
		return nil, addr, err
	}
	data, err = c.finish(dc)
	return data, addr, err
}

func (c *Client) finish(dc net.Conn) ([]byte, error) {
	dc.SetDeadline(time.Now().Add(10 * time.Second))
	data, err := io.ReadAll(dc)
	if err != nil {
		return nil, err
	}
	if _, err := c.expect("2"); err != nil {
		return nil, err
	}
	return data, nil
}
