package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	"github.com/klauspost/compress/gzip"
)

//go:embed static
var staticFS embed.FS

// asset is one static file, kept raw and gzipped in memory.
type asset struct {
	contentType string
	raw, gz     []byte
	version     string // content hash, in the URL: the file can be cached for good
}

type assets struct {
	files map[string]*asset
}

func loadAssets() (*assets, error) {
	a := &assets{files: map[string]*asset{}}
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(raw)
		ct := mime.TypeByExtension(path.Ext(p))
		if path.Ext(p) == ".ico" {
			ct = "image/x-icon" // not in Go's built-in table
		}
		if ct == "" {
			ct = "application/octet-stream"
		}
		a.files[path.Base(p)] = &asset{contentType: ct, raw: raw, gz: gzipBytes(raw, gzip.BestCompression), version: hex.EncodeToString(sum[:6])}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("web static files: %w", err)
	}
	return a, nil
}

// url is the versioned address of a static file, for the templates.
func (a *assets) url(name string) (string, error) {
	f, ok := a.files[name]
	if !ok {
		return "", fmt.Errorf("no static file %q", name)
	}
	return "/static/" + name + "?v=" + f.version, nil
}

func (a *assets) serve(c *gin.Context) { a.serveFile(c, c.Param("file")) }

// favicon answers /favicon.ico, which browsers ask for on their own (the
// pages name it too, versioned: <link rel="icon">).
func (a *assets) favicon(c *gin.Context) { a.serveFile(c, "favicon.ico") }

func (a *assets) serveFile(c *gin.Context, name string) {
	f, ok := a.files[name]
	if !ok {
		c.Status(http.StatusNotFound)
		return
	}
	h := c.Writer.Header()
	if c.Query("v") == f.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	h.Set("ETag", `"`+f.version+`"`)
	if c.GetHeader("If-None-Match") == `"`+f.version+`"` {
		c.Status(http.StatusNotModified)
		return
	}
	h.Set("Vary", "Accept-Encoding")
	if acceptsGzip(c.Request) {
		h.Set("Content-Encoding", "gzip")
		c.Data(http.StatusOK, f.contentType, f.gz)
		return
	}
	c.Data(http.StatusOK, f.contentType, f.raw)
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(name) == "gzip" && strings.TrimSpace(q) != "q=0" {
			return true
		}
	}
	return false
}

// gzipBytes compresses b with a new writer (static files, once at start).
func gzipBytes(b []byte, level int) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, level)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// pageZip compresses pages as they are made (the tracked pages once per
// data: tracked.go; the others at each request). A gzip writer holds over
// 800 KB of state: made anew for each page it was most of a page's cost
// (pprof), so writers are reused. klauspost/compress at its fastest level
// takes 57-65 µs for 26 KB, against 100-110 at its default and 440 for the
// standard library's default, for 16 % more bytes than the latter
// (BenchmarkPageZip, BENCHMARKS.md).
type pageZip struct{ writers sync.Pool }

func (z *pageZip) compress(b []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(b) / 3)
	zw, ok := z.writers.Get().(*gzip.Writer)
	if ok {
		zw.Reset(&buf)
	} else {
		zw, _ = gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	}
	_, _ = zw.Write(b)
	_ = zw.Close()
	z.writers.Put(zw)
	return buf.Bytes()
}

// minZip is the size below which a page is sent as it is.
const minZip = 1024

// writeMade writes a made page as write would.
func (z *pageZip) writeMade(c *gin.Context, status int, m madePage) {
	send(c, status, "text/html; charset=utf-8", m.html, m.gz)
}

// write writes a rendered page, gzipped when accepted and worth it.
func (z *pageZip) write(c *gin.Context, status int, contentType string, body []byte) {
	var gz []byte
	if len(body) > minZip && acceptsGzip(c.Request) {
		gz = z.compress(body)
	}
	send(c, status, contentType, body, gz)
}

// send writes body, or its gzip when there is one and the client takes it.
func send(c *gin.Context, status int, contentType string, body, gz []byte) {
	c.Writer.Header().Set("Vary", "Accept-Encoding")
	if gz != nil && acceptsGzip(c.Request) {
		c.Writer.Header().Set("Content-Encoding", "gzip")
		c.Data(status, contentType, gz)
		return
	}
	c.Data(status, contentType, body)
}
