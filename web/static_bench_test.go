package web

import (
	"bytes"
	stdgzip "compress/gzip"
	"io"
	"io/fs"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// pageSample is 26 KB of the site's own HTML (its templates, as read from
// the binary): about an order's page.
func pageSample(b *testing.B) []byte {
	b.Helper()
	var all []byte
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range names {
		raw, err := templateFS.ReadFile(n)
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, raw...)
	}
	return all[:26_000]
}

// The page compressor against the standard library's, each writer reused:
// go test ./web -run '^$' -bench PageZip -benchtime 2000x
func BenchmarkPageZip(b *testing.B) {
	page := pageSample(b)
	for _, c := range []struct {
		name string
		w    func(io.Writer) (io.WriteCloser, func(io.Writer))
	}{
		{"stdlib-default", func(w io.Writer) (io.WriteCloser, func(io.Writer)) {
			zw, _ := stdgzip.NewWriterLevel(w, stdgzip.DefaultCompression)
			return zw, zw.Reset
		}},
		{"stdlib-fastest", func(w io.Writer) (io.WriteCloser, func(io.Writer)) {
			zw, _ := stdgzip.NewWriterLevel(w, stdgzip.BestSpeed)
			return zw, zw.Reset
		}},
		{"klauspost-default", func(w io.Writer) (io.WriteCloser, func(io.Writer)) {
			zw, _ := gzip.NewWriterLevel(w, gzip.DefaultCompression)
			return zw, zw.Reset
		}},
		{"klauspost-fastest", func(w io.Writer) (io.WriteCloser, func(io.Writer)) {
			zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
			return zw, zw.Reset
		}},
		{"klauspost-stateless", func(w io.Writer) (io.WriteCloser, func(io.Writer)) {
			zw, _ := gzip.NewWriterLevel(w, gzip.StatelessCompression)
			return zw, zw.Reset
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var buf bytes.Buffer
			zw, reset := c.w(&buf)
			b.SetBytes(int64(len(page)))
			for b.Loop() {
				buf.Reset()
				reset(&buf)
				_, _ = zw.Write(page)
				_ = zw.Close()
			}
			b.ReportMetric(float64(buf.Len()), "bytes-out")
		})
	}
	b.Run("pageZip", func(b *testing.B) {
		var z pageZip
		b.SetBytes(int64(len(page)))
		var n int
		for b.Loop() {
			n = len(z.compress(page))
		}
		b.ReportMetric(float64(n), "bytes-out")
	})
}
