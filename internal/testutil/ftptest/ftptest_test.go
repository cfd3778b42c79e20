package ftptest

import (
	"bytes"
	"net"
	"testing"
)

// TestLoopback fetches a file in the four ways over loopback.
func TestLoopback(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("sluice "), 5000)
	s := Serve(ln, map[string][]byte{"f": want}, nil, nil)
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cl, err := NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Login("u", "p"); err != nil {
		t.Fatal(err)
	}
	for _, eprt := range []bool{false, true} {
		dl, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		got, err := cl.RetrActive("f", dl, eprt)
		dl.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("active (eprt %v): %d bytes, %v", eprt, len(got), err)
		}
	}
	for _, epsv := range []bool{false, true} {
		got, _, err := cl.RetrPassive("f", epsv, func(a string) (net.Conn, error) { return net.Dial("tcp", a) })
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("passive (epsv %v): %d bytes, %v", epsv, len(got), err)
		}
	}
	cl.Close()
	if err := s.Close(); err != nil {
		t.Errorf("server: %v", err)
	}
}
