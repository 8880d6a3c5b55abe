// Package mailtest starts a real SMTP server for tests: mailpit, on free
// loopback ports with its own database, read back through its HTTP API.
package mailtest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Server is a running mailpit.
type Server struct {
	SMTPHost string
	SMTPPort int
	APIURL   string
	cmd      *exec.Cmd
}

// Message is a received message as mailpit lists it, with its bodies.
type Message struct {
	ID        string `json:"ID"`
	MessageID string `json:"MessageID"`
	Subject   string `json:"Subject"`
	To        []struct {
		Address string `json:"Address"`
	} `json:"To"`
	Text string `json:"Text"`
	HTML string `json:"HTML"`
}

// Binary finds mailpit: $KERNODECK_MAILPIT, PATH, then $(go env GOPATH)/bin.
func Binary() (string, error) {
	if p := os.Getenv("KERNODECK_MAILPIT"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("mailpit"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = string(out[:len(out)-1])
		}
	}
	p := filepath.Join(gopath, "bin", "mailpit")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("mailpit not found (go install github.com/axllent/mailpit@v1.33.1, or scripts/ensure-tools.sh)")
	}
	return p, nil
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs mailpit until the end of the test.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	smtpPort, httpPort := freePort(t), freePort(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "--smtp", "127.0.0.1:"+strconv.Itoa(smtpPort), "--listen", "127.0.0.1:"+strconv.Itoa(httpPort),
		"--smtp-auth-accept-any", "--smtp-auth-allow-insecure", "--database", filepath.Join(dir, "mailpit.db"),
		"--disable-version-check", "-q")
	logf, err := os.Create(filepath.Join(dir, "mailpit.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Server{SMTPHost: "127.0.0.1", SMTPPort: smtpPort, APIURL: fmt.Sprintf("http://127.0.0.1:%d", httpPort), cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(s.APIURL + "/api/v1/messages")
		if err == nil {
			resp.Body.Close()
			if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", smtpPort)); err == nil {
				c.Close()
				return s
			}
		}
		if time.Now().After(deadline) {
			raw, _ := os.ReadFile(filepath.Join(dir, "mailpit.log"))
			t.Fatalf("mailpit did not start: %v\n%s", err, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Messages returns every received message with its text and HTML bodies.
func (s *Server) Messages(t testing.TB) []Message {
	t.Helper()
	var list struct {
		Messages []Message `json:"messages"`
	}
	s.get(t, "/api/v1/messages?limit=500", &list)
	for i, m := range list.Messages {
		var full Message
		s.get(t, "/api/v1/message/"+m.ID, &full)
		list.Messages[i].Text, list.Messages[i].HTML = full.Text, full.HTML
	}
	return list.Messages
}

func (s *Server) get(t testing.TB, path string, v any) {
	t.Helper()
	resp, err := http.Get(s.APIURL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("mailpit %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("mailpit %s: %v", path, err)
	}
}
