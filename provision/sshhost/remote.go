package sshhost

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// HostKeyMismatchError means the host presented another key than the one
// recorded in the inventory: it may not be the machine we think it is, so
// nothing is sent to it.
type HostKeyMismatchError struct {
	Host string
	Want string
	Got  string
}

func (e *HostKeyMismatchError) Error() string {
	return fmt.Sprintf("host key of %s is %s, inventory says %s", e.Host, e.Got, e.Want)
}

// hostKeyAlgorithms returns the algorithms that select a key of the given
// type, so the server offers the very key whose fingerprint we hold.
func hostKeyAlgorithms(keyType string) []string {
	switch keyType {
	case ssh.KeyAlgoRSA:
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
	case "":
		return []string{ssh.KeyAlgoED25519}
	default:
		return []string{keyType}
	}
}

// dial opens an SSH connection to h as the admin user, verifying the host key
// against the inventory. The connection is closed when ctx ends, which cuts
// any command in flight.
func (d *Driver) dial(ctx context.Context, h host) (*ssh.Client, func(), error) {
	addr := net.JoinHostPort(h.Address, strconv.Itoa(h.Port))
	cfg := &ssh.ClientConfig{
		User: d.adminUser(),
		Auth: []ssh.AuthMethod{ssh.PublicKeys(d.Signer)},
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			got := ssh.FingerprintSHA256(key)
			if got != h.Fingerprint {
				return &HostKeyMismatchError{Host: h.Name, Want: h.Fingerprint, Got: got}
			}
			return nil
		},
		HostKeyAlgorithms: hostKeyAlgorithms(h.KeyType),
		Timeout:           d.connectTimeout(),
	}
	dctx, cancel := context.WithTimeout(ctx, d.connectTimeout())
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s (%s): %w", h.Name, addr, err)
	}
	_ = conn.SetDeadline(time.Now().Add(d.connectTimeout()))
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("ssh handshake with %s (%s): %w", h.Name, addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	client := ssh.NewClient(c, chans, reqs)
	stop := context.AfterFunc(ctx, func() { _ = client.Close() })
	var once sync.Once
	closeFn := func() {
		once.Do(func() {
			stop()
			_ = client.Close()
		})
	}
	return client, closeFn, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// scriptResult is what a remote script printed, and the tag its verdict
// lines must carry.
type scriptResult struct {
	Stdout string
	Stderr string
	Tag    string
}

// newTag draws the value a host script's verdict lines carry (KD_TAG): sent
// unexported, it never reaches a process run as the customer.
func newTag() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// hasLine says whether stdout has exactly this line.
func hasLine(stdout, line string) bool {
	for _, l := range strings.Split(stdout, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// runScript runs script with bash as root on the host, after common.sh when
// vars are given (the host scripts). The variables are sent on stdin ahead
// of the script, never on the command line, so secrets
// do not show in the host's process list. Each "KD_STEP name" line is
// reported to onStep as it arrives.
func (d *Driver) runScript(ctx context.Context, client *ssh.Client, script string, vars [][2]string, onStep func(string)) (scriptResult, error) {
	sess, err := client.NewSession()
	if err != nil {
		return scriptResult{}, fmt.Errorf("ssh session: %w", err)
	}
	defer sess.Close()
	var in bytes.Buffer
	tag := newTag()
	for _, kv := range vars {
		fmt.Fprintf(&in, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	if vars != nil {
		fmt.Fprintf(&in, "KD_TAG=%s\n", tag)
		in.WriteString(commonScript)
	}
	in.WriteString(script)
	sess.Stdin = &in
	var stderr bytes.Buffer
	sess.Stderr = &stderr
	out, err := sess.StdoutPipe()
	if err != nil {
		return scriptResult{}, fmt.Errorf("ssh stdout: %w", err)
	}
	cmd := "bash -s"
	if d.adminUser() != "root" {
		cmd = "sudo -n bash -s"
	}
	if err := sess.Start(cmd); err != nil {
		return scriptResult{}, fmt.Errorf("start remote script: %w", err)
	}
	var stdout strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		stdout.WriteString(line + "\n")
		if step, ok := strings.CutPrefix(line, "KD_STEP "); ok && onStep != nil {
			onStep(step)
		}
	}
	_, _ = io.Copy(io.Discard, out)
	err = sess.Wait()
	res := scriptResult{Stdout: stdout.String(), Stderr: stderr.String(), Tag: tag}
	if ctx.Err() != nil {
		return res, fmt.Errorf("remote script interrupted: %w", ctx.Err())
	}
	if err != nil {
		var exit *ssh.ExitError
		if errors.As(err, &exit) {
			return res, fmt.Errorf("remote script exited %d: %s", exit.ExitStatus(), lastLine(res.Stderr))
		}
		return res, fmt.Errorf("remote script: %w", err)
	}
	return res, nil
}

// run runs one command as root and returns its standard output.
func (d *Driver) run(ctx context.Context, client *ssh.Client, command string) (string, error) {
	res, err := d.runScript(ctx, client, command+"\n", nil, nil)
	return res.Stdout, err
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}
