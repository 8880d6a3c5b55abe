package sshhost_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/postgres/pgtest"
	"github.com/kernodeck/kernodeck/provision/sshhost/sshtest"
)

// externalIPv4 returns an address of this machine that is not loopback.
func externalIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address to test the external interface with")
	return ""
}

// get sends GET /lab with the token over conn and returns the status code.
func get(t *testing.T, conn net.Conn, token string) int {
	t.Helper()
	defer conn.Close()
	req, _ := http.NewRequest("GET", "http://127.0.0.1/lab", nil)
	if token != "" {
		req.Header.Set("Authorization", "token "+token)
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The notebook preset's Jupyter listens on the host's loopback only: not
// reachable on the machine's external address, reachable through an SSH
// tunnel as the customer (the command is on the order), with the token
// only. It keeps running when the customer disconnects, and the teardown
// stops it.
func TestJupyterOnlyThroughTheTunnel(t *testing.T) {
	sshtest.RequireRoot(t)
	ext := externalIPv4(t)
	ctx := context.Background()
	f := newFixture(t)
	h := sshtest.Start(t, sshtest.RTXA5000, sshtest.Options{Jupyter: true})
	f.addHost("gpu-notebook", h, h.Fingerprint, "rtx-a5000", 1)
	d := driver(f.db, h, t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.JupyterPort = l.Addr().(*net.TCPAddr).Port
	l.Close()
	port := strconv.Itoa(d.JupyterPort)
	signer, pub := customerKey(t)
	ref := f.order("rtx-a5000", 1, "notebook", pub)
	user, _ := d.UnixUser(ref)
	f.provision(d, ref, "rtx-a5000", 1, "notebook")

	stored := pgtest.Access(t, f.db, ref)
	url, notes := stored.JupyterURL.String, stored.Notes
	tok, err := postgres.AccessJupyterToken.Open(keyring(t), ref, stored.JupyterToken.String)
	if err != nil {
		t.Fatal(err)
	}
	tunnel := fmt.Sprintf("ssh -N -L %s:127.0.0.1:%s -p %d %s@%s", port, port, h.Port, user, h.Addr)
	if url != "http://127.0.0.1:"+port+"/lab" || !strings.Contains(notes, tunnel) {
		t.Fatalf("access: url %q, notes %q", url, notes)
	}
	t.Logf("notes: %s", notes)
	waitFor(t, "Jupyter listening", func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	external := func() error {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ext, port), 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	if external() == nil {
		t.Fatalf("Jupyter answers on the external address %s:%s", ext, port)
	}

	// Through the tunnel the customer opens with their key.
	throughTunnel := func(token string) int {
		c, err := ssh.Dial("tcp", net.JoinHostPort(h.Addr, strconv.Itoa(h.Port)), &ssh.ClientConfig{
			User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
			HostKeyCallback: ssh.FixedHostKey(hostKey(t, h)), Timeout: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conn, err := c.Dial("tcp", "127.0.0.1:"+port)
		if err != nil {
			t.Logf("tunnel: %v", err)
			return -1
		}
		return get(t, conn, token)
	}
	if code := throughTunnel(tok); code != 200 {
		t.Fatalf("through the tunnel with the token: %d", code)
	}
	if code := throughTunnel(""); code != 403 {
		t.Fatalf("through the tunnel without the token: %d", code)
	}

	// Jupyter is the customer's service: killed, it comes back by itself
	// (no session open); running the script again starts no second one.
	if _, err := h.Run(user, signer, "pkill -f 'jupyter-la[b]'; while pgrep -f 'jupyter-la[b]' >/dev/null; do sleep 0.1; done; sh ~/kernodeck/jupyter.sh"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Jupyter started again by its service", func() bool { return throughTunnel(tok) == 200 })
	if out, err := h.Run(user, signer, "pgrep -c -f 'kernodeck-jupyter-servic[e]'; pgrep -c -f 'jupyter-la[b]'"); err != nil || strings.Fields(out)[0] != "1" || strings.Fields(out)[1] != "1" {
		t.Fatalf("one service and one Jupyter expected: %v %q", err, out)
	}
	if external() == nil {
		t.Fatal("restarted Jupyter answers on the external address")
	}

	if err := d.RevokeAccess(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
		c.Close()
		t.Fatal("Jupyter still listening after the teardown")
	}
	if err := d.Release(ctx, ref); err != nil {
		t.Fatal(err)
	}
}

// hostKey reads the stand-in's public host key.
func hostKey(t *testing.T, h *sshtest.Host) ssh.PublicKey {
	t.Helper()
	var key ssh.PublicKey
	c, err := ssh.Dial("tcp", net.JoinHostPort(h.Addr, strconv.Itoa(h.Port)), &ssh.ClientConfig{
		User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(h.Admin)},
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
			if ssh.FingerprintSHA256(k) != h.Fingerprint {
				return fmt.Errorf("host key mismatch")
			}
			key = k
			return nil
		},
		Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	return key
}
